/**
 * Ledger property 2, no leaked capacity: real worker and balancer processes on a private
 * Redis, broken on purpose under load. Afterwards every live worker's free slots equal its
 * max parallelism (no task runs once the load stopped), dead workers are gone, no lease is
 * left, and every Submit got exactly one answer: a result or a coded error.
 */
import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import * as path from 'node:path';
import * as grpc from '@grpc/grpc-js';
import { Ledger } from '@headroom/fleet';
import { BalancerService, type BalancerClient } from '@headroom/proto';
import { eventually, startPrivateRedis, type PrivateRedis } from '@headroom/common/dist/src/testing';
import { connected, demoHandlersPath, json, spawnReady, submit, task, type ReadyProcess, type SubmitResult } from './harness';

const root = path.join(__dirname, '..', '..', '..');
const workerCli = path.join(root, 'worker', 'dist', 'src', 'cli.js');
const balancerCli = path.join(root, 'balancer', 'dist', 'src', 'cli.js');
const maxParallelism = 3;
const heartbeatIntervalMs = 200;
const heartbeatTimeoutMs = 1000;

interface Stack {
  redis: PrivateRedis;
  ledger: Ledger;
  workers: ReadyProcess[];
  balancers: ReadyProcess[];
  clients: BalancerClient[];
}

async function startStack(t: TestContext, workerCount: number, balancerCount: number): Promise<Stack> {
  const redis = await startPrivateRedis();
  const common = ['--redis-url', redis.url, '--key-prefix', 'hr'];
  const workers = await Promise.all(
    Array.from({ length: workerCount }, (_, i) =>
      spawnReady(t, workerCli, [...common, '--cluster', 'baseline', '--worker-id', `w${i}`, '--handlers', demoHandlersPath, '--max-parallelism', String(maxParallelism), '--heartbeat-interval-ms', String(heartbeatIntervalMs)]),
    ),
  );
  const balancers = await Promise.all(
    Array.from({ length: balancerCount }, (_, i) =>
      spawnReady(t, balancerCli, [...common, '--balancer-id', `b${i}`, '--heartbeat-timeout-ms', String(heartbeatTimeoutMs), '--kept-for-user-present-share', '0', '--metrics-port', '0']),
    ),
  );
  const clients = balancers.map((b) => new BalancerService(b.ready.address, grpc.credentials.createInsecure()));
  const ledgerRedis = await connected(redis.url);
  const ledger = new Ledger(ledgerRedis, { keyPrefix: 'hr' });
  t.after(async () => {
    for (const client of clients) client.close();
    await Promise.all([...balancers, ...workers].map((p) => p.kill('SIGKILL')));
    ledgerRedis.disconnect();
    await redis.stop(true);
  });
  return { redis, ledger, workers, balancers, clients };
}

/** Keeps `concurrency` tasks in flight, spread over the clients, until `stop` resolves. */
async function load(clients: () => BalancerClient[], stop: Promise<void>, concurrency = 12, maxTasks = 5000): Promise<SubmitResult[]> {
  const results: SubmitResult[] = [];
  let stopped = false;
  void stop.then(() => (stopped = true));
  let sent = 0;
  await Promise.all(
    Array.from({ length: concurrency }, async (_, lane) => {
      while (!stopped && sent < maxTasks) {
        sent++;
        const list = clients();
        const client = list[(lane + sent) % list.length]!;
        results.push(await submit(client, task({ priority: lane % 4 === 0 ? 'USER_PRESENT' : 'BACKGROUND', payload: json({ sleepMs: 20 + (sent % 5) * 15 }), deadlineUnixMs: Date.now() + 8000 }), 10_000));
      }
    }),
  );
  return results;
}

async function assertConverged(stack: Stack, liveWorkerIds: string[]): Promise<void> {
  await eventually('ledger converged', 8000, async () => {
    const snap = await stack.ledger.snapshot('baseline');
    const ids = snap.workers.map((w) => w.workerId);
    const ok =
      JSON.stringify(ids) === JSON.stringify([...liveWorkerIds].sort()) &&
      snap.workers.every((w) => w.freeSlots === maxParallelism && w.inflight === 0) &&
      snap.totalFree === maxParallelism * liveWorkerIds.length &&
      snap.totalCapacity === maxParallelism * liveWorkerIds.length &&
      snap.leases === 0;
    if (!ok) throw new Error(JSON.stringify({ ids, workers: snap.workers.map((w) => [w.workerId, w.freeSlots, w.inflight]), totalFree: snap.totalFree, leases: snap.leases }));
    return true;
  });
}

