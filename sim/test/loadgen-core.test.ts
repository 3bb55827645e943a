/**
 * The core the load generators share (sim's, the benchmarks', the fault suite's): one
 * Balancer.Submit and how its answer is classified, the open loop's bounds, the closed loop's lanes.
 * Against a real balancer and worker.
 */
import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { performance } from 'node:perf_hooks';
import { startFleet } from '@headroom/testkit';
import { TaskFailedError, type HandlerMap } from '@headroom/worker';
import type { BalancerClient, Task } from '@headroom/proto';
import { ClosedLoop, OpenLoop, connectBalancer, submitTask, type DroppedCalls } from '../src/loadgen';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

let taskCounter = 0;
function sleepTask(sleepMs: number, overrides: Partial<Task> = {}): Task {
  taskCounter++;
  return {
    id: `core-${taskCounter}`,
    key: `account-${taskCounter}`,
    integration: 'bank-a',
    priority: 'BACKGROUND',
    payload: Buffer.from(JSON.stringify({ sleepMs })),
    deadlineUnixMs: Date.now() + 10_000,
    ...overrides,
  };
}

/** A balancer and one worker of `maxParallelism` slots in this process; tasks run the demo handlers, or `handlers`. */
async function startBalancer(t: TestContext, maxParallelism: number, handlers?: HandlerMap, maxQueuedTasks?: number): Promise<BalancerClient> {
  const fleet = await startFleet(t);
  await fleet.addWorker({ cluster: 'baseline', maxParallelism }, handlers);
  await fleet.addBalancer({ candidatePercent: 0, ...(maxQueuedTasks === undefined ? {} : { maxQueuedTasks }) });
  return fleet.clients[0]!;
}

test('an answer is ok with its placement, ok with the handler error, or a failed call with its headroom code or GRPC status', async (t) => {
  const handlers: HandlerMap = {
    failing: async () => {
      throw new TaskFailedError('HR_ERR_UPSTREAM_TIMEOUT', 'the bank did not answer');
    },
    '*': async () => {
      await sleep(20);
      return Buffer.from('done');
    },
  };
  const client = await startBalancer(t, 2, handlers);

  const ran = await submitTask(client, sleepTask(0));
  assert.ok(ran.ok, JSON.stringify(ran));
  assert.ok(!ran.response.error, JSON.stringify(ran.response.error));
  assert.equal(ran.placement?.cluster, 'baseline');
  assert.ok(ran.placement.workerId !== '' && ran.placement.runMs >= 15, JSON.stringify(ran.placement));
  assert.equal(typeof ran.placement.balancerQueueWaitMs, 'number');

  const failed = await submitTask(client, sleepTask(0, { integration: 'failing' }));
  assert.ok(failed.ok, 'a handler error is an answer, not a failed call');
  assert.equal(failed.response.error?.code, 'HR_ERR_UPSTREAM_TIMEOUT');

  const refused = await submitTask(client, sleepTask(0, { integration: '' }));
  assert.ok(!refused.ok);
  assert.deepEqual([refused.code, refused.coded, refused.status], ['HR_ERR_INVALID_TASK', true, grpc.status.INVALID_ARGUMENT]);

  // Cancelled by its signal: a bare gRPC status, no headroom code.
  const cancel = new AbortController();
  const cancelling = submitTask(client, sleepTask(0), { signal: cancel.signal });
  cancel.abort();
  const cancelled = await cancelling;
  assert.ok(!cancelled.ok);
  assert.deepEqual([cancelled.code, cancelled.coded], ['GRPC_CANCELLED', false]);

  // Nothing listens: the call fails with UNAVAILABLE once its deadline (the task's plus the margin) passes or the connection is refused.
  const nowhere = connectBalancer('127.0.0.1:1');
  t.after(() => nowhere.close());
  const unreachable = await submitTask(nowhere, sleepTask(0, { deadlineUnixMs: Date.now() + 500 }), { deadlineMarginMs: 100 });
  assert.ok(!unreachable.ok);
  assert.ok(['GRPC_UNAVAILABLE', 'GRPC_DEADLINE_EXCEEDED'].includes(unreachable.code) && !unreachable.coded, unreachable.code);

  // A closed client cannot start a call: the one case that rejects.
  nowhere.close();
  await assert.rejects(submitTask(nowhere, sleepTask(0)));
});

test('a full balancer queue answers RESOURCE_EXHAUSTED with its code and a retry-after', async (t) => {
  const client = await startBalancer(t, 1, undefined, 1);
  const answers = await Promise.all(Array.from({ length: 6 }, () => submitTask(client, sleepTask(200))));
  const full = answers.find((answer) => !answer.ok && answer.code === 'HR_ERR_QUEUE_FULL');
  assert.ok(full && !full.ok, JSON.stringify(answers.map((answer) => (answer.ok ? 'ok' : answer.code))));
  assert.equal(full.status, grpc.status.RESOURCE_EXHAUSTED);
  assert.ok(full.coded && full.retryAfterMs !== undefined && Number(full.retryAfterMs) > 0, JSON.stringify(full));
});

