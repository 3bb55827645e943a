import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { Acquired, AcquireRequest } from '../src/admission';
import * as grpc from '@grpc/grpc-js';
import { grpcStatusOf } from '../src/errors';
import { FakeLedger, deferred, fakeAdmission, settle } from './fakes';

function request(overrides: Partial<AcquireRequest> = {}): AcquireRequest {
  return {
    priority: 'user',
    integration: 'bank-a',
    deadlineUnixMs: Date.now() + 10_000,
    skipWorkerIds: [],
    signal: new AbortController().signal,
    payloadBytes: 10,
    ...overrides,
  };
}

function leased(acquired: Acquired) {
  assert.ok(acquired.ok, `no lease: ${acquired.ok ? '' : `${acquired.error.code} in ${acquired.cluster}`}`);
  return acquired.lease;
}

/** Records the order in which acquires end, by name. */
function track(order: string[], name: string, acquiring: Promise<Acquired>): Promise<Acquired> {
  return acquiring.then((acquired) => {
    order.push(name);
    return acquired;
  });
}

test('a free slot is leased at once; abandon() gives it back once', async (t) => {
  const ledger = new FakeLedger();
  ledger.addWorker('baseline', 'w1', 1);
  const admission = await fakeAdmission(t, ledger);
  const lease = leased(await admission.acquire('baseline', request()));
  assert.deepEqual([lease.cluster, lease.workerId, lease.owner], ['baseline', 'w1', 'balancer']);
  assert.equal(ledger.freeSlots('baseline', 'w1'), 0);
  const first = lease.abandon();
  assert.equal(lease.abandon(), first, 'a second abandon() is the first');
  await first;
  assert.deepEqual(
    ledger.releases.map((r) => r.leaseId),
    [lease.leaseId],
  );
  assert.equal(ledger.finishedByWorker.get('w1'), 1);
  assert.equal(ledger.freeSlots('baseline', 'w1'), 1);
});

test('a lease left to the worker is never given back by the balancer', async (t) => {
  const ledger = new FakeLedger();
  ledger.addWorker('baseline', 'w1', 1);
  const admission = await fakeAdmission(t, ledger);
  const lease = leased(await admission.acquire('baseline', request()));
  lease.leaveToWorker();
  assert.equal(lease.owner, 'worker');
  await lease.abandon();
  await lease.abandon();
  assert.deepEqual(ledger.releases, []);
  assert.equal(ledger.leasesHeld(), 1, 'the worker releases it, not this balancer');
  assert.equal(ledger.finishedByWorker.get('w1'), 1, "the policy hears once that the balancer's part ended");
});

test('waiting tasks get freed slots user-present first, in arrival order within a priority', async (t) => {
  const ledger = new FakeLedger();
  ledger.addWorker('baseline', 'w1', 0);
  const admission = await fakeAdmission(t, ledger);
  const order: string[] = [];
  const waits = [
    track(order, 'bg1', admission.acquire('baseline', request({ priority: 'background' }))),
    track(order, 'up1', admission.acquire('baseline', request())),
    track(order, 'bg2', admission.acquire('baseline', request({ priority: 'background' }))),
    track(order, 'up2', admission.acquire('baseline', request())),
  ];
  await settle();
  assert.deepEqual(admission.stats().byCluster['baseline'], { userPresent: 2, background: 2 });
  for (let freed = 1; freed <= 4; freed++) {
    ledger.freeSlot('baseline', 'w1');
    await settle();
    assert.equal(order.length, freed, `one task served per freed slot (${order.join(', ')})`);
  }
  assert.deepEqual(order, ['up1', 'up2', 'bg1', 'bg2']);
  for (const acquired of await Promise.all(waits)) leased(acquired);
  assert.equal(admission.stats().queued, 0);
});

