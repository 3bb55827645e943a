import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as v8 from 'node:v8';
import * as vm from 'node:vm';
import { RuntimeSampler, type RuntimeSample } from '@headroom/common';
import { WorkerReports } from '@headroom/fleet';
import { eventLoopBlocker, eventually, startFleet, submit, task } from '@headroom/testkit';
import { SelfProtection, recoveryFraction, type ProtectionState } from '../src/index';

const calm: RuntimeSample = { heapUsedBytes: 100, heapLimitBytes: 1000, gcTimeRatio: 0, eventLoopUtilization: 0.1, eventLoopDelayP99Ms: 10 };

test('self-protection halves the advertised slots per check over a line, down to one, holds in the band, doubles back below it', () => {
  let sample = calm;
  const protection = new SelfProtection({ eventLoopDelayP99Ms: 200, heapShare: 0.5 }, () => sample);
  assert.equal(protection.capacity(30), 30);
  assert.equal(protection.check(1000), false, 'calm: nothing changes');
  sample = { ...calm, eventLoopDelayP99Ms: 450 };
  assert.equal(protection.check(2000), true);
  assert.equal(protection.capacity(30), 15);
  assert.deepEqual(protection.current, { reason: 'event-loop-delay', figure: 450, line: 200, slotShare: 0.5, sinceUnixMs: 2000 });
  for (let i = 0; i < 12; i++) protection.check(3000 + i);
  assert.equal(protection.capacity(30), 1, 'never below one slot');
  assert.equal(protection.capacity(10_000), 9, '1/1024 of the largest max parallelism');
  assert.equal(protection.current?.sinceUnixMs, 2000, 'since the first cut');
  assert.equal(protection.episodesOf('event-loop-delay'), 1, 'one episode however many cuts');

  // In the band between recoveryFraction x line and the line: hold.
  sample = { ...calm, eventLoopDelayP99Ms: 200 * recoveryFraction + 1 };
  assert.equal(protection.check(), false);
  assert.equal(protection.capacity(30), 1);
  sample = calm;
  const capacities: number[] = [];
  while (protection.current !== null) {
    assert.equal(protection.check(), true);
    capacities.push(protection.capacity(30));
  }
  assert.deepEqual(capacities.slice(-4), [3, 7, 15, 30]);

  // The heap line: its own reason and episode count.
  sample = { ...calm, heapUsedBytes: 600 };
  protection.check(9000);
  const state = protection.current as ProtectionState | null;
  assert.deepEqual([state?.reason, state?.figure, protection.episodesOf('heap')], ['heap', 0.6, 1]);
  // Recovery needs every figure below its band: the heap is, the event loop is not.
  sample = { ...calm, eventLoopDelayP99Ms: 190 };
  assert.equal(protection.check(), false);
});

test('self-protection with both lines at 0 is off: nothing is ever cut', () => {
  const protection = new SelfProtection({ eventLoopDelayP99Ms: 0, heapShare: 0 }, () => ({ ...calm, eventLoopDelayP99Ms: 10_000, heapUsedBytes: 999 }));
  assert.equal(protection.enabled, false);
  assert.equal(protection.check(), false);
  assert.equal(protection.capacity(30), 30);
});

