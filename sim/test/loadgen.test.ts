import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import type { Redis } from 'ioredis';
import { testRedisUrl, uniquePrefix } from '@headroom/common/dist/src/testing';
import { clusterKeys, connectRedis } from '@headroom/fleet';
import { createBalancer, type BalancerOptions } from '@headroom/balancer';
import { createWorker } from '@headroom/worker';
import { handlers } from '../src/handlers/demo';
import { LatencyHistogram, Workload, integrationProfiles, startLoadGenerator } from '../src/loadgen';

async function connected(subscriber = false): Promise<Redis> {
  const redis = connectRedis(testRedisUrl, subscriber ? { enableOfflineQueue: true, enableAutoPipelining: false } : {});
  await new Promise((resolve) => redis.once('ready', resolve));
  return redis;
}

/** A balancer and one worker per cluster in this process, under a key prefix of their own. */
async function startFleet(t: TestContext, balancerOptions: BalancerOptions, maxParallelism: number): Promise<string> {
  const keyPrefix = uniquePrefix('loadgen');
  const redis = await connected();
  const subscriber = await connected(true);
  const workers = await Promise.all(
    ['baseline', 'candidate'].map((cluster) => createWorker({ cluster, maxParallelism, heartbeatIntervalMs: 200 }, { redis, handlers, ledger: { keyPrefix } })),
  );
  const balancer = await createBalancer({ heartbeatTimeoutMs: 1000, ...balancerOptions }, { redis, subscriber, ledger: { keyPrefix } });
  t.after(async () => {
    await balancer.close();
    await Promise.all(workers.map((worker) => worker.destroy()));
    await redis.del(...['baseline', 'candidate'].flatMap((cluster) => clusterKeys(keyPrefix, cluster).all));
    redis.disconnect();
    subscriber.disconnect();
  });
  return balancer.address;
}

test('the histogram gives percentiles within 1%', () => {
  const histogram = new LatencyHistogram();
  for (let ms = 1; ms <= 1000; ms++) histogram.record(ms);
  const summary = histogram.summary();
  assert.equal(summary.count, 1000);
  for (const [got, want] of [[summary.p50Ms, 500], [summary.p95Ms, 950], [summary.p99Ms, 990]] as const) {
    assert.ok(Math.abs(got - want) <= want * 0.01, `got ${got}, want ${want} (±1%)`);
  }
  assert.equal(summary.maxMs, 1000);
  assert.equal(new LatencyHistogram().summary().p99Ms, 0);
});

test('the workload mixes priorities, keys and log-normal upstream times as configured', () => {
  const options = {
    integrations: ['bank-a', 'bank-b', 'bank-c'],
    medianSleepMsRange: [20, 80] as const,
    sleepSigma: 0.8,
    maxSleepMs: 2000,
    userPresentShare: 0.1,
    keyCount: 50,
    taskTimeoutMs: 10_000,
  };
  assert.deepEqual(
    integrationProfiles(options).map((p) => p.medianSleepMs),
    [20, 50, 80],
  );
  const workload = new Workload(options);
  const sleeps = new Map<string, number[]>();
  let userPresent = 0;
  const draws = 20_000;
  for (let i = 0; i < draws; i++) {
    const task = workload.next(1_000);
    if (task.priority === 'USER_PRESENT') userPresent++;
    assert.match(task.key!, /^account-([0-9]|[1-4][0-9])$/);
    assert.equal(task.deadlineUnixMs, 11_000);
    const { sleepMs } = JSON.parse(task.payload!.toString()) as { sleepMs: number };
    assert.ok(sleepMs >= 0 && sleepMs <= 2000);
    sleeps.set(task.integration!, [...(sleeps.get(task.integration!) ?? []), sleepMs]);
  }
  assert.ok(Math.abs(userPresent / draws - 0.1) < 0.015, `${userPresent} of ${draws} user-present`);
  for (const [integration, median] of [['bank-a', 20], ['bank-b', 50], ['bank-c', 80]] as const) {
    const sorted = sleeps.get(integration)!.sort((a, b) => a - b);
    const p50 = sorted[Math.floor(sorted.length / 2)]!;
    const p99 = sorted[Math.floor(sorted.length * 0.99)]!;
    assert.ok(Math.abs(p50 - median) <= median * 0.15, `${integration}: median ${p50}, want ${median}`);
    assert.ok(p99 > median * 4, `${integration}: p99 ${p99} shows a heavy tail`);
  }
});

test('sends at the set rate and reports answers by cluster and priority', async (t) => {
  const balancerAddress = await startFleet(t, { candidatePercent: 50 }, 20);
  const generator = startLoadGenerator({ balancerAddress, ratePerS: 100, medianSleepMsRange: [5, 10], keyCount: 500, userPresentShare: 0.2 });
  await new Promise((resolve) => setTimeout(resolve, 1000));
  const report = await generator.close();
  const { total } = report;
  assert.ok(total.sent >= 85 && total.sent <= 101, `sent ${total.sent} in about 1 s at 100/s`);
  assert.equal(total.completed, total.sent, JSON.stringify(total.rejectedByCode));
  assert.equal(total.rejected, 0);
  assert.equal(total.droppedOutstandingLimit + total.droppedBehindSchedule, 0);
  assert.equal(report.outstandingCalls, 0);
  for (const cluster of ['baseline', 'candidate']) {
    const figures = total.clusters[cluster];
    assert.ok(figures && figures.completed > 10, `${cluster}: ${JSON.stringify(figures)}`);
    const { USER_PRESENT, BACKGROUND } = figures.latencyMs;
    assert.equal(USER_PRESENT.count + BACKGROUND.count, figures.completed);
    assert.ok(BACKGROUND.p50Ms >= 3 && BACKGROUND.p50Ms <= BACKGROUND.p99Ms, JSON.stringify(BACKGROUND));
  }
  // close() is idempotent.
  assert.equal(await generator.close(), report);
});

test('tasks due while too many calls await answers are dropped and counted, not queued', async (t) => {
  const balancerAddress = await startFleet(t, { candidatePercent: 0 }, 10);
  const generator = startLoadGenerator({
    balancerAddress,
    ratePerS: 50,
    maxOutstandingCalls: 3,
    medianSleepMsRange: [300, 300],
    sleepSigma: 0,
    userPresentShare: 0,
  });
  await new Promise((resolve) => setTimeout(resolve, 1000));
  assert.ok(generator.outstandingCalls <= 3);
  const { total } = await generator.close();
  assert.ok(total.droppedOutstandingLimit >= 30, `dropped ${total.droppedOutstandingLimit}`);
  assert.ok(total.sent <= 12, `sent ${total.sent}`);
  assert.equal(total.sent, total.completed + total.rejected);
});
