/**
 * What a client sees of the balancer's server, for each server transport (grpc-js, and gRPC
 * framed by hand on node:http2): health (Check, Watch, NOT_SERVING on close), an unknown method,
 * the client's deadline and cancellation reaching the dispatch, a request that is not gRPC, and a
 * taken port. The other balancer tests run against either with HEADROOM_TEST_SERVER_TRANSPORT.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as http2 from 'node:http2';
import * as grpc from '@grpc/grpc-js';
import { healthService } from '@headroom/proto';
import { eventually, startFleet, submit, task } from '@headroom/testkit';
import type { HandlerMap } from '@headroom/worker';

const HealthClient = grpc.makeGenericClientConstructor(healthService, 'Health');
type HealthReply = { status: string };
type CheckMethod = (request: { service: string }, options: grpc.CallOptions, callback: (error: grpc.ServiceError | null, reply?: HealthReply) => void) => void;
type WatchMethod = (request: { service: string }) => grpc.ClientReadableStream<HealthReply>;

const identity = (bytes: Buffer) => bytes;

interface RawAnswer {
  httpStatus: number | undefined;
  grpcStatus: string | undefined;
  grpcMessage: string | undefined;
}

/** One request over a raw HTTP/2 stream: the status headers, or trailers, it got back. */
function rawRequest(session: http2.ClientHttp2Session, headers: http2.OutgoingHttpHeaders, body: Buffer): Promise<RawAnswer> {
  return new Promise((resolve, reject) => {
    const request = session.request(headers);
    let httpStatus: number | undefined;
    const settle = (fields: http2.IncomingHttpHeaders) =>
      resolve({
        httpStatus,
        grpcStatus: fields['grpc-status'] as string | undefined,
        grpcMessage: fields['grpc-message'] === undefined ? undefined : decodeURI(String(fields['grpc-message'])),
      });
    request.on('response', (response, flags) => {
      httpStatus = response[':status'];
      if (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) settle(response);
      else request.on('trailers', settle);
    });
    request.on('data', () => undefined);
    request.on('error', reject);
    // Node ends a GET's request side itself.
    if (!request.writableEnded) request.end(body);
  });
}

/** gRPC framing: the 5-byte prefix and the message. */
const framed = (message: Buffer) => Buffer.concat([Buffer.from([0, 0, 0, 0, message.length]), message]);

/** A handler that runs until its task is aborted, counting the aborts. */
function untilAborted(counter: { aborted: number }): HandlerMap {
  return {
    '*': (_task, signal) =>
      new Promise((_resolve, reject) =>
        signal.addEventListener('abort', () => {
          counter.aborted++;
          reject(signal.reason);
        }),
      ),
  };
}

