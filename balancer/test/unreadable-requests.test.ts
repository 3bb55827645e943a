/**
 * Balancer.Submit messages the server cannot read, sent by a client of its own that shares
 * nothing with ours (raw bytes over @grpc/grpc-js's generic client): over the receive limit, or
 * not protobuf. Both are the client's mistake: INVALID_ARGUMENT with headroom-error-code
 * HR_ERR_INVALID_TASK (never RESOURCE_EXHAUSTED, which says "retry", nor INTERNAL), a message
 * saying what was wrong, and no worker runs anything.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { startFleet } from '@headroom/testkit';

const maxPayloadBytes = 1000;
/** maxPayloadBytes plus the room the balancer keeps for the other fields. */
const receiveLimitBytes = maxPayloadBytes + 64 * 1024;

const identity = (bytes: Buffer) => bytes;
const RawBalancer = grpc.makeGenericClientConstructor(
  {
    Submit: {
      path: '/headroom.v1.Balancer/Submit',
      requestStream: false,
      responseStream: false,
      requestSerialize: identity,
      requestDeserialize: identity,
      responseSerialize: identity,
      responseDeserialize: identity,
    },
  },
  'Balancer',
);

interface RawAnswer {
  status: grpc.status;
  details: string;
  code: string | undefined;
  response: Buffer | undefined;
}

function rawSubmit(client: grpc.Client, bytes: Buffer): Promise<RawAnswer> {
  return new Promise((resolve) => {
    client.makeUnaryRequest('/headroom.v1.Balancer/Submit', identity, identity, bytes, { deadline: Date.now() + 15_000 }, (error, response) =>
      resolve({
        status: error?.code ?? grpc.status.OK,
        details: error?.details ?? '',
        code: error?.metadata?.get('headroom-error-code')[0]?.toString(),
        response: response ?? undefined,
      }),
    );
  });
}

/** Protobuf by hand: a length-delimited field. */
function field(number: number, bytes: Buffer): Buffer {
  return Buffer.concat([varint((number << 3) | 2), varint(bytes.length), bytes]);
}

function varint(value: number): Buffer {
  const bytes: number[] = [];
  while (value > 0x7f) {
    bytes.push((value & 0x7f) | 0x80);
    value >>>= 7;
  }
  bytes.push(value);
  return Buffer.from(bytes);
}

/** SubmitRequest { task { id, key, integration: "bank-a", priority: BACKGROUND, payload } }. */
function submitRequest(id: string, payload: Buffer): Buffer {
  const task = Buffer.concat([
    field(1, Buffer.from(id)),
    field(2, Buffer.from(`key-${id}`)),
    field(3, Buffer.from('bank-a')),
    Buffer.from([4 << 3, 2]),
    field(5, payload),
  ]);
  return field(1, task);
}

/** A SubmitRequest of exactly `totalBytes` (its payload is JSON the demo handler accepts, padded with spaces). */
function submitRequestOfSize(id: string, totalBytes: number): Buffer {
  const payloadOf = (length: number) => Buffer.from('{"sleepMs":0}'.padEnd(length, ' '));
  let payloadBytes = totalBytes - submitRequest(id, Buffer.alloc(0)).length;
  // The length prefixes grow with the payload: shrink it until the whole fits.
  while (submitRequest(id, payloadOf(payloadBytes)).length > totalBytes) payloadBytes--;
  const bytes = submitRequest(id, payloadOf(payloadBytes));
  assert.equal(bytes.length, totalBytes);
  return bytes;
}

test('a Submit message over the receive limit, or not protobuf at all, gets INVALID_ARGUMENT with HR_ERR_INVALID_TASK and runs nothing', async (t) => {
  const fleet = await startFleet(t);
  const worker = await fleet.addWorker({ cluster: 'baseline', maxParallelism: 2 });
  const balancer = await fleet.addBalancer({ maxPayloadBytes });
  const client = new RawBalancer(balancer.address, grpc.credentials.createInsecure());
  t.after(() => client.close());

  const cases: { name: string; bytes: Buffer; details: RegExp }[] = [
    {
      name: 'far over the limit',
      bytes: submitRequest('huge', Buffer.alloc(200_000)),
      details: new RegExp(`larger than the limit of ${receiveLimitBytes} bytes \\(maxPayloadBytes ${maxPayloadBytes}`),
    },
    {
      name: 'one byte over the limit',
      bytes: submitRequestOfSize('over', receiveLimitBytes + 1),
      details: new RegExp(`larger than the limit of ${receiveLimitBytes} bytes`),
    },
    {
      name: 'garbage',
      bytes: Buffer.from([0xff, 0xff, 0xff]),
      details: /request: the message is not a valid headroom\.v1\.SubmitRequest \(a headroom\.v1\.Task/,
    },
    { name: 'a truncated message', bytes: submitRequest('cut', Buffer.from('{}')).subarray(0, 10), details: /not a valid headroom\.v1\.SubmitRequest/ },
    // At the limit the message is read, and validation names the payload.
    {
      name: 'exactly at the limit',
      bytes: submitRequestOfSize('at', receiveLimitBytes),
      details: new RegExp(`task\\.payload: \\d+ bytes, the limit is ${maxPayloadBytes} bytes`),
    },
  ];
  for (const { name, bytes, details } of cases) {
    const answer = await rawSubmit(client, bytes);
    const where = `${name} (${bytes.length} bytes): ${grpc.status[answer.status]} ${answer.code} "${answer.details}"`;
    assert.equal(answer.status, grpc.status.INVALID_ARGUMENT, where);
    assert.equal(answer.code, 'HR_ERR_INVALID_TASK', where);
    assert.match(answer.details, details, where);
  }
  assert.equal(worker.stats().completed + worker.stats().failed, 0, 'no worker ran anything');
  assert.equal(balancer.stats().failedByCode.HR_ERR_INVALID_TASK, cases.length, 'each was counted as an invalid task');
  assert.match(
    await balancer.registry.metrics(),
    new RegExp(`^headroom_balancer_tasks_total\\{cluster="none",integration="none",priority="none",outcome="HR_ERR_INVALID_TASK"\\} ${cases.length}$`, 'm'),
  );

  // A message with the largest payload accepted is read, validated and run as usual.
  const largest = submitRequest('largest', Buffer.from('{"sleepMs":0}'.padEnd(maxPayloadBytes, ' ')));
  const accepted = await rawSubmit(client, largest);
  assert.equal(accepted.status, grpc.status.OK, `${accepted.code} ${accepted.details}`);
  assert.ok(accepted.response!.includes(Buffer.from('largest')), 'the answer names the task');
  assert.equal(worker.stats().completed, 1);
  // The same client still gets the same coded answer afterwards.
  assert.equal((await rawSubmit(client, Buffer.from([0xff]))).code, 'HR_ERR_INVALID_TASK');
});
