import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as net from 'node:net';
import { performance } from 'node:perf_hooks';
import { cliPaths, eventually, spawnReady, startFleet, testRedisUrl } from '@headroom/testkit';
import { TaskFailedError as HandlerError, type HandlerMap } from '@headroom/worker';
import {
  BalancerLostError,
  BalancerUnreachableError,
  CancelledError,
  ClientOverloadedError,
  HeadroomClientError,
  InvalidTaskError,
  QueueFullError,
  TaskFailedError,
  createClient,
  type HeadroomClient,
} from '../src/index';

/** Tasks of "hold" run until the test lets them go (or their signal aborts); "echo" answers its payload. */
class Held {
  readonly running: Array<{ id: string; signal: AbortSignal; finish: () => void }> = [];
  readonly handlers: HandlerMap = {
    echo: async (task) => task.payload,
    fail: async () => {
      throw new HandlerError('HR_ERR_UPSTREAM_UNAVAILABLE', 'the bank is down');
    },
    hold: (task, signal) =>
      new Promise<string>((resolve, reject) => {
        this.running.push({ id: task.id, signal, finish: () => resolve(`done ${task.id}`) });
        signal.addEventListener('abort', () => reject(signal.reason), { once: true });
      }),
  };

  async started(count: number): Promise<void> {
    await this.until(() => this.running.length >= count, `${count} held tasks to start`);
  }

  /** Waits until the task `id` runs a second time (it was sent again). */
  async startedAgain(id: string): Promise<void> {
    await this.until(() => this.running.filter((task) => task.id === id).length >= 2, `${id} to start again`);
  }

  finish(id: string): void {
    this.running.findLast((task) => task.id === id)?.finish();
  }

  finishAll(): void {
    for (const task of this.running.splice(0)) task.finish();
  }

  private async until(check: () => boolean, what: string): Promise<void> {
    await eventually(what, 5000, () => (check() ? true : undefined));
  }
}

async function setUp(t: import('node:test').TestContext, options: { maxParallelism?: number; balancers?: number; maxQueuedTasks?: number } = {}) {
  const fleet = await startFleet(t);
  const held = new Held();
  t.after(() => held.finishAll());
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: options.maxParallelism ?? 4 }, held.handlers);
  for (let i = 0; i < (options.balancers ?? 1); i++) await fleet.addBalancer(options.maxQueuedTasks ? { maxQueuedTasks: options.maxQueuedTasks } : {});
  return { fleet, held };
}

function clientOf(t: import('node:test').TestContext, balancers: string[], options: Partial<Parameters<typeof createClient>[0]> = {}): HeadroomClient {
  const client = createClient({ balancers, ...options });
  t.after(() => client.close());
  return client;
}

/** A local port nothing listens on. */
async function deadAddress(): Promise<string> {
  const server = net.createServer().listen(0, '127.0.0.1');
  await new Promise((resolve) => server.once('listening', resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `127.0.0.1:${port}`;
}

async function rejection(promise: Promise<unknown>): Promise<HeadroomClientError> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof HeadroomClientError, `a HeadroomClientError, got ${String(error)}`);
    return error;
  }
  assert.fail('expected the submit to fail');
}

test('a task answers its result and where it ran; a handler failure is a TaskFailedError with its own code', async (t) => {
  const { fleet } = await setUp(t);
  const client = clientOf(t, [fleet.balancers[0]!.address]);
  const answer = await client.submit({ integration: 'echo', key: 'account-1', payload: 'hello', priority: 'USER_PRESENT', id: 'task-1' });
  assert.equal(answer.result.toString(), 'hello');
  assert.equal(answer.taskId, 'task-1');
  assert.deepEqual(
    [answer.placement.cluster, answer.placement.workerId, answer.placement.workerAttempts, answer.attempts],
    ['baseline', fleet.workers[0]!.workerId, 1, 1],
  );
  assert.equal(answer.balancer, fleet.balancers[0]!.address);

  const failed = await rejection(client.submit({ integration: 'fail', key: 'account-1' }));
  assert.ok(failed instanceof TaskFailedError);
  assert.equal(failed.code, 'HR_ERR_UPSTREAM_UNAVAILABLE');
  assert.equal(failed.runState, 'ran');
  assert.equal(failed.placement?.workerId, fleet.workers[0]!.workerId, 'it says where the handler ran');
  assert.equal(failed.attempts, 1, 'a handler failure is not retried');
  assert.deepEqual(client.stats(), { inFlight: 0, submitted: 2, succeeded: 1, retries: 0, failedByCode: { HR_ERR_UPSTREAM_UNAVAILABLE: 1 } });
});

