import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { service as healthService } from 'grpc-health-check';
import { deleteKeysUnder, testRedisUrl, uniquePrefix } from '@headroom/testkit';
import { Ledger, connectRedis } from '@headroom/fleet';
import { WorkerService, type ExecuteRequest, type ExecuteResponse__Output, type WorkerClient } from '@headroom/proto';
import { cancelCountsAsDeadlineWithinMs, createWorker, type HandlerMap, type WorkerOptions } from '../src/index';

async function start(t: import('node:test').TestContext, options: Partial<WorkerOptions>, handlers: HandlerMap) {
  const redis = connectRedis(testRedisUrl);
  await new Promise((resolve) => redis.once('ready', resolve));
  const keyPrefix = uniquePrefix('worker');
  const worker = await createWorker({ cluster: 'c', workerId: 'w', ...options }, { redis, handlers, ledger: { keyPrefix } });
  const client = new WorkerService(worker.address, grpc.credentials.createInsecure()) as WorkerClient;
  t.after(async () => {
    client.close();
    await worker.destroy();
    await deleteKeysUnder(redis, keyPrefix);
    redis.disconnect();
  });
  return { worker, client, ledger: new Ledger(redis, { keyPrefix }) };
}

interface CallResult {
  error: grpc.ServiceError | null;
  response: ExecuteResponse__Output | undefined;
  started: boolean;
}

function execute(client: WorkerClient, request: ExecuteRequest): Promise<CallResult> {
  return new Promise((resolve) => {
    let started = false;
    const call = client.execute(request, (error, response) => resolve({ error, response, started }));
    call.on('metadata', (metadata: grpc.Metadata) => (started = metadata.get('headroom-started')[0] === '1'));
  });
}

const baseTask = { id: 't', key: 'k', integration: 'bank-a', priority: 'USER_PRESENT' as const, payload: Buffer.alloc(0) };
const soon = () => Date.now() + 5000;

test('the gate refuses a task when all slots are busy, before it starts', async (t) => {
  let unblock!: () => void;
  const blocked = new Promise<void>((resolve) => (unblock = resolve));
  const { worker, client } = await start(t, { maxParallelism: 1 }, { 'bank-a': async () => blocked.then(() => 'done') });
  const first = execute(client, { task: { ...baseTask, deadlineUnixMs: soon() }, leaseId: 'l1', cluster: 'c', workerId: 'w' });
  while (worker.stats().inflight < 1) await new Promise((resolve) => setTimeout(resolve, 5));
  const refused = await execute(client, { task: { ...baseTask, deadlineUnixMs: soon() }, leaseId: 'l2', cluster: 'c', workerId: 'w' });
  assert.equal(refused.error?.code, grpc.status.RESOURCE_EXHAUSTED);
  assert.equal(refused.error?.metadata.get('headroom-error-code')[0], 'HR_ERR_WORKER_FULL');
  assert.equal(refused.started, false, 'a refused task is not marked started');
  unblock();
  const done = await first;
  assert.equal(done.started, true);
  assert.equal(done.response?.result?.toString(), 'done');
  assert.deepEqual([worker.stats().highWaterMark, worker.stats().refusals, worker.stats().completed], [1, 1, 1]);
});

test('the handler gets an AbortSignal that fires at the deadline', async (t) => {
  let sawAbort = false;
  const { client } = await start(
    t,
    {},
    {
      'bank-a': (_task, signal) =>
        new Promise((_resolve, reject) => {
          signal.addEventListener('abort', () => {
            sawAbort = true;
            reject(new Error('aborted'));
          });
        }),
    },
  );
  const result = await execute(client, { task: { ...baseTask, deadlineUnixMs: Date.now() + 150 }, leaseId: 'l1', cluster: 'c', workerId: 'w' });
  assert.equal(sawAbort, true);
  assert.equal(result.response?.error?.code, 'HR_ERR_DEADLINE_EXCEEDED');
});