test('a rollback moves waiting tasks into the baseline queue in their place by arrival, without failing them', async (t) => {
  const ledger = new FakeLedger();
  ledger.addWorker('baseline', 'b1', 0);
  ledger.addWorker('candidate', 'c1', 0);
  const admission = await fakeAdmission(t, ledger);
  const order: string[] = [];
  const a = track(order, 'a', admission.acquire('baseline', request({ integration: 'bank-a' })));
  await settle();
  const b = track(order, 'b', admission.acquire('candidate', request({ integration: 'bank-b', skipWorkerIds: ['c9'] })));
  const untouched = track(order, 'other', admission.acquire('candidate', request({ integration: 'bank-z' })));
  await settle();
  const c = track(order, 'c', admission.acquire('baseline', request({ integration: 'bank-c' })));
  await settle();

  assert.equal(
    admission.reroute('candidate', 'baseline', (integration) => integration === 'bank-b'),
    1,
  );
  await settle();
  assert.deepEqual(admission.stats().byCluster, { baseline: { userPresent: 3, background: 0 }, candidate: { userPresent: 1, background: 0 } });
  assert.deepEqual(order, [], 'nothing failed');
  // Skipped workers belong to the cluster the task left.
  const inBaseline = ledger.reserveRequests.filter((r) => r.cluster === 'baseline');
  assert.ok(inBaseline.length >= 3 && inBaseline.every((r) => r.skipWorkerIds.length === 0), JSON.stringify(inBaseline));

  for (let freed = 1; freed <= 3; freed++) {
    ledger.freeSlot('baseline', 'b1');
    await settle();
  }
  assert.deepEqual(order, ['a', 'b', 'c']);
  const moved = leased(await b);
  assert.deepEqual([moved.cluster, moved.workerId], ['baseline', 'b1']);
  leased(await a);
  leased(await c);
  assert.equal(admission.stats().byCluster['candidate']!.userPresent, 1, 'a task the rollback does not cover stays');
  ledger.freeSlot('candidate', 'c1');
  assert.equal(leased(await untouched).cluster, 'candidate');
});

test("the candidate's last task moved away: this balancer stops waiting there", async (t) => {
  const ledger = new FakeLedger();
  ledger.addWorker('candidate', 'c1', 0);
  ledger.addWorker('baseline', 'b1', 0);
  const admission = await fakeAdmission(t, ledger);
  const waiting = admission.acquire('candidate', request());
  await settle();
  assert.deepEqual(ledger.stopWaitingCalls, []);
  admission.reroute('candidate', 'baseline', () => true);
  await settle();
  assert.deepEqual(ledger.stopWaitingCalls, [{ cluster: 'candidate', which: 'all' }]);
  ledger.freeSlot('baseline', 'b1');
  assert.equal(leased(await waiting).cluster, 'baseline');
});

test('slots reserved in the candidate for tasks the rollback moved meanwhile are given back; the tasks get baseline slots', async (t) => {
  const ledger = new FakeLedger();
  ledger.addWorker('candidate', 'c1', 0);
  ledger.addWorker('baseline', 'b1', 0);
  const admission = await fakeAdmission(t, ledger);
  // One task must avoid a worker (its slot is its own), the other takes any (slots are shared).
  const avoiding = admission.acquire('candidate', request({ skipWorkerIds: ['c9'] }));
  const any = admission.acquire('candidate', request());
  await settle();
  // Candidate slots free and the queue's reservations for both are on their way...
  const gate = deferred();
  ledger.reserveGate = gate.promise;
  ledger.freeSlot('candidate', 'c1');
  ledger.freeSlot('candidate', 'c1');
  await settle();
  // ...when the rollback moves the tasks.
  ledger.reserveGate = undefined;
  admission.reroute('candidate', 'baseline', () => true);
  gate.resolve();
  await settle();
  assert.deepEqual(
    ledger.releases.map((r) => r.cluster),
    ['candidate', 'candidate'],
  );
  assert.equal(ledger.freeSlots('candidate', 'c1'), 2);
  ledger.freeSlot('baseline', 'b1');
  ledger.freeSlot('baseline', 'b1');
  assert.deepEqual([leased(await avoiding).cluster, leased(await any).cluster], ['baseline', 'baseline']);
});

test('a moved task that finds no slot before its deadline fails naming the baseline', async (t) => {
  const ledger = new FakeLedger();
  ledger.addWorker('candidate', 'c1', 0);
  const admission = await fakeAdmission(t, ledger);
  const waiting = admission.acquire('candidate', request({ deadlineUnixMs: Date.now() + 150 }));
  // Deadline timers are unref()ed (in a balancer its server keeps the process up): hold it open here.
  const keepAlive = setTimeout(() => undefined, 1000);
  t.after(() => clearTimeout(keepAlive));
  await settle();
  admission.reroute('candidate', 'baseline', () => true);
  const acquired = await waiting;
  assert.ok(!acquired.ok);
  assert.equal(acquired.cluster, 'baseline');
  assert.equal(acquired.error.code, 'HR_ERR_DEADLINE_EXCEEDED');
  assert.match(acquired.error.message, /no free slot in cluster baseline before the deadline/);
  assert.equal(admission.stats().queued, 0);
  assert.equal(admission.stats().queuedBytes, 0);
});

