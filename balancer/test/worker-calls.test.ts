/**
 * Worker.Execute outcomes, against real workers (in this process, and as processes killed with
 * SIGKILL) on port 0 and real Redis, for both WorkerCalls implementations: WorkerCallsH2 must
 * give what WorkerChannels gives for the same events.
 */
import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import * as net from 'node:net';
import { performance } from 'node:perf_hooks';
import { HeadroomError, freePort } from '@headroom/common';
import { cliPaths, handlersPaths, spawnReady, startFleet, testRedisUrl, uniquePrefix } from '@headroom/testkit';
import type { HandlerMap, TaskContext } from '@headroom/worker';
import { makeCertificates } from './certificates';
import { executeRequest, implementations, sleep, type WorkerCallsTestOptions } from './worker-calls-kit';
import type { DispatchOutcome } from '../src/worker-channels';

/** Handlers: echo; `big` answers as many bytes as its payload says (uint32); `hold` runs until released or aborted. */
function testHandlers() {
  const held: Array<{ release: () => void; signal: AbortSignal }> = [];
  const abortReasons: string[] = [];
  const handlers: HandlerMap = {
    echo: async (task: TaskContext) => task.payload,
    big: async (task: TaskContext) => Buffer.alloc(task.payload.readUInt32BE(0), 7),
    hold: (_task: TaskContext, signal: AbortSignal) =>
      new Promise<string>((resolve, reject) => {
        held.push({ release: () => resolve('released'), signal });
        signal.addEventListener('abort', () => {
          abortReasons.push(signal.reason instanceof HeadroomError ? signal.reason.code : String(signal.reason));
          reject(signal.reason);
        });
      }),
  };
  const heldCount = async (count: number) => {
    for (let waited = 0; held.length < count; waited += 10) {
      assert.ok(waited < 5000, `${count} held tasks did not start`);
      await sleep(10);
    }
  };
  return { handlers, held, abortReasons, heldCount };
}

async function setUp(
  t: TestContext,
  create: (options?: WorkerCallsTestOptions) => ReturnType<(typeof implementations)[number]['create']>,
  options: WorkerCallsTestOptions = {},
  maxParallelism = 2,
) {
  const fleet = await startFleet(t);
  const kit = testHandlers();
  const worker = await fleet.addWorker({ cluster: 'baseline', maxParallelism }, kit.handlers);
  const calls = create(options);
  t.after(() => calls.closeAll());
  let onStartedOrEndedCalls = 0;
  const call = (
    integration: string,
    payload = Buffer.alloc(0),
    { timeoutMs = 10_000, signal = new AbortController().signal, workerId = worker.workerId } = {},
  ): Promise<DispatchOutcome> => {
    const deadlineUnixMs = Date.now() + timeoutMs;
    return calls.execute(
      worker.address,
      executeRequest({ workerId, cluster: 'baseline' }, integration, payload, deadlineUnixMs),
      deadlineUnixMs,
      signal,
      () => onStartedOrEndedCalls++,
    );
  };
  const inflightBecomes = async (count: number) => {
    for (let waited = 0; worker.stats().inflight !== count; waited += 10) {
      assert.ok(waited < 5000, `the worker's inflight stayed ${worker.stats().inflight}, not ${count}`);
      await sleep(10);
    }
  };
  return { fleet, worker, calls, call, ...kit, inflightBecomes, startedOrEnded: () => onStartedOrEndedCalls };
}

const uint32 = (n: number) => {
  const bytes = Buffer.alloc(4);
  bytes.writeUInt32BE(n);
  return bytes;
};