test("a task answered at or after its deadline: the worker releases its lease itself, as the balancer's call ended and gets no answer to release it by", async (t) => {
  const { ledger, client } = await start(
    t,
    { maxParallelism: 2, workerId: 'w-deadline' },
    {
      // Ignores its signal and answers late, as a handler stuck in a slow call does.
      'bank-a': async () => new Promise((resolve) => setTimeout(() => resolve('late'), 300)),
    },
  );
  const lease = await ledger.reserve('c', { priority: 'user', balancerId: 'b', waitIfNone: false, targetWorkerId: 'w-deadline' });
  assert.ok(lease.ok);
  assert.equal((await ledger.snapshot('c')).leases, 1);
  const result = await execute(client, {
    task: { ...baseTask, deadlineUnixMs: Date.now() + 150 },
    leaseId: lease.leaseId,
    cluster: 'c',
    workerId: 'w-deadline',
  });
  assert.equal(result.response?.result?.toString(), 'late', 'its answer came after the deadline');
  // Released before the answer was sent: a balancer's release would now find nothing to free.
  assert.equal((await ledger.snapshot('c')).leases, 0);
  assert.equal(await ledger.release('c', lease.leaseId), false);
});

test('a task answered well before its deadline leaves its release to the balancer that gets the answer', async (t) => {
  const { ledger, client } = await start(t, { maxParallelism: 2, workerId: 'w-early' }, { 'bank-a': async () => 'ok' });
  const lease = await ledger.reserve('c', { priority: 'user', balancerId: 'b', waitIfNone: false, targetWorkerId: 'w-early' });
  assert.ok(lease.ok);
  const result = await execute(client, { task: { ...baseTask, deadlineUnixMs: soon() }, leaseId: lease.leaseId, cluster: 'c', workerId: 'w-early' });
  assert.equal(result.response?.result?.toString(), 'ok');
  assert.equal(
    await ledger.release('c', lease.leaseId),
    true,
    "the balancer's release frees the slot: the worker did not release it too (one Redis call a task, batched)",
  );
});

test("a cancel at the deadline (the caller's timer a moment before ours) is the deadline; one well before it is a cancel", async (t) => {
  const reasons: string[] = [];
  const { client } = await start(
    t,
    {},
    {
      'bank-a': (_task, signal) =>
        new Promise((_resolve, reject) => {
          signal.addEventListener('abort', () => {
            reasons.push((signal.reason as { code?: string }).code ?? String(signal.reason));
            reject(signal.reason);
          });
        }),
    },
  );
  // The caller ends each call itself, as a balancer whose deadline timer fires before the worker's does.
  const cancelledAt = async (deadlineUnixMs: number, cancelAtUnixMs: number) => {
    const call = client.execute({ task: { ...baseTask, deadlineUnixMs }, leaseId: `l-${cancelAtUnixMs}`, cluster: 'c', workerId: 'w' }, () => {});
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, cancelAtUnixMs - Date.now())));
    call.cancel();
    while (reasons.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    return reasons.splice(0);
  };
  const deadline = Date.now() + 400;
  assert.deepEqual(await cancelledAt(deadline, deadline - cancelCountsAsDeadlineWithinMs / 2), ['HR_ERR_DEADLINE_EXCEEDED']);
  const later = Date.now() + 5000;
  assert.deepEqual(await cancelledAt(later, Date.now() + 100), ['HR_ERR_CANCELLED']);
});

test('requests for another cluster or without a lease are refused; so are integrations it has no handler for (not run, so the balancer tries another worker)', async (t) => {
  const { client, worker } = await start(t, {}, { 'bank-a': async () => 'ok' });
  const wrongCluster = await execute(client, { task: { ...baseTask, deadlineUnixMs: soon() }, leaseId: 'l', cluster: 'other', workerId: 'w' });
  assert.equal(wrongCluster.error?.code, grpc.status.INVALID_ARGUMENT);
  assert.match(wrongCluster.error!.details, /cluster is "other", this worker serves "c"/);
  const otherWorker = await execute(client, { task: { ...baseTask, deadlineUnixMs: soon() }, leaseId: 'l', cluster: 'c', workerId: 'someone-else' });
  assert.equal(otherWorker.error?.code, grpc.status.INVALID_ARGUMENT);
  assert.match(otherWorker.error!.details, /workerId is "someone-else", this worker is "w"/);
  const noLease = await execute(client, { task: { ...baseTask, deadlineUnixMs: soon() }, leaseId: '', cluster: 'c', workerId: 'w' });
  assert.equal(noLease.error?.code, grpc.status.INVALID_ARGUMENT);
  const unknown = await execute(client, { task: { ...baseTask, integration: 'bank-z', deadlineUnixMs: soon() }, leaseId: 'l', cluster: 'c', workerId: 'w' });
  assert.equal(unknown.error?.code, grpc.status.UNIMPLEMENTED, 'a refusal, not an answer');
  assert.equal(unknown.error?.metadata.get('headroom-error-code')[0], 'HR_ERR_NO_HANDLER');
  assert.match(unknown.error!.details, /no handler for integration "bank-z" \(it serves "bank-a"\)/);
  assert.equal(unknown.started, false, 'it never said the task started');
  assert.equal(worker.stats().completed + worker.stats().failed, 0);
});

