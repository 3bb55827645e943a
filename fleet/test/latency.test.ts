import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { deleteKeysUnder, startPrivateRedis, testRedisUrl, uniquePrefix } from '@headroom/testkit';
import {
  BalancerErrorRecorder,
  LatencyHistogram,
  LatencyRecorder,
  connectRedis,
  latencyBucketOf,
  latencyBucketValueMs,
  latencyKeys,
  parseBalancerErrors,
  readBalancerErrors,
  readLatency,
  readLatencySlots,
  type BalancerErrorCount,
} from '../src/index';

async function connect(t: import('node:test').TestContext, url = testRedisUrl, beforeDisconnect?: (redis: ReturnType<typeof connectRedis>) => Promise<void>) {
  const redis = connectRedis(url, { enableOfflineQueue: true });
  await new Promise((resolve) => redis.once('ready', resolve));
  t.after(async () => {
    await beforeDisconnect?.(redis);
    redis.disconnect();
  });
  return redis;
}

const within = (actual: number | undefined, expected: number, share = 0.05) =>
  assert.ok(actual !== undefined && Math.abs(actual - expected) <= expected * share, `${actual} is not within ${share * 100}% of ${expected}`);

test('a bucket stands for its latencies within 4.5%', () => {
  for (const ms of [1.5, 7, 42, 100, 999, 12_345, 600_000]) within(latencyBucketValueMs(latencyBucketOf(ms)), ms, 0.045);
  assert.equal(latencyBucketOf(0.2), 0);
  const histogram = new LatencyHistogram();
  for (let ms = 1; ms <= 1000; ms++) histogram.add(latencyBucketOf(ms));
  within(histogram.quantileMs(0.5), 500);
  within(histogram.quantileMs(0.95), 950);
  within(histogram.quantileMs(0.99), 990);
  assert.equal(new LatencyHistogram().quantileMs(0.5), undefined);
});

test('several workers report to Redis; a window merges them and leaves older slots out', async (t) => {
  const keyPrefix = uniquePrefix('latency');
  const redis = await connect(t, testRedisUrl, async (connection) => {
    await deleteKeysUnder(connection, keyPrefix);
  });
  const now = Date.now();
  const workerA = new LatencyRecorder(redis, { keyPrefix, cluster: 'baseline' });
  const workerB = new LatencyRecorder(redis, { keyPrefix, cluster: 'baseline' });
  const candidate = new LatencyRecorder(redis, { keyPrefix, cluster: 'candidate' });
  // 1..200 ms split over two workers and two slots; the candidate twice as slow on bank-a.
  for (let ms = 1; ms <= 200; ms++) {
    (ms % 2 ? workerA : workerB).record('bank-a', ms, now - (ms % 3) * 10_000);
    candidate.record('bank-a', 2 * ms, now);
  }
  candidate.record('bank-b', 50, now);
  // Ten minutes ago: outside a 5-minute window.
  for (let i = 0; i < 1000; i++) workerA.record('bank-a', 5000, now - 600_000);
  await Promise.all([workerA.flush(), workerB.flush(), candidate.flush()]);

  const recent = await readLatency(redis, keyPrefix, 300_000, { nowUnixMs: now });
  const baselineA = recent.get('baseline')!.get('bank-a')!;
  assert.equal(baselineA.total, 200);
  within(baselineA.quantileMs(0.5), 100);
  within(baselineA.quantileMs(0.99), 198);
  within(recent.get('candidate')!.get('bank-a')!.quantileMs(0.5), 200);
  assert.equal(recent.get('candidate')!.get('bank-b')!.total, 1);
  assert.equal(recent.get('baseline')!.get('bank-b'), undefined);

  const hour = await readLatency(redis, keyPrefix, 3_600_000, { nowUnixMs: now });
  assert.equal(hour.get('baseline')!.get('bank-a')!.total, 1200);
  const ttl = await redis.pttl(latencyKeys(keyPrefix).slot(now - (now % 10_000)));
  assert.ok(ttl > 3_500_000 && ttl <= 3_610_000, `slots expire after the retention: ${ttl}`);
});

test('failures are counted per slot apart from the latencies, and slots read oldest first', async (t) => {
  const keyPrefix = uniquePrefix('latency-slots');
  const redis = await connect(t, testRedisUrl, async (connection) => {
    await deleteKeysUnder(connection, keyPrefix);
  });
  const slotStart = 1_800_000_000_000;
  const recorder = new LatencyRecorder(redis, { keyPrefix, cluster: 'candidate' });
  for (let i = 0; i < 30; i++) recorder.record('bank-a', 20, slotStart + i);
  for (let i = 0; i < 3; i++) recorder.recordFailure('bank-a', slotStart + i);
  recorder.recordFailure('bank-b', slotStart + 10_000);
  await recorder.flush();

  const slots = await readLatencySlots(redis, keyPrefix, 20_000, { nowUnixMs: slotStart + 15_000 });
  assert.deepEqual(
    slots.map((slot) => slot.startUnixMs),
    [slotStart - 10_000, slotStart, slotStart + 10_000],
  );
  assert.equal(slots[0]!.clusters.size, 0);
  const first = slots[1]!.clusters.get('candidate')!.get('bank-a')!;
  assert.deepEqual([first.total, first.failed], [30, 3]);
  within(first.quantileMs(0.5), 20);
  const second = slots[2]!.clusters.get('candidate')!.get('bank-b')!;
  assert.deepEqual([second.total, second.failed, second.quantileMs(0.5)], [0, 1, undefined]);
  const merged = await readLatency(redis, keyPrefix, 20_000, { nowUnixMs: slotStart + 15_000 });
  assert.equal(merged.get('candidate')!.get('bank-a')!.failed, 3);
});

