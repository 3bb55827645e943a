import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { eventually, json, mapLimit, startFleet, submit, task } from '@headroom/testkit';
import { OverrideStore, readBalancerErrors, readLatency } from '@headroom/fleet';
import type { HandlerMap } from '@headroom/worker';

test('a task runs on a worker and the answer says where and how', async (t) => {
  const fleet = await startFleet(t);
  const worker = await fleet.addWorker({ cluster: 'baseline', maxParallelism: 1 });
  await fleet.addBalancer();
  const result = await submit(fleet.clients[0]!, task({ integration: 'echo', payload: Buffer.from('hello') }));
  assert.ok(result.ok, JSON.stringify(result));
  assert.equal(result.response.result?.toString(), 'hello');
  assert.equal(result.response.placement?.cluster, 'baseline');
  assert.equal(result.response.placement?.workerId, worker.workerId);
  assert.equal(result.response.placement?.attempts, 1);
  assert.ok(result.response.placement!.queueWaitMs >= 0);
  assert.match(await worker.registry.metrics(), /^headroom_worker_task_duration_seconds_count\{cluster="baseline",integration="echo",outcome="ok"\} 1$/m);
  // The slot is back once the worker released it.
  await eventually('slot released', 2000, async () => ((await fleet.ledger.snapshot('baseline')).totalFree === 1 ? true : undefined));
});

test('a handler error comes back coded, with its placement', async (t) => {
  const fleet = await startFleet(t);
  await fleet.addWorker({ cluster: 'baseline' });
  await fleet.addBalancer();
  const result = await submit(fleet.clients[0]!, task({ payload: json({ fail: 'HR_ERR_UPSTREAM_DOWN' }) }));
  assert.ok(result.ok);
  assert.equal(result.response.error?.code, 'HR_ERR_UPSTREAM_DOWN');
  assert.equal(result.response.result, undefined);
});

test('static split sends a sticky share of keys to the candidate cluster', async (t) => {
  const fleet = await startFleet(t);
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 4 });
  await fleet.addWorker({ cluster: 'candidate', maxParallelism: 4 });
  await fleet.addBalancer({ candidatePercent: 0, candidatePercentByIntegration: { 'bank-b': 50 } });
  const keys = Array.from({ length: 60 }, (_, i) => `acct-${i}`);
  const first = await mapLimit(keys, 8, (key) => submit(fleet.clients[0]!, task({ key, integration: 'bank-b' })));
  const second = await mapLimit(keys, 8, (key) => submit(fleet.clients[0]!, task({ key, integration: 'bank-b' })));
  const clusterOf = (r: (typeof first)[number]) => (r.ok ? r.response.placement?.cluster : 'error');
  const candidates = first.filter((r) => clusterOf(r) === 'candidate').length;
  assert.ok(candidates > 15 && candidates < 45, `${candidates} of 60 went to the candidate`);
  assert.deepEqual(second.map(clusterOf), first.map(clusterOf), 'the same key goes to the same cluster');
  const bankA = await submit(fleet.clients[0]!, task({ integration: 'bank-a' }));
  assert.ok(bankA.ok && bankA.response.placement?.cluster === 'baseline');
});

