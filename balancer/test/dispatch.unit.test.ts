import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { HeadroomError, silentLogger } from '@headroom/common';
import type { Task } from '@headroom/proto';
import { Dispatcher, type DispatchResult } from '../src/dispatch';
import type { ValidTask } from '../src/task-validation';
import type { DispatchOutcome } from '../src/worker-channels';
import { FakeLedger, FakeWorkers, answered, deferred, fakeAdmission, settle, testMetrics, type FakeCall } from './fakes';

const clusters = { baseline: 'baseline', candidate: 'candidate' };

function task(overrides: Partial<Task> = {}): ValidTask {
  return {
    id: 't1',
    key: 'account-1',
    integration: 'bank-a',
    priority: 'USER_PRESENT',
    payload: Buffer.alloc(0),
    deadlineUnixMs: Date.now() + 10_000,
    idempotent: false,
    ...overrides,
  } as ValidTask;
}

interface Setup {
  ledger: FakeLedger;
  workers: FakeWorkers;
  dispatcher: Dispatcher;
  override: { all: boolean; covers(integration: string): boolean };
  reachability: { failed: string[]; answered: string[] };
  metricsText(): Promise<string>;
}

async function setup(
  t: TestContext,
  options: {
    cluster: 'baseline' | 'candidate';
    chooseCluster?: () => string;
    behave(call: FakeCall): DispatchOutcome | Promise<DispatchOutcome>;
    maxDispatchAttempts?: number;
    rollbackSettleTimeoutMs?: number;
  },
): Promise<Setup> {
  const ledger = new FakeLedger();
  const admission = await fakeAdmission(t, ledger);
  const workers = new FakeWorkers(options.behave);
  const override = {
    all: false,
    covers() {
      return this.all;
    },
  };
  const reachability = { failed: [] as string[], answered: [] as string[] };
  const { registry, metrics } = testMetrics();
  const dispatcher = new Dispatcher(
    { clusters, maxDispatchAttempts: options.maxDispatchAttempts ?? 3, rollbackSettleTimeoutMs: options.rollbackSettleTimeoutMs ?? 5000 },
    {
      admission,
      workerCount: () => 2,
      workers,
      reports: {
        dispatchEnded: (_cluster, workerId, _address, _integration, outcome) => {
          if (outcome.kind === 'not-started' && outcome.unreachable) reachability.failed.push(workerId);
          else if (outcome.kind === 'done' || outcome.kind === 'not-started') reachability.answered.push(workerId);
        },
      },
      router: { chooseCluster: options.chooseCluster ?? (() => options.cluster) },
      override,
      metrics,
      logger: silentLogger,
    },
  );
  return { ledger, workers, dispatcher, override, reachability, metricsText: () => registry.metrics() };
}

function failedWith(result: DispatchResult, code: string): void {
  assert.ok(!result.ok, 'expected a failure');
  assert.ok(result.error instanceof HeadroomError, String(result.error));
  assert.equal(result.error.code, code, result.error.message);
}

test('an answered task: its lease goes back once, as answered, and the answer says where it ran', async (t) => {
  const s = await setup(t, { cluster: 'baseline', behave: (call) => answered(call.workerId, 'hello') });
  s.ledger.addWorker('baseline', 'w1', 2);
  const result = await s.dispatcher.dispatch(task(), new AbortController().signal);
  assert.ok(result.ok);
  assert.equal(result.cluster, 'baseline');
  assert.equal(result.answer.result?.toString(), 'hello');
  const placement = result.answer.placement!;
  assert.deepEqual([placement.cluster, placement.workerId, placement.runMs, placement.attempts], ['baseline', 'w1', 7, 1]);
  assert.ok(Number(placement.queueWaitMs) >= 0);
  await settle();
  assert.deepEqual(
    s.ledger.releases.map((r) => r.workerId),
    ['w1'],
  );
  assert.equal(s.ledger.finishedByWorker.get('w1'), 1);
  assert.deepEqual(s.reachability.answered, ['w1']);
  assert.equal(s.workers.calls[0]!.request.cluster, 'baseline');
  assert.equal(s.workers.calls[0]!.request.leaseId, 'lease-1');
});