test('the worker is in the ledger, serves gRPC health, and leaves the ledger when closed', async (t) => {
  const { worker, ledger } = await start(t, { maxParallelism: 4, workerId: 'w-health' }, { 'bank-a': async () => 'ok' });
  const snap = await ledger.snapshot('c');
  assert.deepEqual(
    snap.workers.map((w) => [w.workerId, w.address, w.capacity, w.freeSlots]),
    [['w-health', worker.address, 4, 4]],
  );
  const HealthClient = grpc.makeGenericClientConstructor(healthService, 'Health');
  const health = new HealthClient(worker.address, grpc.credentials.createInsecure());
  t.after(() => health.close());
  const check = (health as unknown as Record<string, (req: object, cb: (e: grpc.ServiceError | null, r: { status: unknown }) => void) => void>).check!;
  const status = await new Promise<unknown>((resolve, reject) =>
    check.call(health, { service: 'headroom.v1.Worker' }, (error, reply) => (error ? reject(error) : resolve(reply.status))),
  );
  assert.equal(status, 'SERVING');
  await worker.close();
  assert.equal((await ledger.snapshot('c')).workers.length, 0);
  await worker.stopped;
});

test('invalid worker options are refused naming the setting', async () => {
  const redis = connectRedis(testRedisUrl);
  try {
    await assert.rejects(
      createWorker({ cluster: 'Bad Name', maxParallelism: 0 }, { redis, handlers: { echo: async () => 'ok' } }),
      /cluster: got "Bad Name".*\n.*maxParallelism: got 0, expected a number >= 1/s,
    );
    await assert.rejects(
      createWorker({ cluster: 'c', overflow: 'spill' as 'queue', maxQueuedTasks: 0 }, { redis, handlers: { echo: async () => 'ok' } }),
      /overflow: got "spill", expected refuse or queue.*\n.*maxQueuedTasks: got 0, expected a number >= 1/s,
    );
  } finally {
    redis.disconnect();
  }
});

test('a drain that times out aborts what still runs instead of hanging', async (t) => {
  let aborted = false;
  const { worker, client } = await start(
    t,
    { drainTimeoutMs: 200 },
    {
      'bank-a': (_task, signal) => {
        signal.addEventListener('abort', () => (aborted = true));
        // Ignores its signal: finishes only after 5 s.
        return new Promise((resolve) => setTimeout(() => resolve('late'), 5000).unref());
      },
    },
  );
  const running = execute(client, { task: { ...baseTask, deadlineUnixMs: Date.now() + 10_000 }, leaseId: 'l1', cluster: 'c', workerId: 'w' });
  while (worker.stats().inflight < 1) await new Promise((resolve) => setTimeout(resolve, 5));
  const startedAt = Date.now();
  await worker.close();
  assert.ok(Date.now() - startedAt < 2000, `close took ${Date.now() - startedAt} ms`);
  assert.equal(aborted, true);
  const result = await running;
  assert.ok(result.error, 'the connection was closed under the running call');
});