test('no over-admission: 3 balancers, 10 workers, concurrent load', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  const capacities = [1, 1, 2, 2, 3, 3, 4, 4, 5, 5];
  for (const maxParallelism of capacities) await fleet.addWorker({ cluster: 'baseline', maxParallelism });
  for (let i = 0; i < 3; i++) await fleet.addBalancer();
  // Three integrations: each may hold half the slots (the default limit), together all of them.
  const integrations = ['bank-a', 'bank-b', 'bank-c'];
  const tasks = Array.from({ length: 600 }, (_, i) =>
    task({ integration: integrations[i % 3]!, priority: i % 5 ? 'BACKGROUND' : 'USER_PRESENT', payload: json({ sleepMs: 5 + (i % 7) * 3 }) }),
  );
  // 90 in flight at once against 30 slots: tasks queue, slots are contended by all balancers.
  const results = await mapLimit(tasks, 90, (tk, i) => submit(fleet.clients[i % 3]!, tk));
  const failures = results.filter((r) => !r.ok);
  assert.equal(failures.length, 0, JSON.stringify(failures.slice(0, 3)));
  for (const [i, worker] of fleet.workers.entries()) {
    const stats = worker.stats();
    assert.ok(stats.highWaterMark <= capacities[i]!, `${stats.workerId} ran ${stats.highWaterMark} at once, max ${capacities[i]}`);
    assert.ok(stats.completed > 0, `${stats.workerId} got no task`);
  }
  // Every slot comes back.
  await eventually('all slots free', 3000, async () => ((await fleet.ledger.snapshot('baseline')).totalFree === 30 ? true : undefined));
  const totalRefusals = fleet.workers.reduce((sum, w) => sum + w.stats().refusals, 0);
  assert.equal(totalRefusals, 0, 'the ledger never sent a task to a full worker');
});

test('a full worker refuses and the task goes to another worker', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  // 'a' heartbeats rarely, so the wrong capacity we give it below stays in the ledger.
  const a = await fleet.addWorker({ cluster: 'baseline', workerId: 'a', maxParallelism: 1, heartbeatIntervalMs: 60_000 });
  const b = await fleet.addWorker({ cluster: 'baseline', workerId: 'b', maxParallelism: 1 });
  await fleet.addBalancer({ heartbeatTimeoutMs: 120_000 });
  const blockers = [submit(fleet.clients[0]!, task({ payload: json({ sleepMs: 300 }) })), submit(fleet.clients[0]!, task({ payload: json({ sleepMs: 300 }) }))];
  await eventually('both busy', 2000, () => (a.stats().inflight === 1 && b.stats().inflight === 1 ? true : undefined));
  // The ledger now believes 'a' has 2 free slots; 'a' itself has none.
  await fleet.ledger.heartbeat('baseline', { workerId: 'a', address: a.address, capacity: 3, draining: false, heldLeaseIds: [] });
  const result = await submit(fleet.clients[0]!, task());
  assert.ok(result.ok, JSON.stringify(result));
  assert.equal(result.response.placement?.workerId, 'b', 'after the refusal the task waits for and goes to another worker');
  assert.equal(result.response.placement?.attempts, 2);
  assert.equal(a.stats().refusals, 1);
  assert.equal(a.stats().highWaterMark, 1);
  assert.match(await a.registry.metrics(), /^headroom_worker_refusals_total\{reason="full"\} 1$/m);
  assert.match(await a.registry.metrics(), /^headroom_worker_tasks_in_flight_high_water 1$/m);
  assert.match(await fleet.balancers[0]!.registry.metrics(), /^headroom_balancer_dispatch_retries_total\{reason="refused"\} 1$/m);
  assert.ok((await Promise.all(blockers)).every((r) => r.ok));
});

