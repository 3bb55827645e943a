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
        (methods.check as CheckMethod).call(health, { service }, { deadline: Date.now() + 5000 }, (error, reply) => resolve(error ? { code: error.code, details: error.details } : { status: reply!.status })),
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
      /^headroom_balancer_tasks_total\{cluster="baseline",priority="user_present",outcome="HR_ERR_CANCELLED"\} 2$/m.test(await fleet.balancers[0]!.registry.metrics()) ? true : undefined,
    );
  });

  test(`${serverTransport}: a request that is not gRPC gets HTTP 415; a taken port stops the start`, async (t) => {
    const fleet = await startFleet(t);
    const balancer = await fleet.addBalancer({ serverTransport });
    const session = http2.connect(`http://${balancer.address}`);
    t.after(() => session.close());
    const httpStatus = await new Promise<number | undefined>((resolve, reject) => {
      const request = session.request({ ':method': 'POST', ':path': '/headroom.v1.Balancer/Submit', 'content-type': 'application/json' });
      request.on('response', (headers) => resolve(headers[':status']));
      request.on('error', reject);
      request.end('{}');
    });
    assert.equal(httpStatus, 415);

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
  const respond = (headers: http2.OutgoingHttpHeaders, body: Buffer) =>
    new Promise<http2.IncomingHttpHeaders>((resolve, reject) => {
      const request = session.request(headers);
      request.on('response', (response, flags) => {
        if (flags & http2.constants.NGHTTP2_FLAG_END_STREAM) resolve(response);
        else request.on('trailers', resolve);
      });
      request.on('data', () => undefined);
      request.on('error', reject);
      // Node ends a GET's request side itself.
      if (!request.writableEnded) request.end(body);
    });
  const get = await respond({ ':method': 'GET', ':path': '/headroom.v1.Balancer/Submit', 'content-type': 'application/grpc' }, Buffer.alloc(0));
  assert.equal(get[':status'], 405);
  const compressed = await respond({ ':method': 'POST', ':path': '/headroom.v1.Balancer/Submit', 'content-type': 'application/grpc', 'grpc-encoding': 'gzip' }, Buffer.from([1, 0, 0, 0, 1, 0]));
  assert.equal(compressed['grpc-status'], String(grpc.status.UNIMPLEMENTED));
  assert.match(String(compressed['grpc-message']), /compressed/);
  session.close();

  await balancer.close();
  assert.deepEqual(seen, ['SERVING', 'NOT_SERVING']);
  assert.equal(await ended, grpc.status.UNAVAILABLE);
});
