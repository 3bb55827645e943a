import { test, type TestContext } from 'node:test';
import * as assert from 'node:assert/strict';
import * as grpc from '@grpc/grpc-js';
import { deleteKeysUnder, testRedisUrl, uniquePrefix } from '@headroom/testkit';
import { connectRedis } from '@headroom/fleet';
import { WorkerService, type ProfileRequest, type ProfileResponse__Output, type WorkerClient } from '@headroom/proto';
import { createWorker, type Worker } from '../src/index';

async function startWorker(t: TestContext): Promise<{ worker: Worker; client: WorkerClient }> {
  const redis = connectRedis(testRedisUrl);
  await new Promise((resolve) => redis.once('ready', resolve));
  const keyPrefix = uniquePrefix('profiler');
  const worker = await createWorker({ cluster: 'c', workerId: 'profiled' }, { redis, handlers: { echo: async () => 'ok' }, ledger: { keyPrefix } });
  const client = new WorkerService(worker.address, grpc.credentials.createInsecure(), { 'grpc.max_receive_message_length': -1 }) as WorkerClient;
  t.after(async () => {
    client.close();
    await worker.destroy();
    await deleteKeysUnder(redis, keyPrefix);
    redis.disconnect();
  });
  return { worker, client };
}

function profile(client: WorkerClient, request: ProfileRequest): Promise<{ error: grpc.ServiceError | null; response: ProfileResponse__Output | undefined }> {
  return new Promise((resolve) => client.profile(request, { deadline: Date.now() + 10_000 }, (error, response) => resolve({ error, response })));
}

const codeOf = (error: grpc.ServiceError | null) => error?.metadata.get('headroom-error-code')[0];

test('Profile answers a .cpuprofile of the process; one at a time; bad requests are refused with a code', async (t) => {
  const { client } = await startWorker(t);
  const first = profile(client, { workerId: 'profiled', durationMs: 300 });
  await new Promise((resolve) => setTimeout(resolve, 50));
  const meanwhile = await profile(client, { workerId: 'profiled', durationMs: 300 });
  assert.equal(meanwhile.error?.code, grpc.status.RESOURCE_EXHAUSTED);
  assert.equal(codeOf(meanwhile.error), 'HR_ERR_PROFILE_RUNNING');
  assert.ok(Number(meanwhile.error?.metadata.get('retry-after-ms')[0]) <= 300);

  const { error, response } = await first;
  assert.equal(error, null);
  const cpuprofile = JSON.parse(response!.cpuprofile.toString('utf8'));
  assert.ok(Array.isArray(cpuprofile.nodes) && cpuprofile.nodes.length > 0);
  assert.equal(cpuprofile.samples.length, cpuprofile.timeDeltas.length);
  assert.ok(cpuprofile.endTime - cpuprofile.startTime >= 250_000, 'sampled about durationMs (µs)');

  for (const [request, why] of [
    [{ workerId: 'profiled', durationMs: 99 }, 'durationMs is 99'],
    [{ workerId: 'profiled', durationMs: 60_001 }, 'durationMs is 60001'],
    [{ workerId: 'someone-else', durationMs: 500 }, 'workerId is "someone-else"'],
  ] as const) {
    const refused = await profile(client, request);
    assert.equal(refused.error?.code, grpc.status.INVALID_ARGUMENT);
    assert.equal(codeOf(refused.error), 'HR_ERR_INVALID_REQUEST');
    assert.match(refused.error!.details, new RegExp(why));
  }
  const again = await profile(client, { workerId: 'profiled', durationMs: 100 });
  assert.equal(again.error, null, 'the profiler is free again after a profile');
});

test('a worker that stops ends its running profile at once', async (t) => {
  const { worker, client } = await startWorker(t);
  const running = profile(client, { workerId: 'profiled', durationMs: 30_000 });
  await new Promise((resolve) => setTimeout(resolve, 100));
  const startedAt = Date.now();
  await worker.close();
  const { error } = await running;
  assert.ok(error, 'the profile was not answered');
  assert.ok(Date.now() - startedAt < 5000, 'close did not wait for the profile');
});