test('a refusal: the lease goes back unused and the task goes to another worker, skipping the first', async (t) => {
  const s = await setup(t, {
    cluster: 'baseline',
    behave: (call) =>
      call.workerId === 'w1' ? { kind: 'not-started', unreachable: false, code: 'HR_ERR_WORKER_FULL', message: 'full' } : answered(call.workerId),
  });
  s.ledger.addWorker('baseline', 'w1', 3);
  s.ledger.addWorker('baseline', 'w2', 1);
  const result = await s.dispatcher.dispatch(task(), new AbortController().signal);
  assert.ok(result.ok);
  assert.deepEqual([result.answer.placement?.workerId, result.answer.placement?.attempts], ['w2', 2]);
  await settle();
  assert.deepEqual(
    s.ledger.releases.map((r) => r.workerId),
    ['w1', 'w2'],
  );
  assert.deepEqual(s.ledger.reserveRequests.at(-1)?.skipWorkerIds, ['w1']);
  assert.equal(s.dispatcher.retries, 1);
  assert.match(await s.metricsText(), /^headroom_balancer_dispatch_retries_total\{reason="refused"\} 1$/m);
});

test('a refusal for want of a handler goes to another worker; once every worker refused so, the task fails at once with HR_ERR_NO_HANDLER, not run', async (t) => {
  const noHandler = (workerId: string): DispatchOutcome => ({
    kind: 'not-started',
    unreachable: false,
    code: 'HR_ERR_NO_HANDLER',
    message: `worker ${workerId} has no handler`,
  });
  const one = await setup(t, { cluster: 'baseline', behave: (call) => (call.workerId === 'w1' ? noHandler('w1') : answered(call.workerId)) });
  one.ledger.addWorker('baseline', 'w1', 3);
  one.ledger.addWorker('baseline', 'w2', 1);
  const served = await one.dispatcher.dispatch(task(), new AbortController().signal);
  assert.ok(served.ok);
  assert.deepEqual([served.answer.placement?.workerId, served.answer.placement?.attempts], ['w2', 2]);
  // Both workers (workerCount 2) lack it: no waiting for a slot that cannot help.
  const none = await setup(t, { cluster: 'baseline', behave: (call) => noHandler(call.workerId) });
  none.ledger.addWorker('baseline', 'w1', 3);
  none.ledger.addWorker('baseline', 'w2', 1);
  const result = await none.dispatcher.dispatch(task(), new AbortController().signal);
  failedWith(result, 'HR_ERR_NO_HANDLER');
  assert.equal(none.workers.calls.length, 2);
});

test('an unreachable worker is reported; when every attempt fails the task gets HR_ERR_NO_WORKER_TOOK_IT', async (t) => {
  const s = await setup(t, {
    cluster: 'baseline',
    maxDispatchAttempts: 2,
    behave: () => ({ kind: 'not-started', unreachable: true, code: '', message: 'connect refused' }),
  });
  for (const id of ['w1', 'w2', 'w3']) s.ledger.addWorker('baseline', id, 1);
  const result = await s.dispatcher.dispatch(task(), new AbortController().signal);
  failedWith(result, 'HR_ERR_NO_WORKER_TOOK_IT');
  assert.equal(result.cluster, 'baseline');
  assert.equal(s.workers.calls.length, 2);
  assert.equal(s.reachability.failed.length, 2);
  await settle();
  assert.deepEqual(s.ledger.releases.length, 2);
  assert.equal(s.ledger.leasesHeld(), 0);
});