/** Every answer is a result or carries a Headroom error code: nothing hung past its deadline unanswered. */
function assertAllAnswered(results: SubmitResult[], allowedUncoded: grpc.status[] = []): Record<string, number> {
  const tally: Record<string, number> = {};
  for (const r of results) {
    const key = r.ok ? 'ok' : r.code || `status-${grpc.status[r.status]}`;
    tally[key] = (tally[key] ?? 0) + 1;
    if (!r.ok && !r.code) assert.ok(allowedUncoded.includes(r.status), `an answer without a code: ${grpc.status[r.status]} ${r.details}`);
  }
  return tally;
}

test('kill -9 a balancer mid-load: its clients see errors, others are unaffected, its slots come back', async (t) => {
  const stack = await startStack(t, 3, 2);
  let release!: () => void;
  const stop = new Promise<void>((resolve) => (release = resolve));
  const survivors = load(() => [stack.clients[0]!], stop, 6);
  const victims = load(() => [stack.clients[1]!], stop, 6);
  await new Promise((resolve) => setTimeout(resolve, 800));
  await stack.balancers[1]!.kill('SIGKILL');
  await new Promise((resolve) => setTimeout(resolve, 800));
  release();
  const [ok, lost] = await Promise.all([survivors, victims]);
  const survivorTally = assertAllAnswered(ok);
  assert.deepEqual(Object.keys(survivorTally), ['ok'], JSON.stringify(survivorTally));
  assert.ok(survivorTally.ok! > 20);
  // The surviving balancer's /metrics counts what it served.
  const metrics = await (await fetch(`http://127.0.0.1:${stack.balancers[0]!.ready.metricsPort}/metrics`)).text();
  const served = /^headroom_balancer_tasks_total\{cluster="baseline",priority="user_present",outcome="ok"\} (\d+)$/m.exec(metrics);
  assert.ok(served && Number(served[1]) > 0, metrics.slice(0, 500));
  // The killed balancer's clients get connection errors (UNAVAILABLE), nothing else.
  assertAllAnswered(lost, [grpc.status.UNAVAILABLE]);
  await assertConverged(stack, ['w0', 'w1', 'w2']);
});

test('kill -9 a worker mid-load: new tasks go elsewhere, started ones get a coded error, it leaves the ledger', async (t) => {
  const stack = await startStack(t, 3, 2);
  let release!: () => void;
  const stop = new Promise<void>((resolve) => (release = resolve));
  const running = load(() => stack.clients, stop, 12);
  await new Promise((resolve) => setTimeout(resolve, 800));
  await stack.workers[0]!.kill('SIGKILL');
  await new Promise((resolve) => setTimeout(resolve, 1500));
  release();
  const results = await running;
  const tally = assertAllAnswered(results);
  for (const code of Object.keys(tally)) assert.ok(['ok', 'HR_ERR_WORKER_LOST'].includes(code), JSON.stringify(tally));
  assert.ok((tally.HR_ERR_WORKER_LOST ?? 0) <= maxParallelism, `only tasks running on the dead worker fail: ${JSON.stringify(tally)}`);
  await assertConverged(stack, ['w1', 'w2']);
});

for (const fault of ['restart', 'flushall'] as const) {
  test(`Redis ${fault === 'restart' ? 'restarted' : 'flushed (FLUSHALL)'} mid-load: everything reconnects and the ledger is rebuilt`, async (t) => {
    const stack = await startStack(t, 3, 2);
    let release!: () => void;
    const stop = new Promise<void>((resolve) => (release = resolve));
    const running = load(() => stack.clients, stop, 12);
    await new Promise((resolve) => setTimeout(resolve, 800));
    if (fault === 'restart') {
      await stack.redis.stop(true);
      await new Promise((resolve) => setTimeout(resolve, 300));
      await stack.redis.start();
    } else {
      await stack.ledger.redis.flushall();
    }
    // Service comes back: a task submitted now succeeds.
    const probeStartedAt = Date.now();
    await eventually('service back', 8000, async () => ((await submit(stack.clients[0]!, task({ integration: 'echo' }), 3000)).ok ? true : undefined));
    const degradedMs = Date.now() - probeStartedAt;
    await new Promise((resolve) => setTimeout(resolve, 500));
    release();
    const tally = assertAllAnswered(await running);
    t.diagnostic(`outcomes ${JSON.stringify(tally)}; service back ${degradedMs} ms after the ${fault}`);
    assert.ok(tally.ok! > 20, JSON.stringify(tally));
    await assertConverged(stack, ['w0', 'w1', 'w2']);
  });
}