test('user-present tasks go first; background waits and is shed first when the queue is full', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 1 });
  await fleet.addBalancer({ maxQueuedTasks: 3 });
  const client = fleet.clients[0]!;
  const order: string[] = [];
  const run = (id: string, priority: 'USER_PRESENT' | 'BACKGROUND', sleepMs = 50) =>
    submit(client, task({ id, priority, payload: json({ sleepMs }) })).then((r) => {
      order.push(id);
      return r;
    });
  const blocker = run('blocker', 'USER_PRESENT', 300);
  await eventually('blocker runs', 2000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
  const bg1 = run('bg1', 'BACKGROUND');
  const bg2 = run('bg2', 'BACKGROUND');
  await eventually('two queued', 2000, () => (fleet.balancers[0]!.stats().queue.queued === 2 ? true : undefined));
  const up1 = run('up1', 'USER_PRESENT');
  await eventually('three queued', 2000, () => (fleet.balancers[0]!.stats().queue.queued === 3 ? true : undefined));
  // Full: a user-present task sheds the newest background one...
  const up2 = run('up2', 'USER_PRESENT');
  const shed = await bg2;
  assert.ok(!shed.ok && shed.code === 'HR_ERR_SHED' && shed.status === grpc.status.RESOURCE_EXHAUSTED, JSON.stringify(shed));
  assert.equal(shed.retryAfterMs, '1000');
  // ...and a background task is refused with a retry hint.
  const refused = await run('bg3', 'BACKGROUND');
  assert.ok(!refused.ok && refused.code === 'HR_ERR_QUEUE_FULL' && refused.status === grpc.status.RESOURCE_EXHAUSTED);
  assert.ok(refused.retryAfterMs);
  const results = await Promise.all([blocker, bg1, up1, up2]);
  assert.ok(
    results.every((r) => r.ok),
    JSON.stringify(results),
  );
  assert.deepEqual(
    order.filter((id) => ['blocker', 'up1', 'up2', 'bg1'].includes(id)),
    ['blocker', 'up1', 'up2', 'bg1'],
  );
  // Each limit shows in a metric.
  const text = await fleet.balancers[0]!.registry.metrics();
  assert.match(text, /^headroom_balancer_shed_total 1$/m);
  assert.match(text, /^headroom_balancer_queue_full_total 1$/m);
  assert.match(text, /^headroom_balancer_queue_limit 3$/m);
  assert.match(text, /^headroom_balancer_tasks_total\{cluster="baseline",integration="bank-a",priority="user_present",outcome="ok"\} 3$/m);
  assert.match(text, /^headroom_balancer_tasks_total\{cluster="baseline",integration="bank-a",priority="background",outcome="HR_ERR_SHED"\} 1$/m);
  assert.match(text, /^headroom_balancer_queue_depth\{cluster="baseline",priority="background"\} 0$/m);
  // The ledger's batches: calls, the leases they carried, and the bound on those waiting.
  const counter = (pattern: RegExp) => Number(pattern.exec(text)?.[1] ?? Number.NaN);
  const calls = counter(/^headroom_balancer_ledger_calls_total (\d+)$/m);
  const reservations = counter(/^headroom_balancer_ledger_leases_total\{kind="reservation"\} (\d+)$/m);
  const releases = counter(/^headroom_balancer_ledger_leases_total\{kind="release"\} (\d+)$/m);
  assert.ok(
    calls >= 1 && reservations >= 4 && releases >= 4 && calls <= reservations + releases,
    `${calls} calls for ${reservations} reservations and ${releases} releases`,
  );
  assert.match(text, /^headroom_balancer_ledger_leases_waiting_limit 10000$/m);
  assert.match(text, /^headroom_balancer_ledger_leases_refused_total 0$/m);
});

test('no capacity before the deadline: DEADLINE_EXCEEDED, and the queue entry is gone', async (t) => {
  const fleet = await startFleet(t);
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 1 });
  await fleet.addBalancer();
  const blocker = submit(fleet.clients[0]!, task({ payload: json({ sleepMs: 600 }) }));
  await eventually('blocker runs', 2000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
  const late = await submit(fleet.clients[0]!, task({ deadlineUnixMs: Date.now() + 200 }));
  assert.ok(!late.ok && late.status === grpc.status.DEADLINE_EXCEEDED && late.code === 'HR_ERR_DEADLINE_EXCEEDED', JSON.stringify(late));
  assert.equal(fleet.balancers[0]!.stats().queue.queued, 0);
  assert.ok((await blocker).ok);
});

test('no workers at all: the task waits, then a worker that joins serves it', async (t) => {
  const fleet = await startFleet(t);
  await fleet.addBalancer();
  const pending = submit(fleet.clients[0]!, task({ deadlineUnixMs: Date.now() + 5000 }));
  await eventually('queued', 2000, () => (fleet.balancers[0]!.stats().queue.queued === 1 ? true : undefined));
  await fleet.addWorker({ cluster: 'baseline' });
  const result = await pending;
  assert.ok(result.ok, JSON.stringify(result));
  assert.ok(result.response.placement!.queueWaitMs > 0);
});

