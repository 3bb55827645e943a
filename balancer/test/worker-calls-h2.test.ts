/**
 * What only WorkerCallsH2 has to show (the outcomes both implementations share are in
 * worker-calls.test.ts): its sessions leave the cache when they fail, keepalive ends calls on a
 * dead connection, many calls share one session, the TLS settings are checked at start, and
 * answers no Headroom worker gives (a foreign server or proxy in between) still end clearly.
 */
import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import * as http2 from 'node:http2';
import * as net from 'node:net';
import { http2ClientTls } from '@headroom/proto';
import { eventually, startFleet } from '@headroom/testkit';
import { WorkerCallsH2 } from '../src/worker-calls-h2';
import { makeCertificates } from './certificates';
import { executeRequest } from './worker-calls-kit';

function workerCalls(t: TestContext, keepaliveTimeMs = 100, firstByteTimeoutMs = 2000): WorkerCallsH2 {
  const calls = new WorkerCallsH2({
    maxSendMessageBytes: 1 << 20,
    maxChannels: 4,
    tls: undefined,
    keepaliveTimeMs,
    connectTimeoutMs: 2000,
    firstByteTimeoutMs,
  });
  t.after(() => calls.closeAll());
  return calls;
}

function execute(calls: WorkerCallsH2, address: string, timeoutMs = 10_000, worker = { workerId: 'w', cluster: 'baseline' }, integration = 'echo') {
  const deadlineUnixMs = Date.now() + timeoutMs;
  return calls.execute(address, executeRequest(worker, integration, Buffer.from('payload'), deadlineUnixMs), deadlineUnixMs, new AbortController().signal);
}