test('a full queue: a user-present task sheds the newest background one; a background task is refused', async (t) => {
  const ledger = new FakeLedger();
  ledger.addWorker('baseline', 'w1', 0);
  const admission = await fakeAdmission(t, ledger, { maxQueuedTasks: 2 });
  const bg1 = admission.acquire('baseline', request({ priority: 'background' }));
  const bg2 = admission.acquire('baseline', request({ priority: 'background' }));
  await settle();
  const up = admission.acquire('baseline', request());
  const shed = await bg2;
  assert.ok(!shed.ok && shed.error.code === 'HR_ERR_SHED' && shed.cluster === 'baseline');
  const refused = await admission.acquire('baseline', request({ priority: 'background' }));
  assert.ok(!refused.ok && refused.error.code === 'HR_ERR_QUEUE_FULL');
  assert.deepEqual([admission.stats().shed, admission.stats().refusedQueueFull], [1, 1]);
  ledger.freeSlot('baseline', 'w1');
  leased(await up);
  ledger.freeSlot('baseline', 'w1');
  leased(await bg1);
});

test('a task cancelled while its slot was being reserved gives the slot back and fails cancelled', async (t) => {
  const ledger = new FakeLedger();
  ledger.addWorker('baseline', 'w1', 1);
  const admission = await fakeAdmission(t, ledger);
  const gate = deferred();
  ledger.reserveGate = gate.promise;
  const abort = new AbortController();
  const acquiring = admission.acquire('baseline', request({ signal: abort.signal }));
  await settle();
  abort.abort();
  gate.resolve();
  const acquired = await acquiring;
  assert.ok(!acquired.ok && acquired.error.code === 'HR_ERR_CANCELLED');
  assert.deepEqual(ledger.releases.length, 1);
  assert.equal(ledger.freeSlots('baseline', 'w1'), 1);
});

test('closing fails the waiting tasks with HR_ERR_SHUTTING_DOWN, in the queue each was in', async (t) => {
  const ledger = new FakeLedger();
  ledger.addWorker('candidate', 'c1', 0);
  const admission = await fakeAdmission(t, ledger);
  const moved = admission.acquire('candidate', request({ integration: 'bank-b' }));
  const stayed = admission.acquire('candidate', request({ integration: 'bank-a' }));
  await settle();
  admission.reroute('candidate', 'baseline', (integration) => integration === 'bank-b');
  await admission.close();
  const [a, b] = await Promise.all([moved, stayed]);
  assert.ok(!a.ok && a.error.code === 'HR_ERR_SHUTTING_DOWN' && a.cluster === 'baseline');
  assert.ok(!b.ok && b.error.code === 'HR_ERR_SHUTTING_DOWN' && b.cluster === 'candidate');
});

test("a task over its integration's limit waits without holding up the tasks of other integrations, new or queued behind it", async (t) => {
  const ledger = new FakeLedger();
  ledger.addWorker('baseline', 'w1', 2);
  ledger.integrationLimits.set('slow', 1);
  const admission = await fakeAdmission(t, ledger);
  const order: string[] = [];
  const slow1 = leased(await admission.acquire('baseline', request({ integration: 'slow' })));
  const slow2 = track(order, 'slow2', admission.acquire('baseline', request({ integration: 'slow' })));
  // More slow tasks than one round trip asks for (16): the fast one behind them is served anyway.
  const slowMore = Array.from({ length: 20 }, () => admission.acquire('baseline', request({ integration: 'slow' })));
  await settle();
  // A user-present task of another integration arrives after the waiting one: it goes at once.
  const fast1 = leased(await admission.acquire('baseline', request({ integration: 'fast' })));
  const fast2 = track(order, 'fast2', admission.acquire('baseline', request({ integration: 'fast' })));
  await settle();
  assert.deepEqual(admission.stats().byCluster['baseline'], { userPresent: 22, background: 0 });
  // What the balancer's heartbeat tells the control plane: the slow tasks wait for their limit, the fast one for a slot.
  assert.deepEqual(admission.waitingAtLimit(), [{ cluster: 'baseline', integration: 'slow', waiting: 21 }]);
  // The freed slot goes to the fast task behind the slow ones at the head.
  await fast1.abandon();
  await settle();
  assert.deepEqual(order, ['fast2']);
  await slow1.abandon();
  await settle();
  assert.deepEqual(order, ['fast2', 'slow2']);
  leased(await slow2);
  leased(await fast2);
  assert.equal(slowMore.length, 20);
});