test('raising max parallelism at run time frees slots at once; lowering lets running tasks finish', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  const worker = await fleet.addWorker({ cluster: 'candidate', maxParallelism: 1 });
  await fleet.addBalancer({ candidatePercent: 100 });
  const running = [submit(fleet.clients[0]!, task({ payload: json({ sleepMs: 500 }) })), submit(fleet.clients[0]!, task({ payload: json({ sleepMs: 500 }) }))];
  await eventually('one runs, one waits', 2000, () => (worker.stats().inflight === 1 && fleet.balancers[0]!.stats().queue.queued === 1 ? true : undefined));
  // The library call (the max-parallelism flag goes through the same path: control-plane tests).
  await worker.setMaxParallelism(3);
  await eventually('second task starts before the first ends', 1500, () => (worker.stats().inflight === 2 ? true : undefined));
  assert.equal(worker.stats().maxParallelism, 3);
  await worker.setMaxParallelism(1);
  assert.equal(worker.stats().maxParallelism, 1);
  assert.equal(worker.stats().inflight, 2, 'running tasks are not stopped');
  const results = await Promise.all(running);
  assert.ok(results.every((r) => r.ok));
  await eventually('ledger capacity follows', 2000, async () => ((await fleet.ledger.snapshot('candidate')).totalCapacity === 1 ? true : undefined));
});

test('draining a worker: it takes nothing new, finishes what runs, leaves the ledger', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  const a = await fleet.addWorker({ cluster: 'baseline', workerId: 'a', maxParallelism: 2 });
  await fleet.addWorker({ cluster: 'baseline', workerId: 'b', maxParallelism: 2 });
  await fleet.addBalancer({ policy: 'least-loaded' });
  const long = submit(fleet.clients[0]!, task({ payload: json({ sleepMs: 400 }) }));
  await eventually('a task runs', 2000, () => (a.stats().inflight + fleet.workers[1]!.stats().inflight === 1 ? true : undefined));
  const runningOnA = a.stats().inflight === 1;
  const closing = a.close();
  const during = await mapLimit(Array.from({ length: 6 }), 2, () => submit(fleet.clients[0]!, task({ payload: json({ sleepMs: 10 }) })));
  assert.ok(
    during.every((r) => r.ok && r.response.placement?.workerId === 'b'),
    JSON.stringify(during),
  );
  assert.ok((await long).ok);
  await closing;
  if (runningOnA) assert.equal(a.stats().completed, 1, 'the running task finished');
  const snap = await fleet.ledger.snapshot('baseline');
  assert.deepEqual(
    snap.workers.map((w) => w.workerId),
    ['b'],
  );
});

for (const policy of ['round-robin', 'random', 'power-of-two'] as const) {
  test(`policy ${policy}: chooses locally, admits through the ledger, never over-admits`, async (t) => {
    const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
    const capacities = [1, 2, 3, 4];
    for (const maxParallelism of capacities) await fleet.addWorker({ cluster: 'baseline', maxParallelism });
    for (let i = 0; i < 3; i++) await fleet.addBalancer({ policy });
    assert.equal(fleet.balancers[0]!.stats().policy, policy);
    const tasks = Array.from({ length: 200 }, () => task({ payload: json({ sleepMs: 5 }) }));
    const results = await mapLimit(tasks, 30, (tk, i) => submit(fleet.clients[i % 3]!, tk));
    assert.equal(results.filter((r) => !r.ok).length, 0);
    for (const [i, worker] of fleet.workers.entries()) {
      assert.ok(worker.stats().highWaterMark <= capacities[i]!);
      assert.ok(worker.stats().completed > 0, `${worker.workerId} got nothing`);
    }
  });
}

