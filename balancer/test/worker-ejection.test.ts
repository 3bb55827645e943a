/**
 * WorkerEjection without a network: a fake helper stands for the ledger, the health check and
 * the timers, so every step of the state machine is driven by hand. (unreachable-worker.test.ts
 * runs the same logic against real Redis and real gRPC.)
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import pino from 'pino';
import { Counter, Registry } from 'prom-client';
import type { UnreachableMark } from '@headroom/fleet';
import { WorkerEjection, type EjectionHelper, type HealthCheckResult, type WorkerEjectionOptions } from '../src/worker-ejection';

const options: WorkerEjectionOptions = { ejectAfterConnectFailures: 3, ejectionBackoffMs: 1000, maxEjectionBackoffMs: 8000, healthCheckTimeoutMs: 200, maxEjectedShare: 0.5 };

interface FakeTimer {
  run(): void;
  delayMs: number;
  cancelled: boolean;
}

function setUp(overrides: Partial<WorkerEjectionOptions> = {}) {
  const calls: string[] = [];
  const timers: FakeTimer[] = [];
  const addresses = new Map([['w1', '10.0.0.1:7800'], ['w2', '10.0.0.2:7800']]);
  const state = {
    health: { healthy: false, reason: 'UNAVAILABLE: No connection established' } as HealthCheckResult,
    mark: { result: 'marked', untilMs: 1 } as UnreachableMark | Error,
    healthGate: undefined as Promise<void> | undefined,
  };
  const helper: EjectionHelper = {
    markUnreachable: async (cluster, workerId, forMs, share) => {
      calls.push(`mark ${cluster}/${workerId} for ${forMs} ms, share ${share}`);
      if (state.mark instanceof Error) throw state.mark;
      return state.mark;
    },
    clearUnreachable: async (cluster, workerId) => {
      calls.push(`clear ${cluster}/${workerId}`);
      return true;
    },
    checkHealth: async (address, timeoutMs) => {
      calls.push(`check ${address} within ${timeoutMs} ms`);
      await state.healthGate;
      return state.health;
    },
    addressOf: (_cluster, workerId) => addresses.get(workerId),
    setTimer: (run, delayMs) => {
      const timer = { run, delayMs, cancelled: false };
      timers.push(timer);
      return { cancel: () => (timer.cancelled = true) };
    },
  };
  const logs: { level: number; msg: string; [key: string]: unknown }[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line) as (typeof logs)[number]) });
  const ejected = new Counter({ name: 'headroom_balancer_workers_ejected_total', help: 'test', labelNames: ['cluster'], registers: [new Registry()] });
  const ejection = new WorkerEjection({ ...options, ...overrides }, helper, { ejected, logger });
  const ejectedCount = async () => (await ejected.get()).values.find((v) => v.labels.cluster === 'c')?.value ?? 0;
  /** Lets the helper's promises settle. */
  const settle = () => new Promise((resolve) => setImmediate(resolve));
  /** Fires the newest pending timer (the end of a back-off). */
  const endBackoff = async () => {
    const timer = timers.filter((t) => !t.cancelled).at(-1);
    assert.ok(timer, 'a back-off is pending');
    timer.cancelled = true;
    timer.run();
    await settle();
    await settle();
  };
  let failures = 0;
  const fail = async (workerId: string, times: number) => {
    for (let i = 0; i < times; i++) ejection.connectFailed('c', workerId, addresses.get(workerId)!, `UNAVAILABLE: connect ECONNREFUSED ${addresses.get(workerId)} (failure ${++failures})`);
    await settle();
  };
  return { ejection, calls, timers, state, logs, addresses, ejectedCount, settle, endBackoff, fail };
}

test('only failures in a row count; at the threshold the worker is marked once, counted, and logged at warn', async () => {
  const { ejection, calls, logs, ejectedCount, fail } = setUp();
  await fail('w1', 2);
  ejection.answered('c', 'w1');
  await fail('w1', 2);
  assert.deepEqual(calls, [], 'an answer in between starts the count again');
  await fail('w1', 1);
  assert.deepEqual(calls, ['mark c/w1 for 1400 ms, share 0.5'], 'marked for the back-off plus the health check and its follow-up');
  assert.equal(await ejectedCount(), 1);
  const warn = logs.find((l) => l.level === 40);
  assert.ok(warn, 'a warning');
  assert.match(warn.msg, /worker ejected/);
  assert.deepEqual([warn.workerId, warn.address, warn.cluster, warn.consecutiveFailures, warn.backoffMs], ['w1', '10.0.0.1:7800', 'c', 3, 1000]);
  assert.match(String(warn.lastError), /ECONNREFUSED 10\.0\.0\.1:7800 \(failure 5\)/, 'the last error');
  // Failures of calls already under way change nothing while it is marked; other workers count on their own.
  await fail('w1', 5);
  await fail('w2', 2);
  ejection.answered('c', 'w1');
  assert.equal(calls.length, 1);
  assert.deepEqual(ejection.ejectedWorkers(), [{ cluster: 'c', workerId: 'w1' }]);
  assert.equal(ejection.ejectionCount, 1);
});