test('a bad task is an InvalidTaskError naming the field, from the client or the balancer, and is not retried', async (t) => {
  const { fleet } = await setUp(t);
  const client = clientOf(t, [fleet.balancers[0]!.address]);
  const local = await rejection(client.submit({ integration: 'echo', key: '' }));
  assert.ok(local instanceof InvalidTaskError);
  assert.match(local.message, /^key: /);
  const badDeadline = await rejection(client.submit({ integration: 'echo', key: 'k', deadlineMs: -5 }));
  assert.match(badDeadline.message, /^deadlineMs: got -5/);
  // The balancer's own rules (the integration's form) come back typed the same way.
  const remote = await rejection(client.submit({ integration: 'Not An Integration', key: 'k' }));
  assert.ok(remote instanceof InvalidTaskError);
  assert.match(remote.message, /task\.integration/);
  assert.equal(remote.balancer, fleet.balancers[0]!.address);
  assert.equal(remote.attempts, 1);
  assert.equal(fleet.balancers[0]!.stats().failedByCode.HR_ERR_INVALID_TASK, 1, 'one call reached the balancer: the local checks sent nothing');
});

test("a full queue: the client waits the balancer's hint between tries and gives up by the deadline with QueueFullError", async (t) => {
  const { fleet, held } = await setUp(t, { maxParallelism: 1, maxQueuedTasks: 1 });
  const balancer = fleet.balancers[0]!;
  const client = clientOf(t, [balancer.address]);
  const running = client.submit({ integration: 'hold', key: 'a' });
  await held.started(1);
  const queued = client.submit({ integration: 'hold', key: 'b' });
  await eventually('the second task queued', 5000, () => (balancer.stats().submitted >= 2 ? true : undefined));

  const startedAt = performance.now();
  const error = await rejection(client.submit({ integration: 'echo', key: 'c', deadlineMs: 2800 }));
  const elapsedMs = performance.now() - startedAt;
  assert.ok(error instanceof QueueFullError, `QueueFullError, got ${error.name}`);
  assert.equal(error.retryAfterMs, 1000, "the balancer's hint");
  assert.ok(error.attempts >= 2 && error.attempts <= 3, `tried again while the deadline allowed: ${error.attempts} calls`);
  assert.equal(balancer.stats().failedByCode.HR_ERR_QUEUE_FULL, error.attempts, 'each call reached the balancer');
  assert.ok(elapsedMs >= (error.attempts - 1) * 1000, `waited at least the hint between calls: ${Math.round(elapsedMs)} ms for ${error.attempts}`);
  assert.ok(elapsedMs < 2800, `gave up by the deadline: ${Math.round(elapsedMs)} ms`);
  assert.equal(client.stats().retries, error.attempts - 1);

  held.finishAll();
  await running;
  await held.started(1);
  held.finishAll();
  assert.match((await queued).result.toString(), /^done /);
});

test('a balancer that cannot be reached is skipped at once; tasks on one killed mid-task fail with BalancerLostError unless idempotent; new tasks go to the other', async (t) => {
  const { fleet, held } = await setUp(t, { maxParallelism: 8 });
  const dead = await deadAddress();
  const survivor = fleet.balancers[0]!.address;
  const victim = await spawnReady(t, cliPaths.balancer, [
    '--redis-url',
    testRedisUrl,
    '--key-prefix',
    fleet.ledgerOptions.keyPrefix!,
    '--heartbeat-timeout-ms',
    '1000',
  ]);

  // Unreachable: tried, marked down, and the task goes on to the next balancer without a wait.
  const unreachableFirst = clientOf(t, [dead, survivor], { balancerDownMs: 60_000 });
  const first = await unreachableFirst.submit({ integration: 'echo', key: 'k', payload: 'x' });
  assert.deepEqual([first.balancer, first.attempts], [survivor, 2]);
  const second = await unreachableFirst.submit({ integration: 'echo', key: 'k', payload: 'x' });
  assert.deepEqual([second.balancer, second.attempts], [survivor, 1], 'the unreachable one is tried last while it is marked down');
  const nowhere = await rejection(clientOf(t, [dead], { retry: { maxAttempts: 2, minDelayMs: 10 } }).submit({ integration: 'echo', key: 'k' }));
  assert.ok(nowhere instanceof BalancerUnreachableError);
  assert.deepEqual([nowhere.runState, nowhere.attempts], ['not-run', 2]);

  // Killed: four tasks, sent in turn through the victim and the survivor, all running.
  const client = clientOf(t, [victim.ready.address, survivor]);
  const submitted = [0, 1, 2, 3].map((i) => client.submit({ integration: 'hold', key: `k${i}`, id: `held-${i}`, idempotent: i === 0 }));
  // (Each is awaited in turn below; none may count as unhandled meanwhile.)
  for (const answer of submitted) answer.catch(() => undefined);
  await held.started(4);
  await victim.kill('SIGKILL');
  held.finish('held-1');
  held.finish('held-3');
  for (const i of [1, 3]) assert.equal((await submitted[i]!).balancer, survivor);
  // Task 2 went through the victim and may have run: not sent again.
  const lost = await rejection(submitted[2]!);
  assert.ok(lost instanceof BalancerLostError, lost.name);
  assert.deepEqual([lost.runState, lost.attempts, lost.balancer], ['may-have-run', 1, victim.ready.address]);
  // Task 0 too, but it is idempotent: sent again, through the survivor.
  await held.startedAgain('held-0');
  held.finish('held-0');
  const retried = await submitted[0]!;
  assert.deepEqual([retried.balancer, retried.attempts], [survivor, 2]);
  for (let i = 0; i < 4; i++) {
    const answer = await client.submit({ integration: 'echo', key: `after-${i}`, payload: 'ok' });
    assert.equal(answer.balancer, survivor, 'every new task goes to the balancer left');
  }
});