test('a worker lost after the start keeps its lease; a plain task fails HR_ERR_WORKER_LOST, an idempotent one goes elsewhere', async (t) => {
  const s = await setup(t, {
    cluster: 'baseline',
    behave: (call) => (call.workerId === 'w1' ? { kind: 'lost', message: 'connection reset' } : answered(call.workerId)),
  });
  s.ledger.addWorker('baseline', 'w1', 5);
  s.ledger.addWorker('baseline', 'w2', 1);
  const plain = await s.dispatcher.dispatch(task(), new AbortController().signal);
  failedWith(plain, 'HR_ERR_WORKER_LOST');
  assert.equal(s.ledger.finishedByWorker.get('w1'), 1);

  const idempotent = await s.dispatcher.dispatch(task({ id: 't2', idempotent: true }), new AbortController().signal);
  assert.ok(idempotent.ok);
  assert.deepEqual([idempotent.answer.placement?.workerId, idempotent.answer.placement?.attempts], ['w2', 2]);
  await settle();
  // The balancer released only the answered lease: both lost ones are the worker's (or the sweep's).
  assert.deepEqual(
    s.ledger.releases.map((r) => r.workerId),
    ['w2'],
  );
  assert.equal(s.ledger.leasesHeld(), 2);
  assert.match(await s.metricsText(), /^headroom_balancer_dispatch_retries_total\{reason="lost"\} 1$/m);
});

test('cancelled or past its deadline: a started task leaves its lease to the worker, an unstarted one gives it back', async (t) => {
  const outcomes: DispatchOutcome[] = [
    { kind: 'cancelled', started: true },
    { kind: 'cancelled', started: false },
    { kind: 'deadline', started: true },
    { kind: 'deadline', started: false },
  ];
  const s = await setup(t, { cluster: 'baseline', behave: () => outcomes.shift()! });
  s.ledger.addWorker('baseline', 'w1', 4);
  const results: DispatchResult[] = [];
  for (let i = 0; i < 4; i++) results.push(await s.dispatcher.dispatch(task({ id: `t${i}` }), new AbortController().signal));
  failedWith(results[0]!, 'HR_ERR_CANCELLED');
  failedWith(results[1]!, 'HR_ERR_CANCELLED');
  failedWith(results[2]!, 'HR_ERR_DEADLINE_EXCEEDED');
  failedWith(results[3]!, 'HR_ERR_DEADLINE_EXCEEDED');
  await settle();
  assert.deepEqual(
    s.ledger.releases.map((r) => r.leaseId),
    ['lease-2', 'lease-4'],
  );
  assert.equal(s.workers.calls.length, 4, 'no retry after a cancel or a deadline');
});

test('a rollback while the candidate slot is being reserved: that slot goes back and the task runs on the baseline', async (t) => {
  const s = await setup(t, { cluster: 'candidate', behave: (call) => answered(call.workerId) });
  s.ledger.addWorker('candidate', 'c1', 1);
  s.ledger.addWorker('baseline', 'b1', 1);
  const gate = deferred();
  s.ledger.reserveGate = gate.promise;
  const dispatching = s.dispatcher.dispatch(task(), new AbortController().signal);
  await settle();
  s.ledger.reserveGate = undefined;
  s.override.all = true;
  // Nothing waits in the candidate queue: the reservation is in flight.
  assert.equal(await s.dispatcher.rollBack(() => true), true);
  gate.resolve();
  const result = await dispatching;
  assert.ok(result.ok);
  assert.equal(result.cluster, 'baseline');
  assert.deepEqual([result.answer.placement?.workerId, result.answer.placement?.attempts], ['b1', 1]);
  assert.deepEqual(
    s.workers.calls.map((c) => c.workerId),
    ['b1'],
    'nothing was sent to the candidate',
  );
  await settle();
  assert.deepEqual(
    s.ledger.releases.map((r) => r.cluster),
    ['candidate', 'baseline'],
  );
  assert.equal(s.dispatcher.rerouted, 1);
  assert.match(await s.metricsText(), /^headroom_balancer_rerouted_tasks_total 1$/m);
});

