import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import type { DispatchOutcome } from '../src/worker-channels';
import { startFleet } from '@headroom/testkit';
import { executeRequest, implementations, sleep, type WorkerCallsUnderTest } from './worker-calls-kit';

/** A worker whose tasks run until the test lets them end, and calls whose connections are pinged every 100 ms. */
async function setUp(t: import('node:test').TestContext, create: () => WorkerCallsUnderTest) {
  const fleet = await startFleet(t);
  const waiting: Array<() => void> = [];
  const worker = await fleet.addWorker(
    { cluster: 'baseline', maxParallelism: 4 },
    { 'bank-a': () => new Promise<string>((resolve) => waiting.push(() => resolve('done'))) },
  );
  const channels = create();
  t.after(() => channels.closeAll());
  const run = (): Promise<DispatchOutcome> => {
    const deadlineUnixMs = Date.now() + 10_000;
    return channels.execute(worker.address, executeRequest(worker, 'bank-a', Buffer.alloc(0), deadlineUnixMs), deadlineUnixMs, new AbortController().signal);
  };
  const started = async (count: number) => {
    for (let waited = 0; waiting.length < count; waited += 10) {
      assert.ok(waited < 5000, `${count} tasks did not start`);
      await sleep(10);
    }
  };
  const finishAll = () => waiting.splice(0).forEach((finish) => finish());
  return { worker, channels, run, started, finishAll };
}

for (const implementation of implementations) {
  const create = () => implementation.create({ maxChannels: 4, keepaliveTimeMs: 100 });

  test(`${implementation.name}: a worker that leaves the directory keeps its running tasks: its channel closes when they end`, async (t) => {
    const { worker, channels, run, started, finishAll } = await setUp(t, create);
    const running = run();
    await started(1);
    channels.keepOnly(new Set());
    assert.equal(channels.size, 1, 'the channel stays open behind its call');
    // Several keepalive periods: a channel closed under a call ends the connection at its next ping.
    await sleep(500);
    finishAll();
    const outcome = await running;
    assert.equal(outcome.kind, 'done', `the task finished: ${JSON.stringify(outcome)}`);
    assert.equal(channels.size, 0, 'and the channel closed after it');
    assert.equal(worker.stats().completed, 1);
  });

  test(`${implementation.name}: a worker that comes back while its old channel closes gets that channel back`, async (t) => {
    const { worker, channels, run, started, finishAll } = await setUp(t, create);
    const first = run();
    await started(1);
    channels.keepOnly(new Set());
    const second = run();
    await started(2);
    assert.equal(channels.size, 1, 'one channel for the address, not two');
    finishAll();
    assert.deepEqual(
      (await Promise.all([first, second])).map((o) => o.kind),
      ['done', 'done'],
    );
    assert.equal(channels.size, 1, 'it stays open: the address is in use again');
    channels.keepOnly(new Set([worker.address]));
    assert.equal(channels.size, 1);
    channels.keepOnly(new Set());
    assert.equal(channels.size, 0, 'idle, it closes at once');
  });

  test(`${implementation.name}: closeAll lets the calls under way finish, and opens nothing more`, async (t) => {
    const { channels, run, started, finishAll } = await setUp(t, create);
    const running = run();
    await started(1);
    channels.closeAll();
    assert.equal(channels.size, 0);
    finishAll();
    assert.equal((await running).kind, 'done');
  });

  test(`${implementation.name}: beyond maxChannels the least recently used channel closes, once its calls have ended`, async (t) => {
    const fleet = await startFleet(t);
    const waiting: Array<() => void> = [];
    const handlers = {
      'bank-a': () => new Promise<string>((resolve) => waiting.push(() => resolve('done'))),
      echo: async (task: { payload: Buffer }) => task.payload,
    };
    const workers = [
      await fleet.addWorker({ cluster: 'baseline', maxParallelism: 2 }, handlers),
      await fleet.addWorker({ cluster: 'baseline', maxParallelism: 2 }, handlers),
      await fleet.addWorker({ cluster: 'baseline', maxParallelism: 2 }, handlers),
    ];
    const channels = implementation.create({ maxChannels: 2 });
    t.after(() => channels.closeAll());
    const call = (worker: (typeof workers)[number], integration: string) => {
      const deadlineUnixMs = Date.now() + 10_000;
      return channels.execute(
        worker.address,
        executeRequest(worker, integration, Buffer.from('x'), deadlineUnixMs),
        deadlineUnixMs,
        new AbortController().signal,
      );
    };
    const running = call(workers[0]!, 'bank-a');
    for (let waited = 0; waiting.length < 1; waited += 10) {
      assert.ok(waited < 5000, 'the task did not start');
      await sleep(10);
    }
    assert.equal((await call(workers[1]!, 'echo')).kind, 'done');
    assert.equal(channels.size, 2);
    // A third address: the first (least recently used) leaves the cache but stays open behind its call.
    assert.equal((await call(workers[2]!, 'echo')).kind, 'done');
    assert.equal(channels.size, 3, 'two cached, one closing behind its call');
    waiting.splice(0).forEach((finish) => finish());
    assert.equal((await running).kind, 'done');
    assert.equal(channels.size, 2, 'it closed after its call');
  });
}
