#!/usr/bin/env node
/**
 * A proxyless front, for the benchmarks: a process of its own that stands for an application
 * using @headroom/client/proxyless. It takes tasks from the load generator as Balancer.Submit
 * calls (so the generator calls it as it calls a balancer) and runs each through the proxyless
 * client, which reserves the slot in the ledger and calls the worker itself. The gRPC hop from
 * the generator stands for the application's own call into the client library.
 *   node bench/dist/src/fleet/proxyless-front.js --redis-url redis://127.0.0.1:6379 \
 *     --options '{"ledger":{"keyPrefix":"bench:x"},"policy":"least-loaded"}'
 * --options: the proxyless client's options (ProxylessClientOptions, validated by its schema).
 * Prints {"event":"ready","address":"127.0.0.1:<port>"} once it serves; SIGTERM: stops serving,
 * closes the client (running tasks finish), exits.
 */
import * as grpc from '@grpc/grpc-js';
import { parseArgs } from 'node:util';
import { HeadroomClientError, TaskFailedError } from '@headroom/client';
import { createProxylessClient, type ProxylessClient, type SubmitRequest } from '@headroom/client/proxyless';
import { connectRedis, waitUntilReady } from '@headroom/fleet';
import { BalancerService, metadataKeys, type BalancerHandlers, type Placement, type SubmitResponse, type Task__Output } from '@headroom/proto';
import { grpcStatusOf } from '@headroom/balancer';

const usage = "Usage: proxyless-front --redis-url URL --options '<ProxylessClientOptions as JSON>'";

/** The generator's task as the client's request: the deadline from now, as the balancer counts it. */
function requestOf(task: Task__Output): SubmitRequest {
  return {
    id: task.id,
    key: task.key,
    integration: task.integration,
    priority: task.priority === 'USER_PRESENT' ? 'USER_PRESENT' : 'BACKGROUND',
    payload: task.payload,
    deadlineMs: Math.max(1, Math.round(Number(task.deadlineUnixMs) - Date.now())),
    idempotent: task.idempotent,
  };
}

function placementOf(placement: { cluster: string; workerId: string; queueWaitMs: number; runMs: number; workerAttempts: number }): Placement {
  return { ...placement, attempts: placement.workerAttempts, workerQueueWaitMs: 0 };
}

/** What the balancer would answer: a handler's failure in the response, any other failure as a coded gRPC status. */
async function answer(client: ProxylessClient, task: Task__Output): Promise<{ response: SubmitResponse } | { error: Partial<grpc.StatusObject> }> {
  try {
    const result = await client.submit(requestOf(task));
    return { response: { taskId: result.taskId, result: result.result, placement: placementOf(result.placement) } };
  } catch (error) {
    if (error instanceof TaskFailedError && error.placement)
      return { response: { taskId: task.id, error: { code: error.code, message: error.message }, placement: error.placement } };
    const code = error instanceof HeadroomClientError ? error.code : 'HR_ERR_INTERNAL';
    const metadata = new grpc.Metadata();
    metadata.set(metadataKeys.errorCode, code);
    if (error instanceof HeadroomClientError && error.retryAfterMs !== undefined) metadata.set(metadataKeys.retryAfterMs, String(error.retryAfterMs));
    return { error: { code: grpcStatusOf(code), details: error instanceof Error ? error.message : String(error), metadata } };
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({ options: { 'redis-url': { type: 'string' }, options: { type: 'string' } }, strict: true });
  const redisUrl = values['redis-url'];
  if (!redisUrl || !values.options) throw new Error(`--redis-url and --options are required\n${usage}`);
  const options = JSON.parse(values.options) as unknown;
  const redis = connectRedis(redisUrl);
  const subscriber = connectRedis(redisUrl, { enableOfflineQueue: true, enableAutoPipelining: false });
  await waitUntilReady(redis, redisUrl);
  // The schema checks the options and names any bad one (ConfigError).
  const client = await createProxylessClient(options as Parameters<typeof createProxylessClient>[0], { redis, subscriber });
  const server = new grpc.Server();
  const handlers: BalancerHandlers = {
    Submit: (call, callback) => {
      const task = call.request.task;
      if (!task) return callback({ code: grpc.status.INVALID_ARGUMENT, details: 'task: missing' });
      void answer(client, task).then((outcome) => ('response' in outcome ? callback(null, outcome.response) : callback(outcome.error)));
    },
  };
  server.addService(BalancerService.service, handlers);
  const port = await new Promise<number>((resolve, reject) =>
    server.bindAsync('127.0.0.1:0', grpc.ServerCredentials.createInsecure(), (error, bound) => (error ? reject(error) : resolve(bound))),
  );
  process.stdout.write(`${JSON.stringify({ event: 'ready', address: `127.0.0.1:${port}`, balancerId: client.balancerId })}\n`);
  const stop = async () => {
    await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
    await client.close();
    redis.disconnect();
    subscriber.disconnect();
  };
  process.once('SIGTERM', () => void stop().then(() => process.exit(0)));
  process.once('SIGINT', () => void stop().then(() => process.exit(0)));
}

main().catch((error: unknown) => {
  process.stderr.write(`proxyless-front: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