test('a worker whose event loop stalls advertises fewer slots in the ledger and its report, and every slot again once it recovers', async (t) => {
  const fleet = await startFleet(t);
  const blocker = eventLoopBlocker();
  const worker = await fleet.addWorker(
    { cluster: 'baseline', workerId: 'stalling', maxParallelism: 8, protectEventLoopDelayP99Ms: 150, protectCheckIntervalMs: 250, reportIntervalMs: 200 },
    { 'bank-a': blocker.handler },
  );
  await fleet.addBalancer();
  const capacityInLedger = async () => (await fleet.ledger.snapshot('baseline')).workers.find((w) => w.workerId === 'stalling')?.capacity;
  assert.equal(await capacityInLedger(), 8);

  blocker.blockMs = 600;
  const answer = await submit(fleet.clients[0]!, task({ integration: 'bank-a' }));
  assert.ok(answer.ok, JSON.stringify(answer));
  // The loop keeps stalling while the checks below run: on a loaded machine they can take longer
  // than the worker needs to recover from one stall.
  let stalling = true;
  const stalls = (async () => {
    for (let i = 0; stalling && i < 100; i++) await submit(fleet.clients[0]!, task({ integration: 'bank-a' }));
  })();
  const cut = await eventually('the ledger to show fewer slots', 5000, async () => {
    const capacity = await capacityInLedger();
    return capacity !== undefined && capacity < 8 ? capacity : undefined;
  });
  assert.ok(cut >= 1 && cut <= 4, `capacity ${cut}`);
  const protection = worker.stats().selfProtection;
  assert.equal(protection?.reason, 'event-loop-delay');
  assert.equal(protection?.line, 150);
  assert.ok(protection!.figure > 150, `figure ${protection?.figure}`);
  const reported = await eventually('the report to say so', 3000, async () => {
    const report = (await new WorkerReports(fleet.redis, fleet.ledger.options.keyPrefix).read(['stalling'])).get('stalling');
    return report?.selfProtection ? report.selfProtection : undefined;
  });
  assert.equal(reported.reason, 'event-loop-delay');
  const metrics = await worker.registry.metrics();
  assert.match(metrics, /headroom_worker_self_protection_episodes_total\{reason="event-loop-delay"\} 1\b/);
  assert.match(metrics, /headroom_worker_self_protection_active\{reason="event-loop-delay"\} 1\b/);

  // The handler is quick again: within a few checks every slot is back.
  stalling = false;
  blocker.blockMs = 0;
  await stalls;
  await eventually('every slot to come back', 5000, async () => ((await capacityInLedger()) === 8 ? true : undefined));
  assert.equal(worker.stats().selfProtection, null);
  assert.equal(worker.stats().maxParallelism, 8);
  assert.match(await worker.registry.metrics(), /headroom_worker_self_protection_slot_share 1\b/);
});

test('a worker whose heap nears its line advertises fewer slots until the memory is freed', async (t) => {
  v8.setFlagsFromString('--expose-gc');
  const gc = vm.runInNewContext('gc') as () => void;
  gc();
  const runtime = new RuntimeSampler();
  const now = runtime.sample();
  runtime.close();
  // The line sits 100 MB above today's old generation; the leaky handler keeps 200 MB.
  const heapShare = (now.heapUsedBytes + 100 * 1024 * 1024) / now.heapLimitBytes;
  const fleet = await startFleet(t);
  let kept: number[][] = [];
  t.after(() => (kept = []));
  const worker = await fleet.addWorker(
    { cluster: 'baseline', workerId: 'leaky', maxParallelism: 6, protectHeapShare: heapShare, protectEventLoopDelayP99Ms: 0, protectCheckIntervalMs: 250 },
    {
      'bank-a': async () => {
        for (let i = 0; i < 25; i++) kept.push(new Array<number>(1_000_000).fill(i + 0.5));
        return Buffer.from('kept');
      },
    },
  );
  await fleet.addBalancer();
  assert.ok((await submit(fleet.clients[0]!, task({ integration: 'bank-a' }))).ok);
  await eventually('the heap line to cut slots', 5000, () => (worker.stats().selfProtection?.reason === 'heap' ? true : undefined));
  assert.ok(worker.stats().maxParallelism < 6);
  assert.ok(worker.stats().selfProtection!.figure > heapShare);

  kept = [];
  gc();
  await eventually('every slot to come back', 8000, () => (worker.stats().selfProtection === null && worker.stats().maxParallelism === 6 ? true : undefined));
  assert.equal((await fleet.ledger.snapshot('baseline')).workers.find((w) => w.workerId === 'leaky')?.capacity, 6);
});
