import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { OverrideStore, ledgerDefaults } from '@headroom/fleet';
import { eventually, json, mapLimit } from '@headroom/testkit';
import type { HandlerMap } from '@headroom/worker';
import { CancelledError, DeadlineExceededError, QueueFullError, ShedError, type SubmitRequest } from '../src/index';
import { modes, startModeFleet, type Front } from './fronts';

/**
 * The balancer's properties, held in both modes: through a balancer (HeadroomClient →
 * Balancer.Submit) and proxyless (the client reserves through the ledger and calls the worker).
 * Real Redis, real workers; the same assertions in both.
 */

let taskCounter = 0;
function request(overrides: Partial<SubmitRequest> = {}): SubmitRequest {
  taskCounter++;
  return { id: `task-${taskCounter}`, key: `account-${taskCounter}`, integration: 'bank-a', priority: 'USER_PRESENT', ...overrides };
}

/** Every worker ran at most its max parallelism at once, and each got work. */
function assertNoOverAdmission(
  workers: ReadonlyArray<{ workerId: string; stats(): { highWaterMark: number; completed: number } }>,
  capacities: readonly number[],
): void {
  for (const [i, worker] of workers.entries()) {
    const stats = worker.stats();
    assert.ok(stats.highWaterMark <= capacities[i]!, `${worker.workerId} ran ${stats.highWaterMark} at once, max ${capacities[i]}`);
    assert.ok(stats.completed > 0, `${worker.workerId} got no task`);
  }
}

