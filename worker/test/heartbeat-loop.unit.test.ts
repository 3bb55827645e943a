import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { silentLogger, type RuntimeSample } from '@headroom/common';
import type { HeartbeatInput, HeartbeatReply, WorkerReport } from '@headroom/fleet';
import { Registry } from 'prom-client';
import { HeartbeatLoop, workerReportTtlMs } from '../src/heartbeat-loop';
import { ParallelismGate } from '../src/gate';
import { createWorkerMetrics } from '../src/metrics';
import { SelfProtection } from '../src/self-protection';

const calm: RuntimeSample = { heapUsedBytes: 100, heapLimitBytes: 1000, gcTimeRatio: 0, eventLoopUtilization: 0.1, eventLoopDelayP99Ms: 10 };
const flush = () => new Promise((resolve) => setImmediate(resolve));
const okReply: HeartbeatReply = { drainRequested: false, inflight: 0, markedUnreachable: false, heartbeatScale: 1, leasesDropped: 0, leasesRestored: 0 };

/** A loop on a fake ledger, flag source, runtime and clock: heartbeatIntervalMs 1000, reports every 5000, protection checks every 500. */
function setUp(t: TestContext, options: { eventLoopLineMs?: number; maxParallelism?: number } = {}) {
  t.mock.timers.enable({ apis: ['setTimeout', 'setInterval'] });
  const beats: Array<Omit<HeartbeatInput, 'heldLeaseIds'> & { heldLeaseIds: string[] }> = [];
  let reply: HeartbeatReply = okReply;
  let failNext = false;
  const published: Array<{ report: WorkerReport; ttlMs: number }> = [];
  const gate = new ParallelismGate(options.maxParallelism ?? 4);
  let sample = calm;
  const protection = new SelfProtection({ eventLoopDelayP99Ms: options.eventLoopLineMs ?? 0, heapShare: 0 }, () => sample);
  const flag = { value: undefined as number | undefined, listeners: [] as Array<() => void> };
  let nowMs = 0;
  let draining = false;
  let drainRequests = 0;
  const loop = new HeartbeatLoop(
    {
      workerId: 'w',
      cluster: 'c',
      address: '127.0.0.1:1',
      ledger: {
        heartbeat: async (_cluster, input) => {
          beats.push({ ...input, heldLeaseIds: [...input.heldLeaseIds] });
          if (failNext) {
            failNext = false;
            throw new Error('redis down');
          }
          return reply;
        },
        ejectionReason: async () => null,
      },
      reports: {
        publish: async (_workerId, report, ttlMs) => void published.push({ report, ttlMs }),
        remove: async () => undefined,
      },
      reporter: {
        next: () => ({ atUnixMs: nowMs, ...calm, latencyP50Ms: null, latencyP99Ms: null, tasksPerSecond: 0, errorsPerSecond: 0 }),
        close: () => undefined,
      },
      gate,
      tasks: {
        heldLeaseIds: function* () {
          yield 'w|a';
        },
      },
      protection,
      flags: {
        maxParallelism: () => flag.value,
        onChange: (listener) => {
          flag.listeners.push(listener);
          return () => flag.listeners.splice(flag.listeners.indexOf(listener), 1);
        },
      },
      metrics: createWorkerMetrics(new Registry(), () => gate, protection),
      logger: silentLogger,
      isDraining: () => draining,
      drainRequested: () => drainRequests++,
      nowMs: () => nowMs,
    },
    { heartbeatIntervalMs: 1000, reportIntervalMs: 5000, protectCheckIntervalMs: 500, maxParallelism: options.maxParallelism ?? 4 },
  );
  t.after(() => loop.stop());
  return {
    loop,
    gate,
    beats,
    published,
    flag,
    setReply: (next: Partial<HeartbeatReply>) => (reply = { ...okReply, ...next }),
    failNextBeat: () => (failNext = true),
    setSample: (next: Partial<RuntimeSample>) => (sample = { ...calm, ...next }),
    advanceClock: (ms: number) => (nowMs += ms),
    drain: () => (draining = true),
    drainRequests: () => drainRequests,
    /** Moves the fake timers on by `ms` and lets the heartbeats that fired finish. */
    tick: async (ms: number) => {
      t.mock.timers.tick(ms);
      await flush();
    },
  };
}

