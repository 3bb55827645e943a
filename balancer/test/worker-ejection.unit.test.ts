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
import { FailureRate, type FailureRateOptions } from '../src/failure-rate';
import { WorkerEjection, type EjectionHelper, type HealthCheckResult, type WorkerEjectionOptions } from '../src/worker-ejection';
import type { DispatchOutcome } from '../src/worker-channels';

const options: WorkerEjectionOptions = {
  ejectAfterConnectFailures: 3,
  ejectionBackoffMs: 1000,
  maxEjectionBackoffMs: 8000,
  healthCheckTimeoutMs: 200,
  maxEjectedShare: 0.5,
};
const failureOptions: FailureRateOptions = { windowMs: 10_000, minTasks: 10, shareAbovePeers: 0.5 };

interface FakeTimer {
  run(): void;
  delayMs: number;
  cancelled: boolean;
}

function setUp(overrides: Partial<WorkerEjectionOptions> = {}, failureOverrides: Partial<FailureRateOptions> = {}) {
  const calls: string[] = [];
  const timers: FakeTimer[] = [];
  const addresses = new Map([
    ['w1', '10.0.0.1:7800'],
    ['w2', '10.0.0.2:7800'],
    ['w3', '10.0.0.3:7800'],
  ]);
  const clock = { nowMs: 1_000_000 };
  const state = {
    health: { healthy: false, reason: 'UNAVAILABLE: No connection established' } as HealthCheckResult,
    mark: { result: 'marked', untilMs: 1 } as UnreachableMark | Error,
    healthGate: undefined as Promise<void> | undefined,
    clear: 'cleared' as 'cleared' | 'kept' | 'not-registered',
  };
  const helper: EjectionHelper = {
    markUnreachable: async (cluster, workerId, forMs, share, reason) => {
      calls.push(`mark ${cluster}/${workerId} for ${forMs} ms, share ${share}${reason === 'unreachable' ? '' : `, ${reason}`}`);
      if (state.mark instanceof Error) throw state.mark;
      return state.mark;
    },
    clearEjection: async (cluster, workerId, markedUntilMs) => {
      calls.push(`clear ${cluster}/${workerId}${markedUntilMs === 1 ? '' : ` until ${markedUntilMs}`}`);
      return state.clear;
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
    nowMs: () => clock.nowMs,
  };
  const logs: { level: number; msg: string; [key: string]: unknown }[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => void logs.push(JSON.parse(line) as (typeof logs)[number]) });
  const registry = new Registry();
  const ejected = new Counter({ name: 'headroom_balancer_workers_ejected_total', help: 'test', labelNames: ['cluster', 'reason'], registers: [registry] });
  const returned = new Counter({
    name: 'headroom_balancer_workers_returned_total',
    help: 'test',
    labelNames: ['cluster', 'reason', 'return'],
    registers: [registry],
  });
  const failureRate = new FailureRate({ ...failureOptions, ...failureOverrides });
  const ejection = new WorkerEjection({ ...options, ...overrides }, helper, { ejected, returned, failureRate, logger });
  const ejectedCount = async (reason = 'unreachable') =>
    (await ejected.get()).values.find((v) => v.labels.cluster === 'c' && v.labels.reason === reason)?.value ?? 0;
  const returnedCount = async (labels: { reason: string; return: string }) =>
    (await returned.get()).values.find((v) => v.labels.cluster === 'c' && v.labels.reason === labels.reason && v.labels.return === labels.return)?.value ?? 0;
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
    for (let i = 0; i < times; i++)
      ejection.connectFailed('c', workerId, addresses.get(workerId)!, `UNAVAILABLE: connect ECONNREFUSED ${addresses.get(workerId)} (failure ${++failures})`);
    await settle();
  };
  /** Tasks of `integration` answered by `workerId`: `failed` of them with `code`, the rest with a result, 10 ms apart. */
  const answer = async (workerId: string, integration: string, tasks: number, failed: number, code = 'HR_ERR_HANDLER_FAILED') => {
    for (let i = 0; i < tasks; i++) {
      clock.nowMs += 10;
      const outcome: DispatchOutcome =
        i < failed
          ? { kind: 'done', response: { workerId, runMs: 1, queueWaitMs: 0, error: { code, message: 'boom', retryAfterMs: 0 } } }
          : { kind: 'done', response: { workerId, runMs: 1, queueWaitMs: 0, result: Buffer.from('ok') } };
      ejection.dispatchEnded('c', workerId, addresses.get(workerId)!, integration, outcome);
    }
    await settle();
  };
  return { ejection, calls, timers, state, logs, addresses, clock, failureRate, ejectedCount, returnedCount, settle, endBackoff, fail, answer };
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
  assert.deepEqual(ejection.ejectedWorkers(), [{ cluster: 'c', workerId: 'w1', reason: 'unreachable' }]);
  assert.equal(ejection.ejectionCount, 1);
});

