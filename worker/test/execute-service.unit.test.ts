import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import { EventEmitter } from 'node:events';
import * as grpc from '@grpc/grpc-js';
import { Agent } from 'undici';
import { Registry } from 'prom-client';
import { silentLogger } from '@headroom/common';
import type { ExecuteRequest__Output, ExecuteResponse } from '@headroom/proto';
import { ExecuteService, type ExecuteCall } from '../src/execute-service';
import { ParallelismGate } from '../src/gate';
import { RunningTasks } from '../src/running-tasks';
import { createWorkerMetrics } from '../src/metrics';
import { SelfProtection } from '../src/self-protection';
import { TaskFailedError } from '../src/errors';
import type { HandlerMap } from '../src/handler';

/** A gRPC call as far as Execute sees it: the test cancels it and reads what was sent. */
class FakeCall extends EventEmitter implements ExecuteCall {
  cancelled = false;
  started = false;
  constructor(readonly request: ExecuteRequest__Output) {
    super();
  }
  sendMetadata(metadata: grpc.Metadata): void {
    this.started = metadata.get('headroom-started')[0] === '1';
  }
  cancel(): void {
    this.cancelled = true;
    this.emit('cancelled');
  }
}

interface Answer {
  error: (Partial<grpc.StatusObject> & { code?: grpc.status; metadata?: grpc.Metadata }) | null;
  response: ExecuteResponse | undefined;
}

const flush = () => new Promise((resolve) => setImmediate(resolve));
const codeOf = (answer: Answer) => answer.error?.metadata?.get('headroom-error-code')[0] ?? answer.response?.error?.code;

function setUp(t: TestContext, options: { maxParallelism?: number; maxQueued?: number; handlers?: HandlerMap } = {}) {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 1_000_000 });
  const gate = new ParallelismGate(options.maxParallelism ?? 1, options.maxQueued ?? 0);
  const tasks = new RunningTasks({ workerId: 'w', releaseLease: async () => true, logger: silentLogger });
  const registry = new Registry();
  const protection = new SelfProtection({ eventLoopDelayP99Ms: 0, heapShare: 0 }, () => assert.fail('not sampled'));
  const outcomes: string[] = [];
  let draining = false;
  const release = new Map<string, () => void>();
  const handlers: HandlerMap = options.handlers ?? {
    // Runs until the test lets task `id` finish.
    'bank-a': (task) => new Promise((resolve) => release.set(task.id, () => resolve(`done ${task.id}`))),
  };
  const service = new ExecuteService({
    workerId: 'w',
    cluster: 'c',
    acceptUnaddressed: false,
    handlers,
    gate,
    tasks,
    metrics: createWorkerMetrics(registry, () => gate, protection),
    outcomes: { succeeded: (integration) => outcomes.push(`ok ${integration}`), failed: (integration) => outcomes.push(`failed ${integration}`) },
    httpAgent: new Agent(),
    logger: silentLogger,
    isDraining: () => draining,
    slotFreed: () => undefined,
  });
  const send = (id: string, overrides: Partial<ExecuteRequest__Output> = {}, deadlineInMs = 5000) => {
    const call = new FakeCall({
      task: {
        id,
        key: 'k',
        integration: 'bank-a',
        priority: 'USER_PRESENT',
        payload: Buffer.alloc(0),
        deadlineUnixMs: Date.now() + deadlineInMs,
        idempotent: false,
      },
      leaseId: `w|${id}`,
      cluster: 'c',
      workerId: 'w',
      ...overrides,
    });
    const answered = new Promise<Answer>((resolve) =>
      service.handle(call, (error, response) => resolve({ error: error as Answer['error'], response: response ?? undefined })),
    );
    return { call, answered };
  };
  const refusals = async () => (await registry.getSingleMetric('headroom_worker_refusals_total')!.get()).values.map((v) => `${v.labels.reason} ${v.value}`);
  return { service, gate, tasks, send, release, outcomes, refusals, drain: () => (draining = true) };
}

test('an admitted task is marked started and answered with its result, run time and queue wait', async (t) => {
  const { send, release, tasks, gate, outcomes } = setUp(t);
  const { call, answered } = send('a');
  await flush();
  assert.equal(call.started, true);
  assert.equal(gate.inflight, 1);
  release.get('a')!();
  const { error, response } = await answered;
  assert.equal(error, null);
  assert.equal(response?.workerId, 'w');
  assert.equal(Buffer.from(response!.result!).toString(), 'done a');
  assert.equal(typeof response?.runMs, 'number');
  assert.equal(response?.queueWaitMs, 0);
  assert.deepEqual({ inflight: gate.inflight, completed: tasks.completed, outcomes }, { inflight: 0, completed: 1, outcomes: ['ok bank-a'] });
});