test('a heartbeat tells the ledger the capacity, the held leases and the grace of one period; the period scales as the ledger says', async (t) => {
  const { loop, beats, setReply, tick } = setUp(t);
  await loop.beat();
  assert.deepEqual(beats[0], {
    workerId: 'w',
    address: '127.0.0.1:1',
    capacity: 4,
    draining: false,
    heldLeaseIds: ['w|a'],
    dispatchGraceMs: 1000,
    addressUnchanged: false,
  });
  setReply({ heartbeatScale: 3 });
  await loop.beat();
  assert.equal(loop.periodMs, 3000);
  loop.start();
  await tick(2999);
  assert.equal(beats.length, 2, 'a cluster three times the full-rate size beats every third interval');
  await tick(1);
  assert.equal(beats.length, 3);
  assert.deepEqual([beats[2]!.dispatchGraceMs, beats[2]!.addressUnchanged], [3000, true]);
  setReply({ heartbeatScale: 1 });
  await tick(3000);
  assert.equal(beats.length, 4);
  await tick(1000);
  assert.equal(beats.length, 5, 'back to every interval once the cluster shrank');
});

test('a failed heartbeat is counted and the next one still comes a period later', async (t) => {
  const { loop, beats, failNextBeat, tick } = setUp(t);
  loop.start();
  failNextBeat();
  await tick(1000);
  assert.equal(loop.failures, 1);
  await tick(1000);
  assert.deepEqual([beats.length, loop.failures], [2, 1]);
});

test('a change of the max-parallelism flag sets the gate and is advertised at once; the own setting holds without the flag', async (t) => {
  const { loop, gate, beats, flag } = setUp(t);
  loop.followChanges();
  flag.value = 9;
  for (const listener of flag.listeners) listener();
  await flush();
  assert.equal(gate.maxParallelism, 9);
  assert.deepEqual(
    beats.map((beat) => beat.capacity),
    [9],
  );
  flag.value = undefined;
  for (const listener of flag.listeners) listener();
  await flush();
  assert.equal(gate.maxParallelism, 4);
  await loop.setOwnMaxParallelism(6);
  assert.equal(gate.maxParallelism, 6);
  assert.deepEqual(
    beats.map((beat) => beat.capacity),
    [9, 4, 4, 6],
    'a heartbeat that changed the max parallelism is followed by one that advertises it',
  );
});

test('self-protection halves the advertised slots within one check of a stalled event loop, and restores them after', async (t) => {
  const { loop, gate, beats, setSample, tick } = setUp(t, { eventLoopLineMs: 100, maxParallelism: 8 });
  loop.followChanges();
  setSample({ eventLoopDelayP99Ms: 500 });
  await tick(500);
  assert.equal(gate.maxParallelism, 4);
  assert.deepEqual(
    beats.map((beat) => beat.capacity),
    [4],
  );
  setSample({ eventLoopDelayP99Ms: 10 });
  await tick(500);
  assert.equal(gate.maxParallelism, 8);
  assert.deepEqual(
    beats.map((beat) => beat.capacity),
    [4, 8],
  );
});

test('a draining worker does not advertise a flag change (its capacity is leaving the ledger)', async (t) => {
  const { loop, gate, beats, flag, drain } = setUp(t);
  loop.followChanges();
  drain();
  flag.value = 9;
  for (const listener of flag.listeners) listener();
  await flush();
  assert.deepEqual([gate.maxParallelism, beats.length], [4, 0]);
});

test('the report rides with the heartbeat once due; a drain request from the ledger is passed on once', async (t) => {
  const { loop, published, advanceClock, setReply, drainRequests, tick } = setUp(t);
  loop.start();
  advanceClock(1000);
  await tick(1000);
  assert.equal(published.length, 0, 'not due before reportIntervalMs');
  advanceClock(4000);
  await tick(1000);
  assert.equal(published.length, 1);
  assert.deepEqual([published[0]!.ttlMs, published[0]!.report.selfProtection], [workerReportTtlMs(5000), null]);
  setReply({ drainRequested: true });
  await loop.beat();
  assert.equal(drainRequests(), 1);
});