test('when the back-off ends a health check decides: failing marks it again for twice as long, up to the cap; passing clears the mark', async () => {
  const { ejection, calls, timers, state, logs, ejectedCount, returnedCount, endBackoff, fail } = setUp();
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
  assert.ok(logs.some((l) => l.level === 30 && /back: its health check passed/.test(l.msg) && l.return === 'probe'));
  assert.equal(await returnedCount({ reason: 'unreachable', return: 'probe' }), 1);
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

test('a worker failing far more than its peers on an integration is marked failing, once, counted and logged by reason', async () => {
  const { ejection, calls, logs, ejectedCount, answer } = setUp();
  await answer('w2', 'bank-a', 10, 0);
  await answer('w3', 'bank-a', 10, 1);
  // Nine failures: below the minimum volume, not judged yet.
  await answer('w1', 'bank-a', 9, 9);
  assert.deepEqual(calls, []);
  await answer('w1', 'bank-a', 1, 1);
  assert.deepEqual(calls, ['mark c/w1 for 1400 ms, share 0.5, failing']);
  assert.equal(await ejectedCount('failing'), 1);
  assert.equal(await ejectedCount('unreachable'), 0);
  assert.deepEqual(ejection.ejectedWorkers(), [{ cluster: 'c', workerId: 'w1', reason: 'failing' }]);
  const warn = logs.find((l) => l.level === 40 && /fails far more than the other workers/.test(l.msg));
  assert.ok(warn, 'a warning that says why');
  assert.deepEqual([warn.reason, warn.backoffMs, warn.lastError], ['failing', 1000, '10 of 10 bank-a tasks failed, 1 of 20 on the other workers']);
  // Answers of calls already under way change nothing while it is marked.
  await answer('w1', 'bank-a', 20, 20);
  assert.equal(calls.length, 1);
});

test('an outage that fails on every worker ejects none; nor do too few tasks of the peers to compare with', async () => {
  const { calls, answer } = setUp();
  for (let round = 0; round < 5; round++) {
    await answer('w1', 'bank-a', 10, 10, 'HR_ERR_UPSTREAM_UNAVAILABLE');
    await answer('w2', 'bank-a', 10, 9, 'HR_ERR_UPSTREAM_UNAVAILABLE');
    await answer('w3', 'bank-a', 10, 10, 'HR_ERR_UPSTREAM_UNAVAILABLE');
  }
  assert.deepEqual(calls, [], 'everyone fails alike: no outlier');
  // Another integration only w1 runs: failing, but nobody to compare with.
  await answer('w1', 'bank-b', 30, 30);
  await answer('w2', 'bank-b', 9, 0);
  assert.deepEqual(calls, []);
  // Deadlines and cancels do not count, nor refusals for lack of room.
  await answer('w1', 'bank-c', 30, 30, 'HR_ERR_DEADLINE_EXCEEDED');
  await answer('w2', 'bank-c', 30, 0);
  assert.deepEqual(calls, []);
});

test('a failing worker comes back when its back-off ends (return=backoff, no health check); failing again doubles it; doing as well as its peers resets it', async () => {
  const { ejection, calls, timers, logs, returnedCount, endBackoff, answer } = setUp();
  await answer('w2', 'bank-a', 20, 0);
  await answer('w1', 'bank-a', 10, 10);
  assert.equal(timers.at(-1)!.delayMs, 1000);
  await endBackoff();
  assert.deepEqual(calls, ['mark c/w1 for 1400 ms, share 0.5, failing', 'clear c/w1'], 'no health check: it cannot see a handler fault');
  assert.equal(await returnedCount({ reason: 'failing', return: 'backoff' }), 1);
  const back = logs.find((l) => l.level === 30 && /back: its back-off ended/.test(l.msg));
  assert.ok(back);
  assert.deepEqual([back.reason, back.return], ['failing', 'backoff']);
  assert.deepEqual(ejection.ejectedWorkers(), []);
  // Judged afresh: its failures before the ejection were forgotten; on probation it takes half the minimum volume.
  await answer('w2', 'bank-a', 10, 0);
  await answer('w1', 'bank-a', 4, 4);
  assert.equal(calls.length, 2);
  await answer('w1', 'bank-a', 1, 1);
  assert.equal(calls.at(-1), 'mark c/w1 for 2400 ms, share 0.5, failing');
  assert.equal(timers.at(-1)!.delayMs, 2000, 'the second ejection in a row lasts twice as long');
  assert.ok(logs.some((l) => l.level === 40 && /ejected again: back from its back-off/.test(l.msg)));
  await endBackoff();
  // Back, and now as good as its peers over enough tasks: the next ejection starts from the first back-off.
  await answer('w2', 'bank-a', 10, 0);
  await answer('w1', 'bank-a', 12, 0);
  // 40 failures: 20 after 12 successes could be chance (see FailureRate's judge).
  await answer('w1', 'bank-a', 40, 40);
  assert.equal(timers.at(-1)!.delayMs, 1000);
});

test('a refusal for want of a handler counts as a failure; refusals for want of room, and unreachable calls, do not', async () => {
  const { calls, clock, ejection, addresses, settle } = setUp({ ejectAfterConnectFailures: 0 });
  const outcome = (workerId: string, code: string, unreachable = false): void => {
    clock.nowMs += 10;
    ejection.dispatchEnded('c', workerId, addresses.get(workerId)!, 'bank-a', { kind: 'not-started', unreachable, code, message: 'refused' });
  };
  for (let i = 0; i < 20; i++) {
    clock.nowMs += 10;
    ejection.dispatchEnded('c', 'w2', addresses.get('w2')!, 'bank-a', {
      kind: 'done',
      response: { workerId: 'w2', runMs: 1, queueWaitMs: 0, result: Buffer.alloc(0) },
    });
  }
  for (let i = 0; i < 20; i++) outcome('w3', 'HR_ERR_WORKER_FULL');
  for (let i = 0; i < 20; i++) outcome('w3', '', true);
  await settle();
  assert.deepEqual(calls, []);
  for (let i = 0; i < 10; i++) outcome('w1', 'HR_ERR_NO_HANDLER');
  await settle();
  assert.deepEqual(calls, ['mark c/w1 for 1400 ms, share 0.5, failing']);
});

test('when the ledger refuses a failing mark (too many marked), the worker needs a fresh window before it asks again', async () => {
  const { calls, state, logs, ejectedCount, answer } = setUp();
  state.mark = { result: 'too-many', marked: 1, workers: 3 };
  await answer('w2', 'bank-a', 20, 0);
  await answer('w1', 'bank-a', 10, 10);
  assert.equal(calls.length, 1);
  assert.ok(logs.some((l) => l.level === 40 && /failing but not ejected/.test(l.msg)));
  // Not a call to Redis per failed task while the cap holds.
  await answer('w1', 'bank-a', 9, 9);
  assert.equal(calls.length, 1);
  await answer('w1', 'bank-a', 1, 1);
  assert.equal(calls.length, 2);
  assert.equal(await ejectedCount('failing'), 0);
});

test("a mark another balancer renewed since is kept when this one's back-off ends: it only watches again, and does not count a return", async () => {
  const { ejection, calls, state, returnedCount, endBackoff, answer } = setUp();
  state.mark = { result: 'marked', untilMs: 5000 };
  await answer('w2', 'bank-a', 20, 0);
  await answer('w1', 'bank-a', 10, 10);
  state.clear = 'kept';
  await endBackoff();
  assert.deepEqual(calls, ['mark c/w1 for 1400 ms, share 0.5, failing', 'clear c/w1 until 5000'], 'it clears only the mark it made');
  assert.equal(await returnedCount({ reason: 'failing', return: 'backoff' }), 0);
  assert.deepEqual(ejection.ejectedWorkers(), []);
  // Watching again: failing on, it is ejected again for twice as long.
  await answer('w1', 'bank-a', 10, 10);
  assert.equal(calls.at(-1), 'mark c/w1 for 2400 ms, share 0.5, failing');
});