test('a worker lost mid-task: an idempotent task is retried elsewhere, another gets HR_ERR_WORKER_LOST', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  // 'a' has more slots, so the ledger sends the first tasks there. Its handler ignores the
  // abort signal, so destroy() cuts the connection mid-task as a crash would.
  const a = await fleet.addWorker(
    { cluster: 'baseline', workerId: 'a', maxParallelism: 4 },
    { '*': () => new Promise((resolve) => setTimeout(() => resolve('late'), 1000)) },
  );
  await fleet.addWorker({ cluster: 'baseline', workerId: 'b', maxParallelism: 1 });
  await fleet.addBalancer();
  const idempotent = submit(fleet.clients[0]!, task({ idempotent: true, payload: json({ sleepMs: 1000 }) }));
  const plain = submit(fleet.clients[0]!, task({ idempotent: false, payload: json({ sleepMs: 1000 }) }));
  await eventually('both run on a', 2000, () => (a.stats().inflight === 2 ? true : undefined));
  await a.destroy();
  const [retried, lost] = await Promise.all([idempotent, plain]);
  assert.ok(retried.ok, JSON.stringify(retried));
  assert.equal(retried.response.placement?.workerId, 'b', JSON.stringify(retried));
  assert.equal(retried.response.placement?.attempts, 2);
  assert.ok(!lost.ok && lost.code === 'HR_ERR_WORKER_LOST' && lost.status === grpc.status.UNAVAILABLE, JSON.stringify(lost));
  assert.match(lost.details, /worker a was lost after the task started/);
  // The balancer closes its channel to the worker that left.
  await eventually('channel to a closed', 5000, () => (fleet.balancers[0]!.stats().workerChannels === 1 ? true : undefined));
});

test('a task whose deadline passes in the queue, or that a full queue refuses, is an error of its cluster and integration: in the metrics, and in Redis for the control plane', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 1 });
  const balancer = await fleet.addBalancer({ maxQueuedTasks: 1, balancerHeartbeatIntervalMs: 100 });
  const client = fleet.clients[0]!;
  // The only slot is held; a handler's own failure is the worker's to count (an answer, "ok" here).
  const blocker = submit(client, task({ integration: 'bank-a', payload: json({ sleepMs: 800, fail: 'HR_ERR_UPSTREAM_DOWN' }) }));
  await eventually('the blocker runs', 2000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
  const expiring = submit(client, task({ integration: 'bank-slow', priority: 'BACKGROUND', deadlineUnixMs: Date.now() + 300 }));
  await eventually('one queued', 2000, () => (balancer.stats().queue.queued === 1 ? true : undefined));
  const refused = await submit(client, task({ integration: 'bank-full', priority: 'BACKGROUND' }));
  assert.ok(!refused.ok && refused.code === 'HR_ERR_QUEUE_FULL', JSON.stringify(refused));
  const expired = await expiring;
  assert.ok(!expired.ok && expired.code === 'HR_ERR_DEADLINE_EXCEEDED' && expired.status === grpc.status.DEADLINE_EXCEEDED, JSON.stringify(expired));
  const answered = await blocker;
  assert.ok(answered.ok && answered.response.error?.code === 'HR_ERR_UPSTREAM_DOWN', JSON.stringify(answered));

  const text = await balancer.registry.metrics();
  assert.match(
    text,
    /^headroom_balancer_tasks_total\{cluster="baseline",integration="bank-slow",priority="background",outcome="HR_ERR_DEADLINE_EXCEEDED"\} 1$/m,
  );
  assert.match(text, /^headroom_balancer_tasks_total\{cluster="baseline",integration="bank-full",priority="background",outcome="HR_ERR_QUEUE_FULL"\} 1$/m);
  assert.match(text, /^headroom_balancer_tasks_total\{cluster="baseline",integration="bank-a",priority="user_present",outcome="ok"\} 1$/m);
  // No worker ran them, so no worker counted them: the balancer counts them where the control plane reads errors.
  const keyPrefix = fleet.ledgerOptions.keyPrefix!;
  const counts = await eventually('the errors reached Redis', 3000, async () => {
    const read = (await readBalancerErrors(fleet.redis, keyPrefix, 60_000)).counts;
    return read.length === 2 ? read : undefined;
  });
  assert.deepEqual(counts.map((c) => `${c.cluster} ${c.integration} ${c.code} ${c.count}`).sort(), [
    'baseline bank-full HR_ERR_QUEUE_FULL 1',
    'baseline bank-slow HR_ERR_DEADLINE_EXCEEDED 1',
  ]);
  const failed = (await readLatency(fleet.redis, keyPrefix, 60_000)).get('baseline')!;
  assert.deepEqual([failed.get('bank-slow')?.failed, failed.get('bank-full')?.failed], [1, 1], 'and the latency summaries count them as failed tasks');
});