/** Listens on port 0; when the test ends, closes the server and whatever connections it still has. */
async function listen(t: TestContext, server: net.Server | http2.Http2Server): Promise<string> {
  const connections = new Set<{ destroy(): void }>();
  server.on(server instanceof net.Server ? 'connection' : 'session', (connection: net.Socket | http2.ServerHttp2Session) => {
    connections.add(connection);
    connection.on('error', () => undefined);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  t.after(() => {
    connections.forEach((connection) => connection.destroy());
    return new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return `127.0.0.1:${(server.address() as net.AddressInfo).port}`;
}

test('many calls at once share one session to a worker; a worker that stops takes its session out of the cache', async (t) => {
  const fleet = await startFleet(t);
  const worker = await fleet.addWorker({ cluster: 'baseline', maxParallelism: 200 }, { echo: async (task) => task.payload });
  const calls = workerCalls(t);
  const outcomes = await Promise.all(Array.from({ length: 200 }, () => execute(calls, worker.address, 10_000, worker)));
  assert.deepEqual(new Set(outcomes.map((o) => o.kind)), new Set(['done']));
  assert.equal(calls.size, 1);
  await worker.destroy();
  await eventually('the failed session left the cache', 2000, () => (calls.size === 0 ? true : undefined));
});

test('a keepalive ping due while the connection still connects (a busy event loop) leaves the connection alone', async (t) => {
  const fleet = await startFleet(t);
  const worker = await fleet.addWorker({ cluster: 'baseline', maxParallelism: 4 }, { echo: async (task) => task.payload });
  const calls = workerCalls(t, 1);
  const call = execute(calls, worker.address, 10_000, worker);
  // Busy past the keepalive period: the timers run before the connect event is read, as on a loaded machine.
  const busyUntil = performance.now() + 30;
  while (performance.now() < busyUntil);
  const outcome = await call;
  assert.equal(outcome.kind, 'done', JSON.stringify(outcome));
});

test('a connection that stops answering (no keepalive ack within 5 s) ends its calls: not-started, unreachable', async (t) => {
  // Accepts the connection and never says a word: a peer gone behind a firewall that drops packets.
  const blackHole = net.createServer();
  const address = await listen(t, blackHole);
  // The first-byte bound would end it sooner (worker-calls.test.ts): this one is about the keepalive.
  const calls = workerCalls(t, 100, 60_000);
  const startedAt = Date.now();
  const outcome = await execute(calls, address, 20_000);
  const tookMs = Date.now() - startedAt;
  assert.ok(outcome.kind === 'not-started' && outcome.unreachable && outcome.code === '', JSON.stringify(outcome));
  assert.match(outcome.message, /keepalive ping/);
  assert.ok(tookMs >= 5000 && tookMs < 8000, `ended after ${tookMs} ms: one ping period and its 5 s timeout`);
  assert.equal(calls.size, 0, 'the dead session left the cache');
});

test('answers no worker gives end clearly: a prefix split across frames, an HTTP error without gRPC status, a reset stream', async (t) => {
  const reply = { kind: 'split' as 'split' | 'http-503' | 'reset' };
  const server = http2.createServer();
  server.on('stream', (stream) => {
    stream.on('error', () => undefined);
    stream.resume();
    if (reply.kind === 'http-503') return stream.respond({ ':status': 503 }, { endStream: true });
    if (reply.kind === 'reset') return stream.close(http2.constants.NGHTTP2_INTERNAL_ERROR);
    stream.respond({ ':status': 200, 'content-type': 'application/grpc', 'headroom-started': '1' }, { waitForTrailers: true });
    stream.on('wantTrailers', () => stream.sendTrailers({ 'grpc-status': '0' }));
    // An ExecuteResponse { runMs: 0, workerId: "w" } (field 4, a string), its prefix in two DATA frames.
    const message = Buffer.from([0x22, 0x01, 0x77]);
    const framed = Buffer.concat([Buffer.from([0, 0, 0, 0, message.length]), message]);
    stream.write(framed.subarray(0, 2));
    setTimeout(() => stream.end(framed.subarray(2)), 20);
  });
  const address = await listen(t, server);
  const calls = workerCalls(t);
  const split = await execute(calls, address);
  assert.ok(split.kind === 'done' && split.response.workerId === 'w', JSON.stringify(split));
  reply.kind = 'http-503';
  assert.deepEqual(await execute(calls, address), { kind: 'not-started', unreachable: true, code: '', message: 'Received HTTP status code 503' });
  reply.kind = 'reset';
  const reset = await execute(calls, address);
  assert.ok(reset.kind === 'not-started' && !reset.unreachable && /RST_STREAM with code 2/.test(reset.message), JSON.stringify(reset));
  assert.equal(calls.size, 1, 'the session outlives the streams that failed');
});

test('TLS settings are read and checked when built: the errors name the setting', (t) => {
  const { file } = makeCertificates(t);
  assert.equal(http2ClientTls(undefined, 'workerTls'), undefined);
  const tls = http2ClientTls({ caFile: file('ca.pem'), certFile: file('client.pem'), keyFile: file('client.key'), serverName: 'localhost' }, 'workerTls')!;
  assert.ok(tls.ca.includes('BEGIN CERTIFICATE') && tls.cert && tls.key && tls.servername === 'localhost');
  assert.throws(() => http2ClientTls({ caFile: file('nope.pem') }, 'workerTls'), /workerTls\.caFile: cannot read .*nope\.pem/);
  assert.throws(() => http2ClientTls({ caFile: file('server.ext') }, 'workerTls'), /workerTls\.caFile: .*server\.ext is not a PEM file/);
  assert.throws(
    () => http2ClientTls({ caFile: file('ca.pem'), certFile: file('client.pem'), keyFile: file('server.key') }, 'workerTls'),
    /workerTls: .*key values mismatch/,
  );
});

test('an address that does not parse is not-started, unreachable, and leaves nothing open', async (t) => {
  const calls = workerCalls(t);
  const outcome = await execute(calls, 'not an address');
  assert.ok(outcome.kind === 'not-started' && outcome.unreachable && outcome.code === '', JSON.stringify(outcome));
  assert.match(outcome.message, /Invalid URL/);
  assert.equal(calls.size, 0);
});