for (const implementation of implementations) {
  const create = implementation.create;
  const name = implementation.name;
  const forAStartedTask = implementation.startedOrEndedRunsForAStartedTask;

  test(`${name}: a handler's answer is done with the decoded response; a large one, split across frames, comes whole`, async (t) => {
    const { worker, call, startedOrEnded } = await setUp(t, create);
    const payload = Buffer.from('0123456789abcdef');
    const echoed = await call('echo', payload);
    assert.equal(echoed.kind, 'done', JSON.stringify(echoed));
    assert.ok(echoed.kind === 'done');
    assert.deepEqual(Buffer.from(echoed.response.result!), payload);
    assert.equal(echoed.response.workerId, worker.workerId);
    assert.equal(echoed.response.outcome, 'result');
    assert.ok(echoed.response.runMs >= 0 && echoed.response.queueWaitMs === 0);
    assert.equal(startedOrEnded(), forAStartedTask, 'onStartedOrEnded ran');

    const big = await call('big', uint32(300_000));
    assert.ok(big.kind === 'done', JSON.stringify(big).slice(0, 300));
    assert.equal(big.response.result!.length, 300_000);
    assert.ok(Buffer.from(big.response.result!).every((byte) => byte === 7));
  });

  test(`${name}: a refusal is not-started with the worker's code and its message (a trailers-only answer, percent-decoded)`, async (t) => {
    const { worker, call, held, heldCount, startedOrEnded } = await setUp(t, create, {}, 1);
    const running = call('hold');
    await heldCount(1);
    const refused = await call('echo');
    assert.deepEqual(refused, { kind: 'not-started', unreachable: false, code: 'HR_ERR_WORKER_FULL', message: `worker ${worker.workerId} runs 1 of 1 tasks` });
    const invalid = await call('echo', Buffer.alloc(0), { workerId: 'someone-else' });
    assert.deepEqual(invalid, {
      kind: 'not-started',
      unreachable: false,
      code: 'HR_ERR_INVALID_REQUEST',
      message: `workerId is "someone-else", this worker is "${worker.workerId}"`,
    });
    held[0]!.release();
    assert.equal((await running).kind, 'done');
    assert.equal(startedOrEnded(), forAStartedTask + 2, 'for each call: once for each refusal');
  });

  test(`${name}: the deadline passes while the task runs: deadline, started; the worker gives its slot back`, async (t) => {
    const { call, heldCount, inflightBecomes, abortReasons, startedOrEnded } = await setUp(t, create, {}, 1);
    const startedAt = Date.now();
    const outcome = await call('hold', Buffer.alloc(0), { timeoutMs: 400 });
    // Both ends hold the same deadline: this side's timer ends the call, or, when the worker's own
    // timer fired a millisecond sooner and its answer was read first (seen once in CI), the
    // worker's coded answer does. Either way the caller learns the deadline passed.
    if (outcome.kind === 'done') assert.equal(outcome.response.error?.code, 'HR_ERR_DEADLINE_EXCEEDED', JSON.stringify(outcome));
    else assert.deepEqual(outcome, { kind: 'deadline', started: true });
    assert.ok(Date.now() - startedAt < 2000, 'at the deadline, not later');
    await heldCount(1);
    await inflightBecomes(0);
    assert.deepEqual(abortReasons, ['HR_ERR_DEADLINE_EXCEEDED']);
    assert.equal(startedOrEnded(), forAStartedTask);
    assert.equal((await call('echo')).kind, 'done', 'the slot is free again');
    // A deadline already past: nothing is sent.
    assert.deepEqual(await call('echo', Buffer.alloc(0), { timeoutMs: -1 }), { kind: 'deadline', started: false });
  });

  test(`${name}: a cancelled call is cancelled; the worker sees the cancel (RST_STREAM) and its slot comes back`, async (t) => {
    const { call, heldCount, inflightBecomes, abortReasons, worker, startedOrEnded } = await setUp(t, create, {}, 1);
    const controller = new AbortController();
    const running = call('hold', Buffer.alloc(0), { signal: controller.signal });
    await heldCount(1);
    // The worker sent its "started" header before the handler ran; wait until this side read it
    // (on a loaded machine the cancel could otherwise overtake it: a CI run saw started: false).
    for (let waited = 0; startedOrEnded() === 0; waited += 10) {
      assert.ok(waited < 5000, 'the call never saw the task start');
      await sleep(10);
    }
    controller.abort();
    assert.deepEqual(await running, { kind: 'cancelled', started: true });
    await inflightBecomes(0);
    for (let waited = 0; abortReasons.length === 0; waited += 10) {
      assert.ok(waited < 5000, 'the handler was not aborted');
      await sleep(10);
    }
    assert.deepEqual(abortReasons, ['HR_ERR_CANCELLED']);
    assert.equal((await call('echo')).kind, 'done', 'the slot is free again');
    assert.equal(worker.stats().failed, 1);
    const before = new AbortController();
    before.abort();
    assert.deepEqual(await call('echo', Buffer.alloc(0), { signal: before.signal }), { kind: 'cancelled', started: false });
  });

  test(`${name}: a worker that drains answers its running task, refuses new ones, then goes away: unreachable`, async (t) => {
    const { worker, call, held, heldCount, calls } = await setUp(t, create);
    const running = call('hold');
    await heldCount(1);
    const closed = worker.close();
    const refused = await call('echo');
    assert.deepEqual(refused, { kind: 'not-started', unreachable: false, code: 'HR_ERR_WORKER_DRAINING', message: `worker ${worker.workerId} is draining` });
    held[0]!.release();
    assert.equal((await running).kind, 'done');
    await closed;
    const gone = await call('echo');
    assert.ok(gone.kind === 'not-started' && gone.unreachable && gone.code === '', JSON.stringify(gone));
    calls.keepOnly(new Set());
    assert.equal(calls.size, 0);
  });

  test(`${name}: a response over the receive limit ends the call (lost, it had started) with a clear message; the next call works`, async (t) => {
    const { call } = await setUp(t, create, { maxSendMessageBytes: 64 * 1024 });
    const outcome = await call('big', uint32(100_000));
    assert.equal(outcome.kind, 'lost', JSON.stringify(outcome));
    assert.ok(outcome.kind === 'lost');
    assert.match(outcome.message, /larger than max \(\d+ vs 65536\)/);
    const next = await call('big', uint32(60_000));
    assert.ok(next.kind === 'done' && next.response.result!.length === 60_000, JSON.stringify(next).slice(0, 300));
    // A request over the limit is not sent.
    const tooLarge = await call('echo', Buffer.alloc(70_000));
    assert.ok(
      tooLarge.kind === 'not-started' &&
        !tooLarge.unreachable &&
        tooLarge.code === '' &&
        tooLarge.message === 'Attempted to send message with a size larger than 65536',
      JSON.stringify(tooLarge),
    );
  });

  test(`${name}: nothing listening at the address: not-started, unreachable, no code`, async (t) => {
    const calls = create();
    t.after(() => calls.closeAll());
    const address = `127.0.0.1:${await freePort()}`;
    const deadlineUnixMs = Date.now() + 5000;
    let ended = 0;
    const outcome = await calls.execute(
      address,
      executeRequest({ workerId: 'w', cluster: 'baseline' }, 'echo', Buffer.alloc(0), deadlineUnixMs),
      deadlineUnixMs,
      new AbortController().signal,
      () => ended++,
    );
    assert.ok(outcome.kind === 'not-started' && outcome.unreachable && outcome.code === '', JSON.stringify(outcome));
    assert.match(outcome.message, /ECONNREFUSED|No connection established/);
    assert.equal(ended, 1);
  });

  test(`${name}: over mutual TLS with a client certificate (and a server name); without one, with the wrong name or CA: this balancer's own fault (tls), not unreachable; in plain text: unreachable`, async (t) => {
    const { file } = makeCertificates(t);
    const fleet = await startFleet(t);
    const worker = await fleet.addWorker(
      { cluster: 'baseline', maxParallelism: 2, tls: { certFile: file('server.pem'), keyFile: file('server.key'), clientCaFile: file('ca.pem') } },
      testHandlers().handlers,
    );
    const run = async (tls: WorkerCallsTestOptions['tls']) => {
      const calls = create({ ...(tls ? { tls } : {}) });
      t.after(() => calls.closeAll());
      const deadlineUnixMs = Date.now() + 5000;
      return calls.execute(
        worker.address,
        executeRequest(worker, 'echo', Buffer.from('over tls'), deadlineUnixMs),
        deadlineUnixMs,
        new AbortController().signal,
      );
    };
    const client = { caFile: file('ca.pem'), certFile: file('client.pem'), keyFile: file('client.key') };
    for (const tls of [client, { ...client, serverName: 'localhost' }]) {
      const outcome = await run(tls);
      assert.ok(outcome.kind === 'done' && Buffer.from(outcome.response.result!).toString() === 'over tls', JSON.stringify(outcome));
    }
    // The worker is up: what failed is this side's certificate, CA or name, which must eject no one.
    for (const tls of [{ caFile: file('ca.pem') }, { ...client, serverName: 'wrong.example' }, { ...client, caFile: file('other-ca.pem') }]) {
      const outcome = await run(tls);
      assert.ok(
        outcome.kind === 'not-started' && outcome.code === '' && !outcome.unreachable && outcome.ownFault === 'tls',
        `${JSON.stringify(tls)}: ${JSON.stringify(outcome)}`,
      );
    }
    // Plain text to a TLS worker: the worker only closes the connection, which looks like a worker going away.
    const plain = await run(undefined);
    assert.ok(plain.kind === 'not-started' && plain.code === '' && plain.unreachable && plain.ownFault === undefined, JSON.stringify(plain));
    assert.equal(worker.stats().completed, 2, 'only the trusted calls ran');
  });

  test(`${name}: a worker that accepts connections and never sends a byte: unreachable within the connect and first-byte bounds, not at the deadline`, async (t) => {
    const silent = net.createServer(() => undefined);
    const sockets = new Set<net.Socket>();
    silent.on('connection', (socket) => sockets.add(socket));
    await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
    t.after(() => {
      for (const socket of sockets) socket.destroy();
      silent.close();
    });
    const address = `127.0.0.1:${(silent.address() as net.AddressInfo).port}`;
    const calls = create({ connectTimeoutMs: 300, firstByteTimeoutMs: 300 });
    t.after(() => calls.closeAll());
    for (let i = 0; i < 2; i++) {
      const deadlineUnixMs = Date.now() + 10_000;
      const startedAt = performance.now();
      const outcome = await calls.execute(
        address,
        executeRequest({ workerId: 'w', cluster: 'baseline' }, 'echo', Buffer.alloc(0), deadlineUnixMs),
        deadlineUnixMs,
        new AbortController().signal,
      );
      const tookMs = performance.now() - startedAt;
      assert.ok(outcome.kind === 'not-started' && outcome.unreachable && outcome.code === '', `call ${i}: ${JSON.stringify(outcome)}`);
      assert.match(outcome.message, /first byte|sent nothing/);
      assert.ok(
        tookMs >= 250 && tookMs < 2000,
        `call ${i} failed after ${Math.round(tookMs)} ms: within connect + first-byte time (600 ms), far from the 10 s deadline`,
      );
    }
    assert.ok(sockets.size >= 1, 'it did connect');
  });

  test(`${name}: a worker process killed mid-task: lost; restarted on the same port: the next call works`, async (t) => {
    const port = await freePort();
    const keyPrefix = uniquePrefix('h2-kill');
    const start = () =>
      spawnReady(t, cliPaths.worker, [
        '--cluster',
        'baseline',
        '--worker-id',
        'killed',
        '--handlers',
        handlersPaths.demo,
        '--port',
        String(port),
        '--max-parallelism',
        '2',
        '--redis-url',
        testRedisUrl,
        '--key-prefix',
        keyPrefix,
        '--heartbeat-interval-ms',
        '200',
      ]);
    const calls = create();
    t.after(() => calls.closeAll());
    const worker = { workerId: 'killed', cluster: 'baseline' };
    const address = `127.0.0.1:${port}`;
    const call = (integration: string, payload: Buffer) => {
      const deadlineUnixMs = Date.now() + 10_000;
      let started = false;
      const outcome = calls.execute(
        address,
        executeRequest(worker, integration, payload, deadlineUnixMs),
        deadlineUnixMs,
        new AbortController().signal,
        () => (started = true),
      );
      return { outcome, started: () => started };
    };
    const first = await start();
    assert.equal((await call('echo', Buffer.from('a')).outcome).kind, 'done');
    const long = call('bank-a', Buffer.from(JSON.stringify({ sleepMs: 30_000 })));
    for (let waited = 0; !long.started(); waited += 10) {
      assert.ok(waited < 5000, 'the task did not start');
      await sleep(10);
    }
    await first.kill('SIGKILL');
    const lost = await long.outcome;
    assert.equal(lost.kind, 'lost', JSON.stringify(lost));
    await start();
    const again = await call('echo', Buffer.from('b')).outcome;
    assert.ok(again.kind === 'done' && Buffer.from(again.response.result!).toString() === 'b', JSON.stringify(again));
  });
}