test("a user-present task is not held by its integration's background tasks waiting at the share they may take", async (t) => {
  const ledger = new FakeLedger();
  ledger.addWorker('baseline', 'w1', 8);
  ledger.integrationLimits.set('bank', 3);
  ledger.keptForUserPresent.set('bank', 1);
  const admission = await fakeAdmission(t, ledger);
  const running = [
    leased(await admission.acquire('baseline', request({ integration: 'bank', priority: 'background' }))),
    leased(await admission.acquire('baseline', request({ integration: 'bank', priority: 'background' }))),
  ];
  const order: string[] = [];
  const background = track(order, 'background', admission.acquire('baseline', request({ integration: 'bank', priority: 'background' })));
  await settle();
  assert.deepEqual(admission.waitingAtLimit(), [{ cluster: 'baseline', integration: 'bank', waiting: 1 }]);
  // The slot kept for user-present tasks is free: one takes it at once, with no news of a freed slot.
  const user = leased(await admission.acquire('baseline', request({ integration: 'bank' })));
  // Now at its whole limit: the next user-present task waits, and goes before the background one.
  const nextUser = track(order, 'user', admission.acquire('baseline', request({ integration: 'bank' })));
  await settle();
  assert.deepEqual(admission.stats().byCluster['baseline'], { userPresent: 1, background: 1 });
  await running[0]!.abandon();
  await settle();
  assert.deepEqual(order, ['user']);
  leased(await nextUser);
  // The background one waits until the background tasks are under their share again.
  await user.abandon();
  await settle();
  assert.deepEqual(order, ['user']);
  await running[1]!.abandon();
  leased(await background);
});

test("when its integration's share of the queue is full, a task at the limit gets a coded, retryable error naming the integration and its limit", async (t) => {
  const ledger = new FakeLedger();
  ledger.addWorker('baseline', 'w1', 8);
  ledger.integrationLimits.set('slow', 1);
  const admission = await fakeAdmission(t, ledger, { maxQueuedTasks: 4, maxQueuedShareAtLimit: 0.5 });
  leased(await admission.acquire('baseline', request({ integration: 'slow' })));
  const waiting = [
    admission.acquire('baseline', request({ integration: 'slow' })),
    admission.acquire('baseline', request({ integration: 'slow', priority: 'background' })),
  ];
  await settle();
  const refused = await admission.acquire('baseline', request({ integration: 'slow' }));
  assert.ok(!refused.ok);
  assert.equal(refused.error.code, 'HR_ERR_INTEGRATION_AT_LIMIT');
  assert.equal(grpcStatusOf(refused.error.code), grpc.status.RESOURCE_EXHAUSTED);
  assert.ok(refused.error.retryAfterMs !== undefined);
  assert.match(refused.error.message, /integration slow has 1 tasks in flight in cluster baseline, its limit/);
  assert.equal(admission.stats().refusedAtLimit, 1);
  // Other integrations still get slots, and queue places.
  leased(await admission.acquire('baseline', request({ integration: 'fast', priority: 'background' })));
  assert.equal(waiting.length, 2);
});

test("a task at its integration's start rate is passed over until the time the ledger gave, then served with no freed slot to wake the queue", async (t) => {
  const ledger = new FakeLedger();
  ledger.addWorker('baseline', 'w1', 8);
  ledger.integrationsAtRate.set('slow', { maxStartsPerSecond: 5, retryAfterMs: 50 });
  // The recheck comes every 60 s here: only the rate's own timer can serve the queue in time.
  const admission = await fakeAdmission(t, ledger, { maxQueuedTasks: 4, maxQueuedShareAtLimit: 0.25 });
  const slow = admission.acquire('baseline', request({ integration: 'slow' }));
  await settle();
  assert.deepEqual(admission.waitingAtLimit(), [{ cluster: 'baseline', integration: 'slow', waiting: 1 }]);
  leased(await admission.acquire('baseline', request({ integration: 'fast' })));
  const refused = await admission.acquire('baseline', request({ integration: 'slow' }));
  assert.ok(!refused.ok && refused.error.code === 'HR_ERR_INTEGRATION_AT_LIMIT');
  assert.match(
    refused.error.message,
    /integration slow starts 5 tasks per second in cluster baseline, its limit \(maxStartsPerSecond\), and has 1 waiting here/,
  );
  assert.equal(refused.error.retryAfterMs, 200, 'one queued task at 5 a second');
  assert.deepEqual([admission.stats().refusedAtLimit, admission.stats().refusedAtRate], [1, 1]);
  ledger.integrationsAtRate.delete('slow');
  // The balancer's timers are unref'd (they keep no process alive): this one keeps the test's.
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'timed out'>((resolve) => (timer = setTimeout(() => resolve('timed out'), 5_000)));
  const served = await Promise.race([slow, timeout]);
  clearTimeout(timer);
  assert.notEqual(served, 'timed out', 'the queue was not served when the rate allowed');
  leased(served as Acquired);
});