test("a handler's coded error is the answer's code; any other throw is HR_ERR_HANDLER_FAILED", async (t) => {
  const { send, tasks, outcomes } = setUp(t, {
    maxParallelism: 2,
    handlers: {
      'bank-a': async (task) => {
        if (task.id === 'coded') throw new TaskFailedError('HR_ERR_UPSTREAM_TIMEOUT', 'bank timed out', { retryAfterMs: 300 });
        throw new Error('boom');
      },
    },
  });
  const coded = await send('coded').answered;
  assert.deepEqual(coded.response?.error, { code: 'HR_ERR_UPSTREAM_TIMEOUT', message: 'bank timed out', retryAfterMs: 300 });
  const plain = await send('plain').answered;
  assert.deepEqual(plain.response?.error, { code: 'HR_ERR_HANDLER_FAILED', message: 'boom' });
  assert.deepEqual({ failed: tasks.failed, outcomes }, { failed: 2, outcomes: ['failed bank-a', 'failed bank-a'] });
});

test('with every slot busy and no local queue, a task is refused before it starts (HR_ERR_WORKER_FULL)', async (t) => {
  const { send, release, refusals } = setUp(t);
  const first = send('a');
  await flush();
  const second = send('b');
  const refused = await second.answered;
  assert.equal(refused.error?.code, grpc.status.RESOURCE_EXHAUSTED);
  assert.equal(codeOf(refused), 'HR_ERR_WORKER_FULL');
  assert.equal(second.call.started, false);
  assert.deepEqual(await refusals(), ['full 1']);
  release.get('a')!();
  await first.answered;
});

test('with a local queue, a task waits for the slot; past its bound one is refused (HR_ERR_WORKER_QUEUE_FULL)', async (t) => {
  const { send, release, gate, tasks, refusals } = setUp(t, { maxQueued: 1 });
  const first = send('a');
  await flush();
  const queued = send('b');
  await flush();
  assert.deepEqual({ queued: gate.queued, held: [...tasks.heldLeaseIds()] }, { queued: 1, held: ['w|a', 'w|b'] });
  const overflow = await send('c').answered;
  assert.equal(codeOf(overflow), 'HR_ERR_WORKER_QUEUE_FULL');
  assert.deepEqual(await refusals(), ['queue_full 1']);
  release.get('a')!();
  await first.answered;
  await flush();
  assert.equal(queued.call.started, true, 'the queued task took the freed slot');
  release.get('b')!();
  const answer = await queued.answered;
  assert.ok(typeof answer.response?.queueWaitMs === 'number' && answer.response.queueWaitMs >= 0);
});

test('a queued task whose deadline passes, or whose caller leaves, is refused and gives up its place', async (t) => {
  const { send, release, gate, tasks, refusals } = setUp(t, { maxQueued: 2 });
  const first = send('a');
  await flush();
  const expiring = send('b', {}, 300);
  const leaving = send('c');
  await flush();
  assert.equal(gate.queued, 2);
  t.mock.timers.tick(300);
  const expired = await expiring.answered;
  assert.equal(expired.error?.code, grpc.status.DEADLINE_EXCEEDED);
  assert.equal(codeOf(expired), 'HR_ERR_DEADLINE_EXCEEDED');
  leaving.call.cancel();
  assert.equal(codeOf(await leaving.answered), 'HR_ERR_CANCELLED');
  assert.deepEqual({ queued: gate.queued, held: [...tasks.heldLeaseIds()] }, { queued: 0, held: ['w|a'] });
  assert.deepEqual((await refusals()).sort(), ['cancelled 1', 'deadline 1']);
  release.get('a')!();
  await first.answered;
});

test('a malformed request, an integration without a handler and a draining worker are refused with their codes', async (t) => {
  const { send, drain, refusals } = setUp(t);
  const wrongCluster = await send('a', { cluster: 'other' }).answered;
  assert.equal(wrongCluster.error?.code, grpc.status.INVALID_ARGUMENT);
  assert.match(String(wrongCluster.error?.details), /cluster is "other", this worker serves "c"/);
  const noHandler = await send('b', {
    task: {
      id: 'b',
      key: 'k',
      integration: 'bank-z',
      priority: 'USER_PRESENT',
      payload: Buffer.alloc(0),
      deadlineUnixMs: Date.now() + 5000,
      idempotent: false,
    },
  }).answered;
  assert.equal(codeOf(noHandler), 'HR_ERR_NO_HANDLER');
  drain();
  assert.equal(codeOf(await send('c').answered), 'HR_ERR_WORKER_DRAINING');
  assert.deepEqual((await refusals()).sort(), ['draining 1', 'no_handler 1']);
});
