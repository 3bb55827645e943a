import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { BalancerService, channelSecurity } from '@headroom/proto';
import { connected, json, startFleet, task, testRedisUrl, submit, type Fleet } from '@headroom/testkit';
import { createBalancer } from '../src/balancer';
import { balancerOptionsSchema } from '../src/config';
import { createDispatchEngine, type DispatchEngineDependencies, type ManagedWorkerCalls } from '../src/engine';
import { validateTask, type ValidTask } from '../src/task-validation';
import { WorkerChannels, type WorkerChannelsOptions } from '../src/worker-channels';

/** Real WorkerChannels, with what the engine did with them recorded. */
class RecordingCalls implements ManagedWorkerCalls {
  readonly executed: string[] = [];
  closed = 0;
  private readonly channels: WorkerChannels;

  constructor(readonly options: WorkerChannelsOptions) {
    this.channels = new WorkerChannels(options);
  }

  get size(): number {
    return this.channels.size;
  }

  execute(...args: Parameters<WorkerChannels['execute']>): ReturnType<WorkerChannels['execute']> {
    this.executed.push(args[1].task?.id ?? '');
    return this.channels.execute(...args);
  }

  keepOnly(live: ReadonlySet<string>): void {
    this.channels.keepOnly(live);
  }

  closeAll(): void {
    this.closed++;
    this.channels.closeAll();
  }
}

async function engineOn(t: TestContext, fleet: Fleet, workerCalls: DispatchEngineDependencies['workerCalls']) {
  const subscriber = await connected(testRedisUrl, true);
  t.after(() => subscriber.disconnect());
  const config = balancerOptionsSchema.parse({ heartbeatTimeoutMs: 1000, sweepIntervalMs: 200, maxPayloadBytes: 1000, maxQueuedBytes: 1000 });
  const engine = await createDispatchEngine(config, { redis: fleet.redis, subscriber, ledger: fleet.ledgerOptions, ...(workerCalls ? { workerCalls } : {}) });
  t.after(() => engine.close());
  return { engine, config };
}

function validTask(config: { maxPayloadBytes: number; defaultTaskTimeoutMs: number; maxTaskTimeoutMs: number }, id: string): ValidTask {
  const tk = task({ id, payload: json({ sleepMs: 5 }) });
  return validateTask(
    {
      id: tk.id!,
      key: tk.key!,
      integration: tk.integration!,
      priority: 'USER_PRESENT',
      payload: Buffer.from(tk.payload as Buffer),
      deadlineUnixMs: 0,
      idempotent: false,
    },
    config,
  );
}

test("the engine makes its worker calls with the factory it is given, with the balancer's channel settings, and closes them", async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 2 });
  let made: RecordingCalls | undefined;
  const { engine, config } = await engineOn(t, fleet, (options) => (made = new RecordingCalls(options)));
  assert.equal(made?.options.maxSendMessageBytes, 1000 + 64 * 1024, 'maxPayloadBytes plus the envelope');
  const result = await engine.dispatch(validTask(config, 'through-the-factory'), new AbortController().signal);
  assert.ok(result.ok && result.cluster === 'baseline', JSON.stringify(result));
  assert.deepEqual(made!.executed, ['through-the-factory']);
  assert.equal(engine.stats().workerChannels, 1);
  await engine.close();
  assert.equal(made!.closed, 1, 'what the engine made, it closes');
  const late = await engine.dispatch(validTask(config, 'after-close'), new AbortController().signal);
  assert.ok(!late.ok && (late.error as { code?: string }).code === 'HR_ERR_SHUTTING_DOWN', JSON.stringify(late));
});

test("worker calls given as an instance are the caller's: used, not closed", async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 2 });
  const shared = new RecordingCalls({
    maxSendMessageBytes: 1024 * 1024,
    maxChannels: 16,
    security: channelSecurity(undefined, 'workerTls'),
    connectTimeoutMs: 2000,
    firstByteTimeoutMs: 2000,
    probeTls: undefined,
  });
  t.after(() => shared.closeAll());
  const { engine, config } = await engineOn(t, fleet, shared);
  const result = await engine.dispatch(validTask(config, 'through-the-instance'), new AbortController().signal);
  assert.ok(result.ok, JSON.stringify(result));
  assert.deepEqual(shared.executed, ['through-the-instance']);
  await engine.close();
  assert.equal(shared.closed, 0);
});

test('a balancer dispatches through injected worker calls', async (t) => {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
  await fleet.addWorker({ cluster: 'baseline', maxParallelism: 1 });
  let made: RecordingCalls | undefined;
  const subscriber = await connected(testRedisUrl, true);
  t.after(() => subscriber.disconnect());
  const balancer = await createBalancer(
    {},
    { redis: fleet.redis, subscriber, ledger: fleet.ledgerOptions, workerCalls: (options) => (made = new RecordingCalls(options)) },
  );
  t.after(() => balancer.close());
  const client = new BalancerService(balancer.address, grpc.credentials.createInsecure());
  t.after(() => client.close());
  const answer = await submit(client, task({ id: 'via-grpc' }));
  assert.ok(answer.ok, JSON.stringify(answer));
  assert.deepEqual(made!.executed, ['via-grpc']);
});