test('when the back-off ends a health check decides: failing marks it again for twice as long, up to the cap; passing clears the mark', async () => {
  const { ejection, calls, timers, state, logs, ejectedCount, endBackoff, fail } = setUp();
  await fail('w1', 3);
  assert.equal(timers.at(-1)!.delayMs, 1000);
  const backoffs = [];
  for (let i = 0; i < 4; i++) {
    await endBackoff();
    backoffs.push(timers.at(-1)!.delayMs);
  }
  assert.deepEqual(backoffs, [2000, 4000, 8000, 8000]);
  assert.deepEqual(calls.slice(0, 3), ['mark c/w1 for 1400 ms, share 0.5', 'check 10.0.0.1:7800 within 200 ms', 'mark c/w1 for 2400 ms, share 0.5']);
  assert.equal(await ejectedCount(), 5, 'every renewed mark is an ejection');
  assert.ok(logs.some((l) => l.level === 40 && /ejected again: its health check failed/.test(l.msg) && /No connection established/.test(String(l.lastError))));
  state.health = { healthy: true };
  await endBackoff();
  assert.equal(calls.at(-1), 'clear c/w1');
  assert.ok(logs.some((l) => l.level === 30 && /back: its health check passed/.test(l.msg)));
  assert.deepEqual(ejection.ejectedWorkers(), []);
  // Back, but not yet proven by a task: a new streak of failures marks it for the long back-off again.
  await fail('w1', 2);
  assert.equal(calls.at(-1), 'clear c/w1');
  await fail('w1', 1);
  assert.equal(timers.at(-1)!.delayMs, 8000);
  // A task answered after the next check: the back-off starts from the beginning.
  await endBackoff();
  ejection.answered('c', 'w1');
  await fail('w1', 3);
  assert.equal(timers.at(-1)!.delayMs, 1000);
});

test('not ejected when the ledger refuses (too many marked, worker gone) or cannot be reached: the count starts again', async () => {
  const { ejection, calls, state, logs, ejectedCount, fail } = setUp();
  state.mark = { result: 'too-many', marked: 2, workers: 4 };
  await fail('w1', 3);
  assert.equal(await ejectedCount(), 0);
  assert.ok(logs.some((l) => l.level === 40 && /not ejected/.test(l.msg) && l.markedWorkers === 2 && l.maxEjectedShare === 0.5));
  await fail('w1', 2);
  assert.equal(calls.length, 1, 'counting from zero again');
  state.mark = new Error('connect ECONNREFUSED 127.0.0.1:6379');
  await fail('w1', 1);
  assert.equal(calls.length, 2);
  assert.ok(logs.some((l) => l.level === 40 && /could not mark/.test(l.msg)));
  state.mark = { result: 'not-registered' };
  await fail('w1', 3);
  assert.equal(calls.length, 3);
  assert.deepEqual(ejection.ejectedWorkers(), []);
  assert.equal(await ejectedCount(), 0);
});

test('a worker that left is forgotten with its timer; close cancels everything and ignores late answers; 0 never ejects', async () => {
  const { ejection, calls, timers, state, settle, fail } = setUp();
  await fail('w1', 3);
  ejection.forgetMissing('c', [{ workerId: 'w2' }]);
  assert.equal(timers[0]!.cancelled, true);
  assert.deepEqual(ejection.ejectedWorkers(), []);
  // A check under way when the balancer closes changes nothing after.
  await fail('w2', 3);
  let openGate!: () => void;
  state.healthGate = new Promise((resolve) => (openGate = resolve));
  timers.at(-1)!.run();
  await settle();
  assert.equal(calls.at(-1), 'check 10.0.0.2:7800 within 200 ms');
  const before = calls.length;
  ejection.close();
  ejection.close();
  openGate();
  await settle();
  await fail('w2', 3);
  assert.equal(calls.length, before);

  const never = setUp({ ejectAfterConnectFailures: 0 });
  await never.fail('w1', 10);
  assert.deepEqual(never.calls, []);
});

test('a worker that left the directory by the end of its back-off is not checked', async () => {
  const { ejection, calls, addresses, endBackoff, fail } = setUp();
  await fail('w1', 3);
  // The directory no longer lists it (its refresh came before the back-off ended).
  addresses.delete('w1');
  await endBackoff();
  assert.deepEqual(calls, ['mark c/w1 for 1400 ms, share 0.5']);
  assert.deepEqual(ejection.ejectedWorkers(), []);
});