test('overflow "queue": a task that finds every slot busy waits its turn (first come first served), up to maxQueuedTasks; past that HR_ERR_WORKER_QUEUE_FULL', async (t) => {
  const finish: Array<() => void> = [];
  const order: string[] = [];
  const { worker, client } = await start(
    t,
    { maxParallelism: 1, overflow: 'queue', maxQueuedTasks: 2 },
    {
      'bank-a': (task) =>
        new Promise((resolve) => {
          order.push(task.id);
          finish.push(() => resolve(`done ${task.id}`));
        }),
    },
  );
  const send = (id: string) => execute(client, { task: { ...baseTask, id, deadlineUnixMs: soon() }, leaseId: `l-${id}`, cluster: 'c', workerId: 'w' });
  const first = send('t1');
  while (worker.stats().inflight < 1) await new Promise((resolve) => setTimeout(resolve, 5));
  const waiting = [send('t2'), send('t3')];
  while (worker.stats().queued < 2) await new Promise((resolve) => setTimeout(resolve, 5));
  const refused = await send('t4');
  assert.equal(refused.error?.code, grpc.status.RESOURCE_EXHAUSTED);
  assert.equal(refused.error?.metadata.get('headroom-error-code')[0], 'HR_ERR_WORKER_QUEUE_FULL');
  assert.match(refused.error!.details, /has 2 waiting, its limit \(maxQueuedTasks\)/);
  assert.equal(refused.started, false);
  await new Promise((resolve) => setTimeout(resolve, 60));
  for (let i = 0; i < 3; i++) {
    while (finish.length === 0) await new Promise((resolve) => setTimeout(resolve, 5));
    finish.shift()!();
  }
  const [done1, done2, done3] = [await first, ...(await Promise.all(waiting))];
  assert.deepEqual(order, ['t1', 't2', 't3'], 'in the order they came');
  assert.deepEqual(
    [done1, done2, done3].map((d) => [d.started, d.response?.result?.toString()]),
    [
      [true, 'done t1'],
      [true, 'done t2'],
      [true, 'done t3'],
    ],
  );
  assert.equal(done1.response?.queueWaitMs, 0);
  assert.ok(done2.response!.queueWaitMs >= 50, `the wait is reported: ${done2.response!.queueWaitMs} ms`);
  assert.deepEqual([worker.stats().highWaterMark, worker.stats().refusals, worker.stats().queued], [1, 1, 0], 'never over its slots; one refusal');
  const metrics = await worker.registry.metrics();
  assert.match(metrics, /headroom_worker_local_queue_limit 2/);
  assert.match(metrics, /headroom_worker_refusals_total\{reason="queue_full"\} 1/);
  assert.match(metrics, /headroom_worker_local_queue_wait_seconds_count 2/);
});

test('overflow "queue": a waiting task leaves at its deadline or when cancelled without running; a drain sends the waiting back; raising parallelism admits them', async (t) => {
  const finish: Array<() => void> = [];
  const ran: string[] = [];
  const { worker, client } = await start(
    t,
    { maxParallelism: 1, overflow: 'queue', maxQueuedTasks: 10 },
    {
      'bank-a': (task) =>
        new Promise((resolve) => {
          ran.push(task.id);
          finish.push(() => resolve('ok'));
        }),
    },
  );
  const send = (id: string, deadlineUnixMs = soon()) => {
    let call!: grpc.ClientUnaryCall;
    const result = new Promise<CallResult>((resolve) => {
      let started = false;
      call = client.execute({ task: { ...baseTask, id, deadlineUnixMs }, leaseId: `l-${id}`, cluster: 'c', workerId: 'w' }, (error, response) =>
        resolve({ error, response, started }),
      );
      call.on('metadata', (metadata: grpc.Metadata) => (started = metadata.get('headroom-started')[0] === '1'));
    });
    return { call, result };
  };
  const blocker = send('blocker');
  while (worker.stats().inflight < 1) await new Promise((resolve) => setTimeout(resolve, 5));
  const late = send('late', Date.now() + 150);
  const cancelled = send('cancelled');
  const raised = send('raised');
  while (worker.stats().queued < 3) await new Promise((resolve) => setTimeout(resolve, 5));
  const lateResult = await late.result;
  assert.equal(lateResult.error?.code, grpc.status.DEADLINE_EXCEEDED);
  assert.equal(lateResult.error?.metadata.get('headroom-error-code')[0], 'HR_ERR_DEADLINE_EXCEEDED');
  cancelled.call.cancel();
  await cancelled.result;
  while (worker.stats().queued > 1) await new Promise((resolve) => setTimeout(resolve, 5));
  await worker.setMaxParallelism(2);
  assert.equal(await eventuallyStarted(() => ran.includes('raised')), true, 'raising max parallelism admits the waiting task at once');
  const drained = send('drained');
  while (worker.stats().queued < 1) await new Promise((resolve) => setTimeout(resolve, 5));
  const closing = worker.close();
  const drainedResult = await drained.result;
  assert.equal(
    drainedResult.error?.metadata.get('headroom-error-code')[0],
    'HR_ERR_WORKER_DRAINING',
    'a draining worker sends its waiting tasks back to their balancer',
  );
  assert.equal(drainedResult.started, false);
  finish.splice(0).forEach((f) => f());
  await closing;
  assert.deepEqual(ran.sort(), ['blocker', 'raised'], 'the late, the cancelled and the drained never ran');
  assert.deepEqual([(await blocker.result).response?.result?.toString(), (await raised.result).response?.result?.toString()], ['ok', 'ok']);
});

