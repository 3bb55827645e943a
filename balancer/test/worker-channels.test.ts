import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import { channelSecurity, type ExecuteRequest } from '@headroom/proto';
import { WorkerChannels, type DispatchOutcome } from '../src/worker-channels';
import { startFleet } from '@headroom/testkit';

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A worker whose tasks run until the test lets them end, and channels that ping every 100 ms. */
async function setUp(t: import('node:test').TestContext) {
  const fleet = await startFleet(t);
  const waiting: Array<() => void> = [];
  const worker = await fleet.addWorker({ cluster: 'baseline', maxParallelism: 4 }, { 'bank-a': () => new Promise<string>((resolve) => waiting.push(() => resolve('done'))) });
  const channels = new WorkerChannels({ maxSendMessageBytes: 1 << 20, maxChannels: 4, security: channelSecurity(undefined, 'workerTls'), keepaliveTimeMs: 100 });
  t.after(() => channels.closeAll());
  let seq = 0;
  const run = (): Promise<DispatchOutcome> => {
    const deadlineUnixMs = Date.now() + 10_000;
    const request: ExecuteRequest = {
      task: { id: `t${++seq}`, key: 'k', integration: 'bank-a', priority: 'BACKGROUND', payload: Buffer.alloc(0), deadlineUnixMs },
      leaseId: `l${seq}`,
      cluster: 'baseline',
      workerId: worker.workerId,
    };
    return channels.execute(worker.address, request, deadlineUnixMs, new AbortController().signal);
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

test('a worker that leaves the directory keeps its running tasks: its channel closes when they end', async (t) => {
  const { worker, channels, run, started, finishAll } = await setUp(t);
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

test('a worker that comes back while its old channel closes gets that channel back', async (t) => {
  const { worker, channels, run, started, finishAll } = await setUp(t);
  const first = run();
  await started(1);
  channels.keepOnly(new Set());
  const second = run();
  await started(2);
  assert.equal(channels.size, 1, 'one channel for the address, not two');
  finishAll();
  assert.deepEqual((await Promise.all([first, second])).map((o) => o.kind), ['done', 'done']);
  assert.equal(channels.size, 1, 'it stays open: the address is in use again');
  channels.keepOnly(new Set([worker.address]));
  assert.equal(channels.size, 1);
  channels.keepOnly(new Set());
  assert.equal(channels.size, 0, 'idle, it closes at once');
});