test('a client that cancels: the task stops on its worker, is not retried, and its slot comes back', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
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
  await fleet.addBalancer();
  const call = fleet.clients[0]!.submit({ task: task({ idempotent: true }) }, () => undefined);
  await eventually('the task runs on a', 2000, () => (a.stats().inflight === 1 ? true : undefined));
  call.cancel();
  await eventually('the handler saw the abort', 2000, () => (aborted === 1 ? true : undefined));
  await eventually('the slot is free again', 2000, async () => ((await fleet.ledger.snapshot('baseline')).totalFree === 3 ? true : undefined));
  assert.equal(b.stats().completed + b.stats().failed + b.stats().inflight, 0, 'a cancelled task is not retried elsewhere');
  await eventually('counted as cancelled', 2000, async () =>
    /^headroom_balancer_tasks_total\{cluster="baseline",integration="bank-a",priority="user_present",outcome="HR_ERR_CANCELLED"\} 1$/m.test(
      await fleet.balancers[0]!.registry.metrics(),
    )
      ? true
      : undefined,
  );
});

test('a task no worker has a handler for is refused at once, as not run (HR_ERR_NO_HANDLER), and gives its slot back at once', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 2 }, { 'bank-a': async () => 'ok' });
  await fleet.addBalancer();
  const result = await submit(fleet.clients[0]!, task({ integration: 'bank-z' }));
  assert.ok(!result.ok && result.code === 'HR_ERR_NO_HANDLER' && result.status === grpc.status.UNIMPLEMENTED, JSON.stringify(result));
  // The release goes out with the balancer's next batched call to Redis, after the answer: within
  // milliseconds, long before a heartbeat (200 ms here) could have settled the count instead.
  const snap = await eventually('the slot back in the ledger', 150, async () => {
    const read = await fleet.ledger.snapshot('baseline');
    return read.leases === 0 && read.totalFree === 2 ? read : undefined;
  });
  assert.deepEqual([snap.leases, snap.totalFree], [0, 2]);
});

test('timing settings that cannot work together are refused, naming both', async (t) => {
  const fleet = await startFleet(t);
  await assert.rejects(
    fleet.addBalancer({ queueRecheckIntervalMs: 2000 }),
    /queueRecheckIntervalMs \(2000\) must be at most half of the ledger's waiterTtlMs \(3000\)/,
  );
});

test('the queue is bounded in bytes too; closing the balancer clears its waiting entries', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 1 });
  const balancer = await fleet.addBalancer({ maxQueuedBytes: 1000, maxPayloadBytes: 1000 });
  const client = fleet.clients[0]!;
  const blocker = submit(client, task({ payload: json({ sleepMs: 400 }) }));
  await eventually('blocker runs', 2000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
  const padded = (sleepMs: number) => Buffer.concat([json({ sleepMs }), Buffer.alloc(600 - json({ sleepMs }).length, 32)]);
  const queuedBackground = submit(client, task({ priority: 'BACKGROUND', payload: padded(1) }));
  await eventually('queued', 2000, () => (balancer.stats().queue.queuedBytes === 600 ? true : undefined));
  const refused = await submit(client, task({ priority: 'BACKGROUND', payload: padded(1) }));
  assert.ok(!refused.ok && refused.code === 'HR_ERR_QUEUE_FULL', JSON.stringify(refused));
  assert.match(refused.details, /would pass maxQueuedBytes \(1000\)/);
  // A user-present task makes room by shedding the background one.
  const user = submit(client, task({ priority: 'USER_PRESENT', payload: padded(1) }));
  const shed = await queuedBackground;
  assert.ok(!shed.ok && shed.code === 'HR_ERR_SHED');
  assert.match(await balancer.registry.metrics(), /^headroom_balancer_queue_bytes 600$/m);
  await eventually('user-present waits', 2000, async () =>
    (await fleet.ledger.snapshot('baseline')).waitingUserPresentBalancers.length === 1 ? true : undefined,
  );
  // Closing answers the waiting task and leaves no waiting entry behind to hold back other balancers.
  const closing = balancer.close();
  const answered = await user;
  assert.ok(!answered.ok && answered.code === 'HR_ERR_SHUTTING_DOWN', JSON.stringify(answered));
  await closing;
  const snap = await fleet.ledger.snapshot('baseline');
  assert.deepEqual([snap.waitingBalancers, snap.waitingUserPresentBalancers], [[], []]);
  assert.ok((await blocker).ok);
});