for (const mode of modes) {
  test(`${mode}: no over-admission: 3 ${mode === 'balancer' ? 'balancers' : 'proxyless clients'}, 10 workers, concurrent load`, async (t) => {
    const { fleet, addFront } = await startModeFleet(t, { keptForUserPresentShare: 0 });
    const capacities = [1, 1, 2, 2, 3, 3, 4, 4, 5, 5];
    for (const maxParallelism of capacities) await fleet.addWorker({ cluster: 'baseline', maxParallelism });
    const fronts: Front[] = [];
    for (let i = 0; i < 3; i++) fronts.push(await addFront(mode));
    // Three integrations: each may hold half the slots (the default limit), together all of them.
    const integrations = ['bank-a', 'bank-b', 'bank-c'];
    const tasks = Array.from({ length: 600 }, (_, i) =>
      request({ integration: integrations[i % 3]!, priority: i % 5 ? 'BACKGROUND' : 'USER_PRESENT', payload: json({ sleepMs: 5 + (i % 7) * 3 }) }),
    );
    // 90 in flight at once against 30 slots: tasks queue, slots are contended by all three.
    const results = await mapLimit(tasks, 90, (r, i) => fronts[i % 3]!.settle(r));
    const failures = results.filter((r) => !r.ok);
    assert.equal(
      failures.length,
      0,
      failures
        .slice(0, 3)
        .map((f) => (f.ok ? '' : `${f.error.code}: ${f.error.message}`))
        .join('\n'),
    );
    assertNoOverAdmission(fleet.workers, capacities);
    await eventually('all slots free', 3000, async () => ((await fleet.ledger.snapshot('baseline')).totalFree === 30 ? true : undefined));
    assert.equal(
      fleet.workers.reduce((sum, w) => sum + w.stats().refusals, 0),
      0,
      'the ledger never sent a task to a full worker',
    );
  });

  test(`${mode}: user-present tasks go first; background waits and is shed first when the queue is full`, async (t) => {
    const { fleet, addFront } = await startModeFleet(t, { keptForUserPresentShare: 0 });
    await fleet.addWorker({ cluster: 'baseline', maxParallelism: 1 });
    // No retries: the test reads each refusal as it comes.
    const front = await addFront(mode, { maxQueuedTasks: 3, retry: { maxAttempts: 1 } });
    const order: string[] = [];
    const run = (id: string, priority: 'USER_PRESENT' | 'BACKGROUND', sleepMs = 50) =>
      front.settle(request({ id, priority, payload: json({ sleepMs }) })).then((r) => {
        order.push(id);
        return r;
      });
    const blocker = run('blocker', 'USER_PRESENT', 300);
    await eventually('blocker runs', 2000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
    const bg1 = run('bg1', 'BACKGROUND');
    const bg2 = run('bg2', 'BACKGROUND');
    await eventually('two queued', 2000, () => (front.engine().queue.queued === 2 ? true : undefined));
    const up1 = run('up1', 'USER_PRESENT');
    await eventually('three queued', 2000, () => (front.engine().queue.queued === 3 ? true : undefined));
    // It waits as a balancer does: recorded in the ledger, so that no other balancer or client admits background work meanwhile.
    await eventually('recorded as waiting for user-present work', 2000, async () =>
      (await fleet.ledger.snapshot('baseline')).waitingUserPresentBalancers.includes(front.balancerId) ? true : undefined,
    );
    // Full: a user-present task sheds the newest background one...
    const up2 = run('up2', 'USER_PRESENT');
    const shed = await bg2;
    assert.ok(!shed.ok && shed.error instanceof ShedError && shed.error.retryAfterMs === 1000, JSON.stringify(shed));
    // ...and a background task is refused with a retry hint.
    const refused = await run('bg3', 'BACKGROUND');
    assert.ok(!refused.ok && refused.error instanceof QueueFullError && refused.error.retryAfterMs !== undefined, JSON.stringify(refused));
    const results = await Promise.all([blocker, bg1, up1, up2]);
    assert.ok(
      results.every((r) => r.ok),
      JSON.stringify(results),
    );
    assert.deepEqual(
      order.filter((id) => ['blocker', 'up1', 'up2', 'bg1'].includes(id)),
      ['blocker', 'up1', 'up2', 'bg1'],
    );
    assert.match(await front.registry.metrics(), /^headroom_balancer_shed_total 1$/m);
  });

  test(`${mode}: background work may not take the share kept for user-present tasks`, async (t) => {
    const { fleet, addFront } = await startModeFleet(t, { keptForUserPresentShare: 0.5 });
    // Two slots, one of them kept for user-present work.
    const worker = await fleet.addWorker({ cluster: 'baseline', maxParallelism: 2 });
    const front = await addFront(mode);
    const background = front.submit(request({ priority: 'BACKGROUND', payload: json({ sleepMs: 600 }) }));
    await eventually('the background task runs', 2000, () => (worker.stats().inflight === 1 ? true : undefined));
    const secondBackground = front.submit(request({ priority: 'BACKGROUND', payload: json({ sleepMs: 10 }) }));
    await eventually('a second background task waits though a slot is free', 2000, () => (front.engine().queue.queued === 1 ? true : undefined));
    assert.equal(worker.stats().inflight, 1);
    // The kept slot serves a user-present task at once.
    const user = await front.submit(request({ priority: 'USER_PRESENT', payload: json({ sleepMs: 10 }) }));
    assert.equal(user.placement.workerAttempts, 1);
    assert.ok(user.placement.queueWaitMs < 300, `the user-present task waited ${user.placement.queueWaitMs} ms`);
    assert.equal(front.engine().queue.queued, 1, 'the background task still waits');
    const [first, second] = await Promise.all([background, secondBackground]);
    assert.ok(second.placement.queueWaitMs >= 300, `the second background task waited ${second.placement.queueWaitMs} ms, not for the first to end`);
    assert.ok(first.result.length >= 0);
    assert.ok(worker.stats().highWaterMark <= 2);
  });

  test(`${mode}: no capacity before the deadline: DeadlineExceededError, and the queue entry is gone`, async (t) => {
    const { fleet, addFront } = await startModeFleet(t);
    await fleet.addWorker({ cluster: 'baseline', maxParallelism: 1 });
    const front = await addFront(mode);
    const blocker = front.submit(request({ payload: json({ sleepMs: 600 }) }));
    await eventually('blocker runs', 2000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
    const late = await front.settle(request({ deadlineMs: 200 }));
    assert.ok(!late.ok && late.error instanceof DeadlineExceededError && late.error.code === 'HR_ERR_DEADLINE_EXCEEDED', JSON.stringify(late));
    assert.equal(front.engine().queue.queued, 0);
    await blocker;
  });

  test(`${mode}: a caller that cancels: the task stops on its worker, is not retried, and its slot comes back`, async (t) => {
    const { fleet, addFront } = await startModeFleet(t, { keptForUserPresentShare: 0 });
    let aborted = 0;
    const waitForAbort: HandlerMap = {
      '*': (_task, signal) =>
        new Promise((_resolve, reject) =>
          signal.addEventListener('abort', () => {
            aborted++;
            reject(signal.reason);
          }),
        ),
    };
    const a = await fleet.addWorker({ cluster: 'baseline', workerId: 'a', maxParallelism: 2 }, waitForAbort);
    const b = await fleet.addWorker({ cluster: 'baseline', workerId: 'b', maxParallelism: 1 }, waitForAbort);
    const front = await addFront(mode);
    const abort = new AbortController();
    const pending = front.settle(request({ idempotent: true, signal: abort.signal }));
    await eventually('the task runs on a', 2000, () => (a.stats().inflight === 1 ? true : undefined));
    abort.abort();
    const answer = await pending;
    assert.ok(!answer.ok && answer.error instanceof CancelledError, JSON.stringify(answer));
    await eventually('the handler saw the abort', 2000, () => (aborted === 1 ? true : undefined));
    await eventually('the slot is free again', 2000, async () => ((await fleet.ledger.snapshot('baseline')).totalFree === 3 ? true : undefined));
    assert.equal(b.stats().completed + b.stats().failed + b.stats().inflight, 0, 'a cancelled task is not retried elsewhere');
  });

  test(`${mode}: a full worker refuses and the task goes to another worker before it starts`, async (t) => {
    const { fleet, addFront } = await startModeFleet(t, { keptForUserPresentShare: 0 });
    // 'a' heartbeats rarely, so the wrong capacity given it below stays in the ledger.
    const a = await fleet.addWorker({ cluster: 'baseline', workerId: 'a', maxParallelism: 1, heartbeatIntervalMs: 60_000 });
    const b = await fleet.addWorker({ cluster: 'baseline', workerId: 'b', maxParallelism: 1 });
    const front = await addFront(mode, { heartbeatTimeoutMs: 120_000 });
    const blockers = [front.submit(request({ payload: json({ sleepMs: 300 }) })), front.submit(request({ payload: json({ sleepMs: 300 }) }))];
    await eventually('both busy', 2000, () => (a.stats().inflight === 1 && b.stats().inflight === 1 ? true : undefined));
    // The ledger now believes 'a' has 2 free slots; 'a' itself has none.
    await fleet.ledger.heartbeat('baseline', { workerId: 'a', address: a.address, capacity: 3, draining: false, heldLeaseIds: [] });
    const result = await front.submit(request());
    assert.equal(result.placement.workerId, 'b', 'after the refusal the task waits for and goes to another worker');
    assert.equal(result.placement.workerAttempts, 2);
    assert.equal(result.attempts, 1, "the retry was the balancer logic's, not the client's");
    assert.equal(a.stats().refusals, 1);
    assert.equal(a.stats().highWaterMark, 1);
    assert.equal(front.engine().retries, 1);
    assert.match(await front.registry.metrics(), /^headroom_balancer_dispatch_retries_total\{reason="refused"\} 1$/m);
    await Promise.all(blockers);
  });

  test(`${mode}: a full queue is tried again after its hint, by the client's retry policy, and the task then runs`, async (t) => {
    const { fleet, addFront } = await startModeFleet(t, { keptForUserPresentShare: 0 });
    await fleet.addWorker({ cluster: 'baseline', maxParallelism: 1 });
    const front = await addFront(mode, { maxQueuedTasks: 1 });
    const blocker = front.submit(request({ payload: json({ sleepMs: 700 }) }));
    await eventually('blocker runs', 2000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
    const queued = front.submit(request({ payload: json({ sleepMs: 10 }) }));
    await eventually('one queued', 2000, () => (front.engine().queue.queued === 1 ? true : undefined));
    const startedAt = Date.now();
    const retried = await front.submit(request({ deadlineMs: 6000 }));
    assert.ok(retried.attempts >= 2, `${retried.attempts} calls`);
    assert.ok(Date.now() - startedAt >= 1000, 'waited the hint (1000 ms) before the second call');
    assert.equal(retried.placement.workerAttempts, 1);
    await Promise.all([blocker, queued]);
    assert.match(await front.registry.metrics(), /^headroom_balancer_queue_full_total [1-9]\d*$/m);
  });

  test(`${mode}: a task a rollback moved to the baseline and that then fails is counted under the baseline`, async (t) => {
    const { fleet, addFront } = await startModeFleet(t);
    // The candidate's only slot is held by a long task; the baseline has no worker.
    await fleet.addWorker({ cluster: 'candidate', workerId: 'cand-1', maxParallelism: 1 });
    const front = await addFront(mode, { candidatePercent: 100 });
    const long = front.submit(request({ payload: json({ sleepMs: 1500 }) }));
    await eventually('the long task runs', 3000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
    const doomed = front.settle(request({ payload: json({ sleepMs: 10 }), deadlineMs: 1000 }));
    await eventually('a task queued for the candidate', 3000, () => (front.engine().queue.queued === 1 ? true : undefined));
    await new OverrideStore(fleet.redis, fleet.ledgerOptions.keyPrefix ?? ledgerDefaults.keyPrefix).change({ operation: 'rollback-all' }, 'test');
    await eventually('the rollback applied', 3000, () => (front.engine().rerouted === 1 ? true : undefined));
    // In the baseline queue it finds no worker before its deadline.
    const failed = await doomed;
    assert.ok(!failed.ok && failed.error instanceof DeadlineExceededError, JSON.stringify(failed));
    const metrics = await front.registry.metrics();
    assert.match(
      metrics,
      /^headroom_balancer_tasks_total\{cluster="baseline",integration="bank-a",priority="user_present",outcome="HR_ERR_DEADLINE_EXCEEDED"\} 1$/m,
    );
    assert.doesNotMatch(
      metrics,
      /^headroom_balancer_tasks_total\{cluster="candidate",integration="bank-a",priority="user_present",outcome="HR_ERR_DEADLINE_EXCEEDED"\}/m,
    );
    assert.equal((await long).placement.cluster, 'candidate', 'the running task finished on the candidate');
  });

  test(`${mode}: a rollback is followed (queued tasks move to the baseline, in order) and acknowledged`, async (t) => {
    const { fleet, addFront } = await startModeFleet(t, { keptForUserPresentShare: 0 });
    await fleet.addWorker({ cluster: 'candidate', workerId: 'cand-1', maxParallelism: 1 });
    // Only bank-b goes to the candidate; the baseline has no worker at first.
    const front = await addFront(mode, { candidatePercent: 0, candidatePercentByIntegration: { 'bank-b': 100 } });
    const store = new OverrideStore(fleet.redis, fleet.ledgerOptions.keyPrefix ?? ledgerDefaults.keyPrefix);
    await eventually('registered with the control plane', 3000, async () =>
      (await store.liveBalancers(5000)).some((b) => b.balancerId === front.balancerId) ? true : undefined,
    );
    const record = (await store.liveBalancers(5000)).find((b) => b.balancerId === front.balancerId)!;
    assert.equal(record.address, front.address);
    if (mode === 'proxyless') assert.match(record.address, /^proxyless:/, 'a label the control plane shows, not an address to dial');

    const long = front.submit(request({ integration: 'bank-b', payload: json({ sleepMs: 1500 }) }));
    await eventually('the long task runs', 3000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
    const finished: string[] = [];
    const queue = (id: string, integration: string) =>
      front.submit(request({ id, integration, payload: json({ sleepMs: 20 }) })).then((result) => {
        finished.push(id);
        return result;
      });
    const first = queue('first', 'bank-a');
    await eventually('first queued', 3000, () => (front.engine().queue.byCluster['baseline']?.userPresent === 1 ? true : undefined));
    const moved = queue('moved', 'bank-b');
    await eventually('moved queued', 3000, () => (front.engine().queue.byCluster['candidate']?.userPresent === 1 ? true : undefined));
    const last = queue('last', 'bank-a');
    await eventually('last queued', 3000, () => (front.engine().queue.byCluster['baseline']?.userPresent === 2 ? true : undefined));

    const { version } = await store.change({ operation: 'rollback-all' }, 'test');
    await eventually('the rollback applied', 3000, () => (front.engine().rerouted === 1 ? true : undefined));
    assert.equal(front.engine().overrideVersion, version);
    assert.deepEqual(front.engine().queue.byCluster['baseline'], { userPresent: 3, background: 0 });
    const acked = await eventually('the rollback acknowledged', 3000, async () => {
      const ack = (await store.liveBalancers(5000)).find((b) => b.balancerId === front.balancerId)?.ack;
      return ack && ack.version >= version ? ack : undefined;
    });
    assert.equal(acked.version, version);
    // One slot: the three run one after the other, in the order they arrived, each on its first attempt.
    await fleet.addWorker({ cluster: 'baseline', workerId: 'base-1', maxParallelism: 1 });
    const results = await Promise.all([first, moved, last]);
    assert.deepEqual(finished, ['first', 'moved', 'last']);
    assert.deepEqual(
      results.map((r) => [r.placement.cluster, r.placement.workerId, r.placement.workerAttempts]),
      [
        ['baseline', 'base-1', 1],
        ['baseline', 'base-1', 1],
        ['baseline', 'base-1', 1],
      ],
    );
    // A task routed after the rollback goes to the baseline whatever the split says.
    const after = await front.submit(request({ integration: 'bank-b' }));
    assert.equal(after.placement.cluster, 'baseline');
    assert.equal((await long).placement.cluster, 'candidate', 'the running task finished on the candidate');
  });
}