async function eventuallyStarted(check: () => boolean): Promise<boolean> {
  for (let i = 0; i < 200 && !check(); i++) await new Promise((resolve) => setTimeout(resolve, 10));
  return check();
}

test('acceptUnaddressed: a task naming no worker runs; off (the default), it is refused naming workerId', async (t) => {
  const unaddressed = () => ({ task: { ...baseTask, deadlineUnixMs: soon() }, leaseId: 'proxy-1', cluster: 'c', workerId: '' });
  const off = await start(t, { workerId: 'w-off' }, { 'bank-a': async () => 'ok' });
  const refused = await execute(off.client, unaddressed());
  assert.equal(refused.error?.code, grpc.status.INVALID_ARGUMENT);
  assert.equal(refused.error?.metadata.get('headroom-error-code')[0], 'HR_ERR_INVALID_REQUEST');
  assert.match(refused.error!.details, /workerId is "", this worker is "w-off".*acceptUnaddressed/);
  assert.equal(off.worker.stats().completed, 0);

  const on = await start(t, { workerId: 'w-on', acceptUnaddressed: true }, { 'bank-a': async () => 'ok' });
  const accepted = await execute(on.client, unaddressed());
  assert.equal(accepted.error, null);
  assert.equal(accepted.response?.result?.toString(), 'ok');
  assert.equal(accepted.started, true);
  // Still refused: another worker's task, and an unaddressed task of another cluster.
  const otherWorker = await execute(on.client, { ...unaddressed(), workerId: 'someone-else' });
  assert.equal(otherWorker.error?.metadata.get('headroom-error-code')[0], 'HR_ERR_INVALID_REQUEST');
  assert.match(otherWorker.error!.details, /workerId is "someone-else", this worker is "w-on"/);
  const otherCluster = await execute(on.client, { ...unaddressed(), cluster: 'other' });
  assert.equal(otherCluster.error?.metadata.get('headroom-error-code')[0], 'HR_ERR_INVALID_REQUEST');
  assert.match(otherCluster.error!.details, /cluster is "other"/);
  assert.equal(on.worker.stats().completed, 1);
});

test('changes of max parallelism add no metric series: task durations are labelled by cluster, integration and outcome only', async (t) => {
  const { worker, client } = await start(t, { maxParallelism: 1 }, { 'bank-a': async () => 'ok' });
  for (let maxParallelism = 1; maxParallelism <= 5; maxParallelism++) {
    await worker.setMaxParallelism(maxParallelism);
    const { error } = await execute(client, {
      task: { ...baseTask, id: `t${maxParallelism}`, deadlineUnixMs: soon() },
      leaseId: `l${maxParallelism}`,
      cluster: 'c',
      workerId: 'w',
    });
    assert.equal(error, null);
  }
  const series = (await worker.registry.metrics()).split('\n').filter((line) => line.startsWith('headroom_worker_task_duration_seconds_count'));
  assert.deepEqual(series, ['headroom_worker_task_duration_seconds_count{cluster="c",integration="bank-a",outcome="ok"} 5']);
  // The limit each ran under is its own gauge.
  assert.match(await worker.registry.metrics(), /^headroom_worker_max_parallelism 5$/m);
});