test("aborting the signal cancels the task on the balancer: a queued one never runs, a running one's handler sees the abort", async (t) => {
  const { fleet, held } = await setUp(t, { maxParallelism: 1 });
  const balancer = fleet.balancers[0]!;
  const client = clientOf(t, [balancer.address]);
  const running = new AbortController();
  const runningAnswer = client.submit({ integration: 'hold', key: 'a', signal: running.signal });
  await held.started(1);
  const queued = new AbortController();
  const queuedAnswer = client.submit({ integration: 'hold', key: 'b', signal: queued.signal });
  await eventually('the second task queued', 5000, () => (balancer.stats().submitted >= 2 ? true : undefined));

  queued.abort();
  const queuedError = await rejection(queuedAnswer);
  assert.ok(queuedError instanceof CancelledError);
  running.abort();
  const runningError = await rejection(runningAnswer);
  assert.ok(runningError instanceof CancelledError);
  // The client answers at once; the cancel travels on to the balancer, then the worker.
  await eventually("the handler's signal to abort (the cancel reached the worker)", 3000, () => (held.running[0]!.signal.aborted ? true : undefined));
  assert.equal(held.running.length, 1, 'the queued task never ran');
  await eventually('the balancer to count both cancellations', 3000, () => ((balancer.stats().failedByCode.HR_ERR_CANCELLED ?? 0) >= 2 ? true : undefined));
  const already = await rejection(client.submit({ integration: 'echo', key: 'c', signal: AbortSignal.abort() }));
  assert.deepEqual([already.name, already.attempts], ['CancelledError', 0], 'an aborted signal sends nothing');
});

test('submits beyond maxInFlight are refused at once with ClientOverloadedError', async (t) => {
  const { fleet, held } = await setUp(t, { maxParallelism: 2 });
  const client = clientOf(t, [fleet.balancers[0]!.address], { maxInFlight: 2 });
  // (User-present: background tasks leave a share of the slots free, see keptForUserPresentShare.)
  const answers = [
    client.submit({ integration: 'hold', key: 'a', priority: 'USER_PRESENT' }),
    client.submit({ integration: 'hold', key: 'b', priority: 'USER_PRESENT' }),
  ];
  const refused = await rejection(client.submit({ integration: 'echo', key: 'c' }));
  assert.ok(refused instanceof ClientOverloadedError);
  assert.match(refused.message, /maxInFlight/);
  await held.started(2);
  held.finishAll();
  await Promise.all(answers);
  assert.equal((await client.submit({ integration: 'echo', key: 'd' })).attempts, 1, 'room again once they end');
});

test('client options are checked, naming the setting and what is accepted', () => {
  const refused = (options: unknown) =>
    assert.throws(
      () => createClient(options as never),
      (error: Error) => (assert.match(error.message, /Headroom client options/), true),
    );
  assert.throws(() => createClient({ balancers: [] }), /balancers: got \[\], expected at least one balancer/);
  assert.throws(() => createClient({ balancers: ['nohost'] }), /balancers\.0: got "nohost", expected host:port/);
  assert.throws(() => createClient({ balancers: ['127.0.0.1:1'], retry: { maxAttempts: 0 } }), /retry\.maxAttempts: got 0, expected a number >= 1/);
  assert.throws(
    () => createClient({ balancers: ['127.0.0.1:1'], retry: { minDelayMs: 500, maxDelayMs: 100 } }),
    /retry\.minDelayMs must not exceed retry\.maxDelayMs/,
  );
  assert.throws(() => createClient({ balancers: ['127.0.0.1:1'], typo: 1 } as never), /unknown setting\(s\) "typo"/);
  refused({});
});