test('a worker started without a handler for an integration refuses its tasks, which run on the worker that has one', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  // The handler-less worker has more free slots, so least-loaded offers it most tasks first.
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 8, workerId: 'no-acme' }, { other: async () => 'ok' });
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 2, workerId: 'has-acme' }, { acme: async () => 'ran' });
  await fleet.addBalancer();
  const results = await mapLimit(
    Array.from({ length: 40 }, (_, i) => i),
    4,
    () => submit(fleet.clients[0]!, task({ integration: 'acme' })),
  );
  const placed = results.map((r) => (r.ok && !r.response.error ? r.response.placement?.workerId : JSON.stringify(r)));
  assert.deepEqual([...new Set(placed)], ['has-acme'], 'every task ran, and on the worker with the handler');
});

test("a slow integration at its limit does not hold up another integration's tasks queued behind it on one balancer", async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 3 });
  await fleet.addBalancer();
  await fleet.ledger.setIntegrationLimit('baseline', 'slow', { maxInFlight: 1 });
  let slowDone = 0;
  // More queued than one round trip of reservations asks for (16).
  const slow = Array.from({ length: 20 }, () =>
    submit(fleet.clients[0]!, task({ integration: 'slow', payload: json({ sleepMs: 1500 }) })).then((r) => (slowDone++, r)),
  );
  await eventually('the slow integration at its limit, 19 of its tasks queued', 3000, async () => {
    const [state] = await fleet.ledger.integrationLimits('baseline');
    return state?.inflight === 1 && fleet.balancers[0]!.stats().queue.queued === 19 ? true : undefined;
  });
  // Its heartbeat tells the control plane how many wait for slow's limit (one slow task ends every 1.5 s).
  const balancers = new OverrideStore(fleet.redis, fleet.ledgerOptions.keyPrefix!);
  const reported = await eventually('the heartbeat to report the slow tasks waiting at their limit', 5000, async () =>
    (await balancers.liveBalancers(10_000)).flatMap((b) => b.waitingAtLimit ?? []).find((w) => w.integration === 'slow'),
  );
  assert.equal(reported.cluster, 'baseline');
  assert.ok(reported.waiting >= 16 && reported.waiting <= 19, `${reported.waiting} waiting`);
  // Tasks of another integration arrive behind the queued slow ones, more than the free slots at once.
  const slowDoneBeforeFast = slowDone;
  const fast = await mapLimit(
    Array.from({ length: 12 }, () => task({ integration: 'fast', payload: json({ sleepMs: 5 }) })),
    6,
    (tk) => submit(fleet.clients[0]!, tk),
  );
  assert.ok(
    fast.every((r) => r.ok),
    JSON.stringify(fast.find((r) => !r.ok)),
  );
  // Behind the slow ones they would wait for 19 of them (one ends every 1.5 s); on a loaded machine one or two may end while they run.
  assert.ok(
    slowDone - slowDoneBeforeFast <= 2,
    `every fast task finished within two slow tasks' time: ${slowDone - slowDoneBeforeFast} slow ones ended meanwhile`,
  );
  // The slow ones left get HR_ERR_SHUTTING_DOWN when the fleet closes; none may be lost.
  t.after(async () => assert.equal((await Promise.all(slow)).length, 20));
  assert.match(await fleet.balancers[0]!.registry.metrics(), /^headroom_ledger_integration_limit\{cluster="baseline",integration="slow"\} 1$/m);
});