test('a task a rollback moved to the baseline and that then fails ends in the baseline', async (t) => {
  const s = await setup(t, { cluster: 'candidate', behave: (call) => answered(call.workerId) });
  s.ledger.addWorker('candidate', 'c1', 0);
  const keepAlive = setTimeout(() => undefined, 2000);
  t.after(() => clearTimeout(keepAlive));
  const dispatching = s.dispatcher.dispatch(task({ deadlineUnixMs: Date.now() + 200 }), new AbortController().signal);
  await settle();
  s.override.all = true;
  await s.dispatcher.rollBack(() => true);
  assert.equal(s.dispatcher.rerouted, 1);
  const result = await dispatching;
  failedWith(result, 'HR_ERR_DEADLINE_EXCEEDED');
  assert.equal(result.cluster, 'baseline');
});

test('a task moved while it waited runs on the baseline, without the workers it skipped in the candidate', async (t) => {
  const s = await setup(t, {
    cluster: 'candidate',
    behave: (call) =>
      call.workerId === 'c1' ? { kind: 'not-started', unreachable: false, code: 'HR_ERR_WORKER_FULL', message: 'full' } : answered(call.workerId),
  });
  s.ledger.addWorker('candidate', 'c1', 1);
  s.ledger.addWorker('baseline', 'b1', 0);
  const dispatching = s.dispatcher.dispatch(task(), new AbortController().signal);
  await settle();
  // c1 refused; the task waits for another candidate worker, skipping c1.
  assert.deepEqual(s.ledger.reserveRequests.at(-1), { cluster: 'candidate', skipWorkerIds: ['c1'] });
  s.override.all = true;
  await s.dispatcher.rollBack(() => true);
  s.ledger.freeSlot('baseline', 'b1');
  const result = await dispatching;
  assert.ok(result.ok);
  assert.deepEqual([result.cluster, result.answer.placement?.workerId, result.answer.placement?.attempts], ['baseline', 'b1', 2]);
  assert.deepEqual(s.ledger.reserveRequests.filter((r) => r.cluster === 'baseline').at(-1)?.skipWorkerIds, []);
  assert.equal(s.dispatcher.rerouted, 1);
  await settle();
  assert.deepEqual(
    s.ledger.releases.map((r) => r.workerId),
    ['c1', 'b1'],
  );
});

test("a rollback's acknowledgement waits for the covered dispatches to the candidate to start, and not past its timeout", async (t) => {
  const held = deferred<DispatchOutcome>();
  const calls: FakeCall[] = [];
  const s = await setup(t, {
    cluster: 'candidate',
    rollbackSettleTimeoutMs: 100,
    behave: (call) => {
      calls.push(call);
      return held.promise;
    },
  });
  s.ledger.addWorker('candidate', 'c1', 2);
  const first = s.dispatcher.dispatch(task({ integration: 'bank-a' }), new AbortController().signal);
  await settle();
  s.override.all = true;
  let acknowledged: boolean | undefined;
  const settling = s.dispatcher.rollBack((integration) => integration === 'bank-a').then((settled) => (acknowledged = settled));
  await settle();
  assert.equal(acknowledged, undefined, 'the task on its way to c1 has not started');
  calls[0]!.started();
  await settling;
  assert.equal(acknowledged, true);

  // A dispatch that never says started holds the acknowledgement for rollbackSettleTimeoutMs at most.
  s.override.all = false;
  const second = s.dispatcher.dispatch(task({ id: 't2', integration: 'bank-a' }), new AbortController().signal);
  await settle();
  s.override.all = true;
  const startedAt = Date.now();
  const keepAlive = setTimeout(() => undefined, 1000);
  assert.equal(await s.dispatcher.rollBack((integration) => integration === 'bank-a'), false);
  clearTimeout(keepAlive);
  assert.ok(Date.now() - startedAt >= 90);
  held.resolve(answered('c1'));
  assert.ok((await first).ok);
  assert.ok((await second).ok);
});

test('a cluster choice that throws: the task fails, unrouted, and dispatch does not reject', async (t) => {
  const s = await setup(t, {
    cluster: 'baseline',
    chooseCluster: () => {
      throw new Error('flag client broke');
    },
    behave: (call) => answered(call.workerId),
  });
  const result = await s.dispatcher.dispatch(task(), new AbortController().signal);
  assert.ok(!result.ok);
  assert.equal(result.cluster, 'none');
  assert.match(String(result.error), /flag client broke/);
});
