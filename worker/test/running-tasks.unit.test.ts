import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { HeadroomError, silentLogger } from '@headroom/common';
import { formatLeaseId } from '@headroom/fleet';
import { answerNearDeadlineMs, cancelCountsAsDeadlineWithinMs, RunningTasks } from '../src/running-tasks';

const nowUnixMs = 1_000_000;

/** RunningTasks for worker "w" on a fake clock, with the leases it released in the ledger. */
function setUp(t: TestContext, releaseLease: (leaseId: string) => Promise<unknown> = async () => true) {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: nowUnixMs });
  const released: string[] = [];
  const tasks = new RunningTasks({
    workerId: 'w',
    releaseLease: (leaseId) => {
      released.push(leaseId);
      return releaseLease(leaseId);
    },
    logger: silentLogger,
  });
  return { tasks, released };
}

const codeOf = (signal: AbortSignal) => (signal.reason instanceof HeadroomError ? signal.reason.code : String(signal.reason));

test('an answered task is counted and its lease let go without a release: its balancer releases it', async (t) => {
  const { tasks, released } = setUp(t);
  const task = tasks.start(formatLeaseId('w', 'a'), nowUnixMs + 10_000);
  assert.equal(tasks.runningCount, 1);
  task.settle('completed');
  await tasks.stopHolding(task, false);
  const failing = tasks.start(formatLeaseId('w', 'b'), nowUnixMs + 10_000);
  failing.settle('failed');
  await tasks.stopHolding(failing, false);
  assert.deepEqual({ completed: tasks.completed, failed: tasks.failed, running: tasks.runningCount }, { completed: 1, failed: 1, running: 0 });
  assert.deepEqual(released, []);
  assert.deepEqual([...tasks.heldLeaseIds()], []);
});

test('a task whose caller left is released here, and its lease no longer reported as held from then on', async (t) => {
  let finishRelease!: () => void;
  const { tasks, released } = setUp(t, () => new Promise<void>((resolve) => (finishRelease = resolve)));
  const task = tasks.start(formatLeaseId('w', 'a'), nowUnixMs + 10_000);
  task.cancel();
  assert.equal(codeOf(task.signal), 'HR_ERR_CANCELLED');
  task.settle('failed');
  const stopping = tasks.stopHolding(task, true);
  assert.deepEqual(released, ['w|a']);
  // A heartbeat that reported it and ran after the release would write its record back (and count it) for a period.
  assert.deepEqual([...tasks.heldLeaseIds()], [], 'a heartbeat sent during the release leaves the lease out');
  assert.equal(tasks.runningCount, 1, 'the task counts as running until its release is through');
  finishRelease();
  await stopping;
  assert.deepEqual([...tasks.heldLeaseIds()], []);
});

test('an answer near the deadline is released here even though the caller is still there', async (t) => {
  const { tasks, released } = setUp(t);
  const task = tasks.start(formatLeaseId('w', 'a'), nowUnixMs + answerNearDeadlineMs - 1);
  task.settle('completed');
  await tasks.stopHolding(task, false);
  assert.deepEqual(released, ['w|a']);
});

test('a release that fails still lets the lease go (the heartbeats give its slot back)', async (t) => {
  const { tasks } = setUp(t, async () => {
    throw new Error('redis down');
  });
  const task = tasks.start(formatLeaseId('w', 'a'), nowUnixMs + 10_000);
  task.settle('failed');
  await tasks.stopHolding(task, true);
  assert.equal(tasks.runningCount, 0);
});

test("the deadline aborts the handler's signal; a cancel at the deadline counts as the deadline", (t) => {
  const { tasks } = setUp(t);
  const timed = tasks.start(formatLeaseId('w', 'a'), nowUnixMs + 500);
  t.mock.timers.tick(499);
  assert.equal(timed.signal.aborted, false);
  t.mock.timers.tick(1);
  assert.equal(codeOf(timed.signal), 'HR_ERR_DEADLINE_EXCEEDED');
  const cancelledLate = tasks.start(formatLeaseId('w', 'b'), nowUnixMs + cancelCountsAsDeadlineWithinMs / 2);
  cancelledLate.cancel();
  assert.equal(codeOf(cancelledLate.signal), 'HR_ERR_DEADLINE_EXCEEDED');
  const settled = tasks.start(formatLeaseId('w', 'c'), nowUnixMs + 700);
  settled.settle('completed');
  t.mock.timers.tick(1000);
  assert.equal(settled.signal.aborted, false, 'a settled task has no deadline timer left');
});

test('abortAll aborts every running task with the reason given', (t) => {
  const { tasks } = setUp(t);
  const first = tasks.start(formatLeaseId('w', 'a'), nowUnixMs + 10_000);
  const second = tasks.start(formatLeaseId('w', 'b'), nowUnixMs + 10_000);
  tasks.abortAll(new HeadroomError('HR_ERR_WORKER_STOPPED', 'stopping'));
  assert.deepEqual([codeOf(first.signal), codeOf(second.signal)], ['HR_ERR_WORKER_STOPPED', 'HR_ERR_WORKER_STOPPED']);
});

test("the heartbeat's leases are the queued and running ones of this worker; a foreign lease id is left out", (t) => {
  const { tasks } = setUp(t);
  tasks.start(formatLeaseId('w', 'run'), nowUnixMs + 10_000);
  tasks.start(formatLeaseId('other', 'run'), nowUnixMs + 10_000);
  tasks.start('not-from-the-ledger', nowUnixMs + 10_000);
  tasks.enqueue(formatLeaseId('w', 'queued'));
  tasks.enqueue(formatLeaseId('w0', 'queued'));
  assert.deepEqual([...tasks.heldLeaseIds()], ['w|run', 'w|queued']);
  assert.deepEqual({ running: tasks.runningCount, queued: tasks.queuedCount }, { running: 3, queued: 2 });
  tasks.dequeue(formatLeaseId('w', 'queued'));
  assert.deepEqual([...tasks.heldLeaseIds()], ['w|run']);
});