test('what a worker counted while Redis was away reaches Redis when it is back', async (t) => {
  const server = await startPrivateRedis();
  t.after(() => server.stop(true));
  const redis = await connect(t, server.url);
  const recorder = new LatencyRecorder(redis, { keyPrefix: 'lat', cluster: 'candidate' });
  for (let i = 0; i < 10; i++) recorder.record('bank-a', 40);
  await server.stop(true);
  await assert.rejects(recorder.flush(), { code: 'HR_ERR_LEDGER_UNAVAILABLE' });
  for (let i = 0; i < 5; i++) recorder.record('bank-a', 40);
  await server.start();
  await new Promise((resolve) => (redis.status === 'ready' ? resolve(undefined) : redis.once('ready', resolve)));
  await recorder.flush();
  const read = await readLatency(redis, 'lat', 60_000);
  assert.equal(read.get('candidate')!.get('bank-a')!.total, 15);
  assert.equal(recorder.dropped, 0);
});

test("balancers' errors are counted per slot by cluster, integration and code: read as rates, and as failed tasks of their cluster and integration", async (t) => {
  const keyPrefix = uniquePrefix('balancer-errors');
  const redis = await connect(t, testRedisUrl, async (connection) => {
    await deleteKeysUnder(connection, keyPrefix);
  });
  const slotStart = 1_800_000_000_000;
  const balancerA = new BalancerErrorRecorder(redis, { keyPrefix });
  const balancerB = new BalancerErrorRecorder(redis, { keyPrefix });
  for (let i = 0; i < 6; i++) balancerA.record('baseline', 'bank-slow', 'HR_ERR_DEADLINE_EXCEEDED', slotStart + 1000 + i);
  balancerB.record('baseline', 'bank-slow', 'HR_ERR_DEADLINE_EXCEEDED', slotStart + 12_000);
  balancerB.record('baseline', 'bank-a', 'HR_ERR_QUEUE_FULL', slotStart + 12_000);
  balancerB.record('candidate', 'bank-slow', 'HR_ERR_SHED', slotStart - 30_000);
  await Promise.all([balancerA.flush(), balancerB.flush()]);
  const worker = new LatencyRecorder(redis, { keyPrefix, cluster: 'baseline' });
  worker.record('bank-slow', 900, slotStart + 2000);
  worker.recordFailure('bank-slow', slotStart + 2000);
  await worker.flush();

  // Over the last 10 s at slotStart + 15 s: the two slots that overlap it, 15 s of them.
  const rates = await readBalancerErrors(redis, keyPrefix, 10_000, { nowUnixMs: slotStart + 15_000 });
  assert.equal(rates.seconds, 15);
  const byKey = (counts: BalancerErrorCount[]) => counts.map((c) => `${c.cluster} ${c.integration} ${c.code} ${c.count}`).sort();
  assert.deepEqual(byKey(rates.counts), ['baseline bank-a HR_ERR_QUEUE_FULL 1', 'baseline bank-slow HR_ERR_DEADLINE_EXCEEDED 7']);
  // The latency summaries count them as failed tasks, beside the workers' own failures.
  const merged = await readLatency(redis, keyPrefix, 60_000, { nowUnixMs: slotStart + 15_000 });
  const slow = merged.get('baseline')!.get('bank-slow')!;
  assert.deepEqual([slow.total, slow.failed], [1, 8]);
  assert.deepEqual([merged.get('baseline')!.get('bank-a')!.failed, merged.get('candidate')!.get('bank-slow')!.failed], [1, 1]);
  const ttl = await redis.pttl(latencyKeys(keyPrefix).balancerErrorSlot(slotStart));
  assert.ok(ttl > 3_500_000 && ttl <= 3_610_000, `slots expire after the retention: ${ttl}`);
  assert.deepEqual(parseBalancerErrors({ 'baseline\tbank-a\tHR_ERR_SHED': '2', 'not a field of ours': '1', 'a\tb\tc\td': '1', 'a\tb\tc': 'x' }), [
    { cluster: 'baseline', integration: 'bank-a', code: 'HR_ERR_SHED', count: 2 },
  ]);
});

test('what a balancer counted while Redis was away reaches Redis when it is back', async (t) => {
  const server = await startPrivateRedis();
  t.after(() => server.stop(true));
  const redis = await connect(t, server.url);
  const recorder = new BalancerErrorRecorder(redis, { keyPrefix: 'errors' });
  recorder.record('baseline', 'bank-a', 'HR_ERR_DEADLINE_EXCEEDED');
  await server.stop(true);
  await assert.rejects(recorder.flush(), { code: 'HR_ERR_LEDGER_UNAVAILABLE' });
  recorder.record('baseline', 'bank-a', 'HR_ERR_DEADLINE_EXCEEDED');
  await server.start();
  await new Promise((resolve) => (redis.status === 'ready' ? resolve(undefined) : redis.once('ready', resolve)));
  await recorder.flush();
  assert.deepEqual((await readBalancerErrors(redis, 'errors', 10_000)).counts, [
    { cluster: 'baseline', integration: 'bank-a', code: 'HR_ERR_DEADLINE_EXCEEDED', count: 2 },
  ]);
  assert.equal(recorder.dropped, 0);
});
