/**
 * Headroom on a real Redis Cluster: 3 primaries with a replica each (redis-server with
 * cluster-enabled), every process (workers, balancers, the control plane; flags from a real
 * Unleash) given the redis+cluster:// URL. With the key prefix "hr", the
 * baseline's ledger ({hr:baseline}), the candidate's ({hr:candidate}) and the control keys
 * ({hr:control}) land on three different shards. The primary of the baseline's shard is killed
 * (kill -9) under load: the candidate keeps being served throughout, the control plane keeps
 * making changes, and the baseline comes back once the cluster promoted the replica. THE INVARIANT (src/invariant.ts) is checked after.
 */
import { after, before, test } from 'node:test';
import * as assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { clusterKeys, controlKeys } from '@headroom/fleet';
import {
  FleetWatch,
  TaskLog,
  demoTask,
  finishCase,
  keyPrefix,
  latencyMs,
  msUntil,
  percentile,
  readWorker,
  sleep,
  startClosedLoad,
  startControlPlaneProcess,
  startStack,
  startUnleashProcess,
  uniqueFlags,
  type Submission,
  type UnleashProcess,
} from '../src/index';

const healthyLatencyMs = 1500;

let unleash: UnleashProcess;
before(async () => {
  unleash = await startUnleashProcess();
});
after(() => unleash?.close());

function clusterOf(s: Submission): string | undefined {
  return s.answer?.ok ? s.answer.response.placement?.cluster : undefined;
}

/** The port of the primary that serves `key`'s slot, asked of a node that is up. */
async function primaryPortOf(node: Redis, key: string): Promise<number> {
  const slot = Number(await node.call('CLUSTER', 'KEYSLOT', key));
  const ranges = (await node.call('CLUSTER', 'SLOTS')) as [number, number, [string, number, ...unknown[]], ...unknown[]][];
  const range = ranges.find(([from, to]) => slot >= from && slot <= to);
  if (!range) throw new Error(`no node serves slot ${slot}`);
  return Number(range[2][1]);
}

test("Redis Cluster: each Headroom cluster on its own shard; kill -9 of one shard's primary stops only the cluster on it, until its replica takes over", async (t) => {
  const startedAtMs = performance.now();
  const flags = uniqueFlags(unleash);
  const stack = await startStack(t, {
    redis: 'cluster',
    workers: [
      ...['b0', 'b1'].map((workerId) => ({ workerId, cluster: 'baseline', maxParallelism: 3 })),
      ...['c0', 'c1'].map((workerId) => ({ workerId, cluster: 'candidate', maxParallelism: 3 })),
    ],
    balancerCount: 2,
    flags,
  });
  const control = await startControlPlaneProcess(t, stack.redisUrl, unleash.adminToken, flags, ['bank-a', 'bank-b']);
  // bank-a to the candidate, bank-b to the baseline.
  await control.api.setTraffic({ integrations: { 'bank-a': 100, 'bank-b': 0 } });
  const cluster = stack.cluster!;
  const ports = cluster.nodes.map((node) => node.port);
  const ask = async <T>(fn: (node: Redis) => Promise<T>, avoidPort?: number): Promise<T> => {
    const node = new Redis({ port: ports.find((port) => port !== avoidPort)!, maxRetriesPerRequest: 1, lazyConnect: true });
    node.on('error', () => undefined);
    try {
      return await fn(node);
    } finally {
      node.disconnect();
    }
  };
  const baselineKey = clusterKeys(keyPrefix, 'baseline').free;
  const [baselinePrimary, candidatePrimary, controlPrimary] = await ask((node) =>
    Promise.all([
      primaryPortOf(node, baselineKey),
      primaryPortOf(node, clusterKeys(keyPrefix, 'candidate').free),
      primaryPortOf(node, controlKeys(keyPrefix).override),
    ]),
  );
  assert.equal(new Set([baselinePrimary, candidatePrimary, controlPrimary]).size, 3, 'the two ledgers and the control keys are on three shards');

  const log = new TaskLog();
  const watch = new FleetWatch(stack).start();
  // 16 lanes for 12 slots: tasks queue, and wait for slots freed on their cluster's shard.
  const load = startClosedLoad(t, log, {
    lanes: 16,
    maxDurationMs: 40_000,
    balancerFor: (lane) => stack.balancers[lane % 2]!,
    taskFor: (lane, seq) =>
      demoTask({
        integration: seq % 2 === 0 ? 'bank-a' : 'bank-b',
        priority: lane % 4 === 0 ? 'USER_PRESENT' : 'BACKGROUND',
        sleepMs: 40 + (seq % 5) * 20,
        deadlineMs: 20_000,
      }),
  });
  await msUntil('both clusters serve tasks', 20_000, () => ['baseline', 'candidate'].every((c) => log.submissions.some((s) => clusterOf(s) === c)));
  await sleep(500);
  const killedAtMs = performance.now();
  await cluster.nodes.find((node) => node.port === baselinePrimary)!.stop(true);
  // The control plane (its keys on a third shard, the flags in Unleash) keeps making changes meanwhile.
  await control.api.setParallelism({ candidate: 2 });
  const changeAnsweredMs = Math.round(performance.now() - killedAtMs);
  const promotedMs = await msUntil(
    "the replica took over the baseline's slots",
    20_000,
    async () => {
      try {
        return (await ask((node) => primaryPortOf(node, baselineKey), baselinePrimary)) !== baselinePrimary;
      } catch {
        return false;
      }
    },
    killedAtMs,
  );
  assert.ok(changeAnsweredMs < promotedMs, `the change was answered (${changeAnsweredMs} ms after the kill) before the replica took over (${promotedMs} ms)`);
  const candidateParallelismMs = await msUntil(
    'the candidate workers at max parallelism 2',
    15_000,
    async () => (await Promise.all(stack.liveWorkers('candidate').map((w) => readWorker(w)))).every((w) => w.maxParallelism === 2),
    killedAtMs,
  );
  const baselineBackMs = await msUntil(
    'a baseline task sent after the promotion was served',
    20_000,
    () => log.submissions.some((s) => s.submittedAtMs > killedAtMs + promotedMs && clusterOf(s) === 'baseline'),
    killedAtMs,
  );
  await sleep(1500);
  await load.stop();

  // While the baseline's shard had no primary, the candidate's was served as before.
  const duringOutage = log.answeredBetween(killedAtMs, killedAtMs + promotedMs).filter((s) => clusterOf(s) === 'candidate');
  const candidateP99DuringOutage = Math.round(percentile(duringOutage.map(latencyMs), 99));
  const result = await finishCase(t, stack, log, watch, {
    name: "Redis Cluster shard failover (kill -9 of the baseline shard's primary)",
    startedAtMs,
    measuredMs: {
      nodeTimeout: cluster.nodeTimeoutMs,
      promoted: promotedMs,
      baselineServedAgain: baselineBackMs,
      candidateP99DuringOutage,
      changeAnswered: changeAnsweredMs,
      candidateParallelismChanged: candidateParallelismMs,
    },
    figures: { candidateTasksDuringOutage: duringOutage.length },
  });
  assert.ok(duringOutage.length >= 10, `the candidate kept being served while the baseline's shard was down: ${duringOutage.length} tasks`);
  assert.ok(candidateP99DuringOutage < healthyLatencyMs, `candidate p99 ${candidateP99DuringOutage} ms during the outage`);
  assert.ok(result.tally.ok > 0);
  assert.ok(baselineBackMs < 15_000, `baseline served again ${baselineBackMs} ms after the kill`);
});