for (const serverTransport of ['grpc-js', 'http2'] as const) {
  test(`${serverTransport}: health Check and Watch, SERVING then NOT_SERVING on close; unknown services and methods`, async (t) => {
    const fleet = await startFleet(t);
    await fleet.addWorker({ cluster: 'baseline' });
    const balancer = await fleet.addBalancer({ serverTransport });
    const health = new HealthClient(balancer.address, grpc.credentials.createInsecure());
    t.after(() => health.close());
    const methods = health as unknown as Record<string, unknown>;
    const check = (service: string) =>
      new Promise<{ status?: string; code?: grpc.status; details?: string }>((resolve) =>
        (methods.check as CheckMethod).call(health, { service }, { deadline: Date.now() + 5000 }, (error, reply) =>
          resolve(error ? { code: error.code, details: error.details } : { status: reply!.status }),
        ),
      );
    assert.deepEqual(await check(''), { status: 'SERVING' });
    assert.deepEqual(await check('headroom.v1.Balancer'), { status: 'SERVING' });
    assert.deepEqual(await check('nope'), { code: grpc.status.NOT_FOUND, details: 'Health status unknown for service nope' });

    const watch = (methods.watch as WatchMethod).call(health, { service: 'headroom.v1.Balancer' });
    const seen: string[] = [];
    watch.on('data', (reply: HealthReply) => {
      seen.push(reply.status);
      // Off once it has seen the close: grpc-js's tryShutdown waits for every open call.
      if (reply.status === 'NOT_SERVING') watch.cancel();
    });
    watch.on('error', () => undefined);
    await eventually('the watch sees SERVING', 2000, () => (seen.length === 1 ? true : undefined));

    const raw = new grpc.Client(balancer.address, grpc.credentials.createInsecure());
    t.after(() => raw.close());
    const unknown = await new Promise<grpc.ServiceError | null>((resolve) =>
      raw.makeUnaryRequest('/headroom.v1.Balancer/Frobnicate', identity, identity, Buffer.alloc(0), { deadline: Date.now() + 5000 }, (error) => resolve(error)),
    );
    assert.equal(unknown?.code, grpc.status.UNIMPLEMENTED);
    assert.equal(unknown?.details, 'The server does not implement the method /headroom.v1.Balancer/Frobnicate');

    await balancer.close();
    assert.deepEqual(seen, ['SERVING', 'NOT_SERVING']);
    const after = await submit(fleet.clients[0]!, task(), 2000);
    assert.ok(!after.ok && after.status === grpc.status.UNAVAILABLE, JSON.stringify(after));
  });

  test(`${serverTransport}: the client's deadline passing aborts the dispatch and answers DEADLINE_EXCEEDED; so does a cancel`, async (t) => {
    const fleet = await startFleet(t, { keptForUserPresentShare: 0 });
    const counter = { aborted: 0 };
    await fleet.addWorker({ cluster: 'baseline', maxParallelism: 2 }, untilAborted(counter));
    await fleet.addBalancer({ serverTransport });
    // The task's own deadline is far off: only the gRPC deadline (grpc-timeout) can end it.
    const late = await submit(fleet.clients[0]!, task({ deadlineUnixMs: Date.now() + 30_000 }), 300);
    assert.ok(!late.ok && late.status === grpc.status.DEADLINE_EXCEEDED, JSON.stringify(late));
    await eventually('the handler saw the abort', 2000, () => (counter.aborted === 1 ? true : undefined));
    await eventually('the slot is free again', 2000, async () => ((await fleet.ledger.snapshot('baseline')).totalFree === 2 ? true : undefined));

    const call = fleet.clients[0]!.submit({ task: task() }, () => undefined);
    await eventually('the task runs', 2000, () => (fleet.workers[0]!.stats().inflight === 1 ? true : undefined));
    call.cancel();
    await eventually('the handler saw the cancel', 2000, () => (counter.aborted === 2 ? true : undefined));
    await eventually('counted as cancelled', 2000, async () =>
      /^headroom_balancer_tasks_total\{cluster="baseline",integration="bank-a",priority="user_present",outcome="HR_ERR_CANCELLED"\} 2$/m.test(
        await fleet.balancers[0]!.registry.metrics(),
      )
        ? true
        : undefined,
    );
  });

  test(`${serverTransport}: requests that are not one gRPC message get grpc-js's answers; a taken port stops the start`, async (t) => {
    const fleet = await startFleet(t);
    const balancer = await fleet.addBalancer({ serverTransport });
    const session = http2.connect(`http://${balancer.address}`);
    t.after(() => session.close());
    const submitHeaders = { ':method': 'POST', ':path': '/headroom.v1.Balancer/Submit', 'content-type': 'application/grpc', te: 'trailers' };
    const oneTask = framed(Buffer.from([0x0a, 0]));
    assert.deepEqual(await rawRequest(session, { ...submitHeaders, 'content-type': 'application/json' }, Buffer.from('{}')), {
      httpStatus: 415,
      grpcStatus: undefined,
      grpcMessage: undefined,
    });
    assert.deepEqual(await rawRequest(session, submitHeaders, Buffer.alloc(0)), {
      httpStatus: 200,
      grpcStatus: String(grpc.status.UNIMPLEMENTED),
      grpcMessage: 'Received no request message for server streaming method /headroom.v1.Balancer/Submit',
    });
    assert.deepEqual(await rawRequest(session, submitHeaders, Buffer.concat([oneTask, oneTask])), {
      httpStatus: 200,
      grpcStatus: String(grpc.status.UNIMPLEMENTED),
      grpcMessage: 'Received a second request message for server streaming method /headroom.v1.Balancer/Submit',
    });
    assert.deepEqual(await rawRequest(session, { ...submitHeaders, 'grpc-timeout': 'soon' }, oneTask), {
      httpStatus: 200,
      grpcStatus: String(grpc.status.INTERNAL),
      grpcMessage: 'Invalid grpc-timeout value "soon"',
    });
    // One message split byte by byte across DATA frames is read whole (an empty SubmitRequest: "task: missing").
    const split = await new Promise<RawAnswer>((resolve, reject) => {
      const request = session.request(submitHeaders);
      request.on('response', (response) =>
        resolve({ httpStatus: response[':status'], grpcStatus: response['grpc-status'] as string, grpcMessage: decodeURI(String(response['grpc-message'])) }),
      );
      request.on('error', reject);
      const bytes = framed(Buffer.alloc(0));
      for (const byte of bytes) request.write(Buffer.from([byte]));
      request.end();
    });
    assert.deepEqual(split, { httpStatus: 200, grpcStatus: String(grpc.status.INVALID_ARGUMENT), grpcMessage: 'HR_ERR_INVALID_TASK: task: missing' });

    const port = Number(balancer.address.split(':').pop());
    await assert.rejects(fleet.addBalancer({ serverTransport, port }), /No address added out of total 1 resolved errors: \[.*EADDRINUSE/);
    // The one that holds the port still serves.
    const expired = await submit(fleet.clients[0]!, task({ deadlineUnixMs: Date.now() - 1 }));
    assert.ok(!expired.ok && expired.code === 'HR_ERR_DEADLINE_EXCEEDED', JSON.stringify(expired));
  });
}

test('http2 only: a Watch still open is ended at close (it cannot hold the balancer open); GET and compressed messages are refused', async (t) => {
  const fleet = await startFleet(t);
  const balancer = await fleet.addBalancer({ serverTransport: 'http2' });
  const health = new HealthClient(balancer.address, grpc.credentials.createInsecure());
  t.after(() => health.close());
  const watch = ((health as unknown as Record<string, unknown>).watch as WatchMethod).call(health, { service: '' });
  const seen: string[] = [];
  watch.on('data', (reply: HealthReply) => seen.push(reply.status));
  const ended = new Promise<grpc.status>((resolve) => watch.on('error', (error: grpc.ServiceError) => resolve(error.code)));
  await eventually('the watch sees SERVING', 2000, () => (seen.length === 1 ? true : undefined));

  const session = http2.connect(`http://${balancer.address}`);
  t.after(() => session.close());
  const get = await rawRequest(session, { ':method': 'GET', ':path': '/headroom.v1.Balancer/Submit', 'content-type': 'application/grpc' }, Buffer.alloc(0));
  assert.equal(get.httpStatus, 405);
  const compressed = await rawRequest(
    session,
    { ':method': 'POST', ':path': '/headroom.v1.Balancer/Submit', 'content-type': 'application/grpc', 'grpc-encoding': 'gzip' },
    Buffer.from([1, 0, 0, 0, 1, 0]),
  );
  assert.equal(compressed.grpcStatus, String(grpc.status.UNIMPLEMENTED));
  assert.match(String(compressed.grpcMessage), /compressed/);
  session.close();

  await balancer.close();
  assert.deepEqual(seen, ['SERVING', 'NOT_SERVING']);
  assert.equal(await ended, grpc.status.UNAVAILABLE);
});