test('the open loop never has more calls out than its bound: the calls due beyond it are dropped, not queued', async (t) => {
  const client = await startBalancer(t, 10);
  let maxSeen = 0;
  const dropped: DroppedCalls[] = [];
  const loop = new OpenLoop({
    schedules: [{ dueBy: (elapsedMs) => Math.floor(elapsedMs / 10) + 1, dueAtMs: (sequence) => sequence * 10, totalCalls: 60 }],
    maxOutstandingCalls: 3,
    tickMs: 'when-due',
    send: async () => {
      maxSeen = Math.max(maxSeen, loop.outstandingCalls);
      const answer = await submitTask(client, sleepTask(100));
      assert.ok(answer.ok, JSON.stringify(answer));
    },
    onDropped: (drop) => dropped.push(drop),
  });
  t.after(() => loop.stop());
  await loop.finished();
  const droppedCalls = dropped.reduce((sum, drop) => sum + drop.calls, 0);
  assert.equal(maxSeen, 3);
  assert.equal(loop.dueCalls(0), 60, 'a finite schedule ends once every call was due');
  assert.equal(loop.sentCalls + droppedCalls, 60);
  assert.ok(droppedCalls >= 40, `dropped ${droppedCalls}`);
  assert.ok(dropped.every((drop) => drop.reason === 'outstanding-limit' && drop.calls === 1));
  assert.equal(loop.outstandingCalls, 0);
  assert.equal(new Set(dropped.map((drop) => drop.firstSequence)).size, dropped.length, 'each call is dropped once');
});

test('the open loop sends at its rate, serves its schedules in order, and after a stall drops or defers what is past due', async (t) => {
  const client = await startBalancer(t, 20);
  const sentBySchedule = [0, 0, 0];
  const dropped: DroppedCalls[] = [];
  // Schedule 0: 100/s; 1: 40 calls due at once (a stall), one tick may send 10, the rest dropped; 2: the same, deferred.
  const stalled = (elapsedMs: number) => (elapsedMs >= 100 ? 40 : 0);
  const loop = new OpenLoop({
    schedules: [
      { dueBy: (elapsedMs) => Math.floor(elapsedMs / 10) },
      { dueBy: stalled, maxBurst: { calls: 10, pastDue: 'drop' } },
      { dueBy: stalled, maxBurst: { calls: 10, pastDue: 'defer' } },
    ],
    maxOutstandingCalls: 1000,
    tickMs: 10,
    maxDurationMs: 600,
    send: async ({ schedule }) => {
      sentBySchedule[schedule]!++;
      await submitTask(client, sleepTask(1));
    },
    onDropped: (drop) => dropped.push(drop),
  });
  t.after(() => loop.stop());
  const startedAtMs = performance.now();
  await loop.finished();
  const elapsedMs = performance.now() - startedAtMs;
  assert.ok(elapsedMs >= 590, `stopped by itself after ${elapsedMs} ms`);
  assert.ok(sentBySchedule[0]! >= 50 && sentBySchedule[0]! <= 61, `schedule 0 sent ${sentBySchedule[0]} in 0.6 s at 100/s`);
  assert.equal(sentBySchedule[1], 10);
  assert.deepEqual(
    dropped.map(({ schedule, reason, firstSequence, calls }) => ({ schedule, reason, firstSequence, calls })),
    [{ schedule: 1, reason: 'behind-schedule', firstSequence: 10, calls: 30 }],
  );
  assert.equal(sentBySchedule[2], 40, 'deferred calls go out over the next ticks');
});

test('the closed loop keeps exactly its lanes in flight, and stops at maxCalls', async (t) => {
  const client = await startBalancer(t, 8);
  let inFlight = 0;
  let maxInFlight = 0;
  const lanesSeen = new Set<number>();
  const loop = new ClosedLoop({
    lanes: 4,
    maxCalls: 40,
    maxDurationMs: 30_000,
    call: async (_sequence, lane) => {
      lanesSeen.add(lane);
      maxInFlight = Math.max(maxInFlight, ++inFlight);
      const answer = await submitTask(client, sleepTask(20));
      inFlight--;
      return answer;
    },
  });
  t.after(() => loop.stop());
  await loop.finished();
  assert.equal(loop.sentCalls, 40);
  assert.equal(maxInFlight, 4);
  assert.deepEqual([...lanesSeen].sort(), [0, 1, 2, 3]);
  assert.throws(
    () => new ClosedLoop({ lanes: 5000, maxCalls: 1, maxDurationMs: 1, call: async () => undefined }),
    /lanes 5000: expected a whole number from 1 to 4096/,
  );
});

test('a closed-loop lane pauses after the answers it is told to, and stop() ends every lane after its answer', async (t) => {
  const client = await startBalancer(t, 4);
  const sentAtMs: number[] = [];
  const loop = new ClosedLoop({
    lanes: 1,
    maxCalls: 1000,
    maxDurationMs: 30_000,
    call: (sequence) => {
      sentAtMs.push(performance.now());
      // Every other task is refused (no integration), and the lane then waits 100 ms.
      return submitTask(client, sequence % 2 === 0 ? sleepTask(0) : sleepTask(0, { integration: '' }));
    },
    pauseAfterMs: (answer) => (answer.ok ? 0 : 100),
  });
  t.after(() => loop.stop());
  await sleep(450);
  loop.stop();
  await loop.finished();
  const sent = loop.sentCalls;
  assert.ok(sent >= 4 && sent <= 10, `${sent} calls in 450 ms with 100 ms after each refusal`);
  for (let i = 2; i < sentAtMs.length; i += 2)
    assert.ok(sentAtMs[i]! - sentAtMs[i - 1]! >= 95, `call ${i} came ${sentAtMs[i]! - sentAtMs[i - 1]!} ms after a refusal`);
  await sleep(150);
  assert.equal(loop.sentCalls, sent, 'nothing is sent after stop()');
});
