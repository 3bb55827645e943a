/**
 * Worker.Execute (and Worker.Profile) messages the worker cannot read, from a raw client that shares nothing with the
 * balancer: over maxReceiveMessageBytes, or not protobuf. INVALID_ARGUMENT with
 * HR_ERR_INVALID_REQUEST (never RESOURCE_EXHAUSTED, the status of "this worker is full, try
 * another", nor INTERNAL), a message saying what was wrong, and no handler runs.
 */
import { test } from 'node:test';
import * as assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { deleteKeysUnder, testRedisUrl, uniquePrefix } from '@headroom/testkit';
import { connectRedis } from '@headroom/fleet';
import { createWorker, type HandlerMap } from '../src/index';

const identity = (bytes: Buffer) => bytes;

function rawExecute(client: grpc.Client, bytes: Buffer, method = 'Execute'): Promise<{ status: grpc.status; code: string | undefined; details: string }> {
  return new Promise((resolve) => {
    client.makeUnaryRequest(`/headroom.v1.Worker/${method}`, identity, identity, bytes, { deadline: Date.now() + 15_000 }, (error) =>
      resolve({ status: error?.code ?? grpc.status.OK, code: error?.metadata?.get('headroom-error-code')[0]?.toString(), details: error?.details ?? '' }),
    );
  });
}

test('an Execute message over maxReceiveMessageBytes, or not protobuf, gets INVALID_ARGUMENT with HR_ERR_INVALID_REQUEST and runs nothing', async (t) => {
  const redis = connectRedis(testRedisUrl);
  await new Promise((resolve) => redis.once('ready', resolve));
  const keyPrefix = uniquePrefix('worker');
  let ran = 0;
  const handlers: HandlerMap = {
    '*': async () => {
      ran++;
      return Buffer.alloc(0);
    },
  };
  const maxReceiveMessageBytes = 10_000;
  const worker = await createWorker({ cluster: 'c', workerId: 'w', maxReceiveMessageBytes }, { redis, handlers, ledger: { keyPrefix } });
  const client = new grpc.Client(worker.address, grpc.credentials.createInsecure());
  t.after(async () => {
    client.close();
    await worker.destroy();
    await deleteKeysUnder(redis, keyPrefix);
    redis.disconnect();
  });

  const cases: { name: string; bytes: Buffer; details: RegExp }[] = [
    // ExecuteRequest { task { payload: 20 000 bytes } }, hand-encoded.
    {
      name: 'over the limit',
      bytes: Buffer.concat([Buffer.from([0x0a, 0xa4, 0x9c, 0x01, 0x2a, 0xa0, 0x9c, 0x01]), Buffer.alloc(20_000)]),
      details: /larger than the limit of 10000 bytes \(maxReceiveMessageBytes\)/,
    },
    { name: 'garbage', bytes: Buffer.from([0xff, 0xff, 0xff]), details: /not a valid headroom\.v1\.ExecuteRequest/ },
  ];
  for (const { name, bytes, details } of cases) {
    const answer = await rawExecute(client, bytes);
    const where = `${name}: ${grpc.status[answer.status]} ${answer.code} "${answer.details}"`;
    assert.equal(answer.status, grpc.status.INVALID_ARGUMENT, where);
    assert.equal(answer.code, 'HR_ERR_INVALID_REQUEST', where);
    assert.match(answer.details, details, where);
  }
  // A message under the limit is read and checked as usual (here: it has no lease).
  const small = await rawExecute(client, Buffer.from([0x0a, 0x00]));
  assert.equal(small.status, grpc.status.INVALID_ARGUMENT);
  assert.match(small.details, /leaseId is missing|task is missing/);
  assert.equal(ran, 0, 'no handler ran');

  // Worker.Profile the same way: the caller's mistake, not the worker's (INTERNAL before).
  const profileCases: { name: string; bytes: Buffer; details: RegExp }[] = [
    {
      name: 'Profile over the limit',
      bytes: Buffer.concat([Buffer.from([0x0a, 0xa0, 0x9c, 0x01]), Buffer.alloc(20_000, 0x61)]),
      details: /larger than the limit of 10000 bytes \(maxReceiveMessageBytes\)/,
    },
    { name: 'Profile garbage', bytes: Buffer.from([0xff, 0xff, 0xff]), details: /not a valid headroom\.v1\.ProfileRequest/ },
  ];
  for (const { name, bytes, details } of profileCases) {
    const answer = await rawExecute(client, bytes, 'Profile');
    const where = `${name}: ${grpc.status[answer.status]} ${answer.code} "${answer.details}"`;
    assert.equal(answer.status, grpc.status.INVALID_ARGUMENT, where);
    assert.equal(answer.code, 'HR_ERR_INVALID_REQUEST', where);
    assert.match(answer.details, details, where);
  }
});
