import type { TestContext } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { eventually, testRedisUrl, uniquePrefix } from './redis';
import { deleteKeysUnder } from './redis-server';
import { Ledger, connectRedis, type LedgerOptions, type RedisConnection } from '@headroom/fleet';
import { BalancerService, type BalancerClient, type Task } from '@headroom/proto';
import { createWorker, type Worker, type WorkerOptions, type HandlerMap } from '@headroom/worker';
import { classifySubmitAnswer, demoHandlers, type SubmitAnswer } from '@headroom/sim';
import type { FlagClient } from '@headroom/flags';
import { createBalancer, type Balancer, type BalancerDependencies, type BalancerOptions } from '@headroom/balancer';

export interface Fleet {
  redis: RedisConnection;
  ledger: Ledger;
  ledgerOptions: LedgerOptions;
  workers: Worker[];
  balancers: Balancer[];
  clients: BalancerClient[];
  addWorker(options: WorkerOptions, handlers?: HandlerMap, flags?: FlagClient): Promise<Worker>;
  addBalancer(options?: BalancerOptions, flags?: FlagClient, logger?: BalancerDependencies['logger']): Promise<Balancer>;
}

export async function connected(url = testRedisUrl, subscriber = false): Promise<RedisConnection> {
  const redis = connectRedis(url, subscriber ? { enableOfflineQueue: true, enableAutoPipelining: false } : {});
  await new Promise((resolve) => redis.once('ready', resolve));
  return redis;
}

/**
 * The balancer's server transport the tests run against: HEADROOM_TEST_SERVER_TRANSPORT
 * (grpc-js or http2), or the balancer's default. A test's own serverTransport option wins.
 */
export function testServerTransport(): BalancerOptions['serverTransport'] {
  const transport = process.env.HEADROOM_TEST_SERVER_TRANSPORT;
  if (transport === undefined || transport === '') return undefined;
  if (transport !== 'grpc-js' && transport !== 'http2') throw new Error(`HEADROOM_TEST_SERVER_TRANSPORT: got "${transport}", expected grpc-js or http2`);
  return transport;
}

/** Workers and balancers in this process, on the shared Redis under a key prefix of their own. */
export async function startFleet(t: TestContext, ledgerOptions: LedgerOptions = {}, redisUrl = testRedisUrl): Promise<Fleet> {
  const options = { keyPrefix: uniquePrefix('fleet'), ...ledgerOptions };
  const redis = await connected(redisUrl);
  const fleet: Fleet = {
    redis,
    ledger: new Ledger(redis, options),
    ledgerOptions: options,
    workers: [],
    balancers: [],
    clients: [],
    async addWorker(workerOptions, handlers = demoHandlers, flags) {
      const worker = await createWorker({ heartbeatIntervalMs: 200, ...workerOptions }, { redis, handlers, ledger: options, ...(flags ? { flags } : {}) });
      fleet.workers.push(worker);
      return worker;
    },
    async addBalancer(balancerOptions = {}, flags, logger) {
      const subscriber = await connected(redisUrl, true);
      t.after(() => subscriber.disconnect());
      const serverTransport = testServerTransport();
      const balancer = await createBalancer(
        { heartbeatTimeoutMs: 1000, sweepIntervalMs: 200, ...(serverTransport ? { serverTransport } : {}), ...balancerOptions },
        { redis, subscriber, ledger: options, ...(flags ? { flags } : {}), ...(logger ? { logger } : {}) },
      );
      const client = new BalancerService(balancer.address, grpc.credentials.createInsecure());
      fleet.balancers.push(balancer);
      fleet.clients.push(client);
      return balancer;
    },
  };
  t.after(async () => {
    for (const client of fleet.clients) client.close();
    await Promise.all(fleet.balancers.map((b) => b.close()));
    await Promise.all(fleet.workers.map((w) => w.destroy()));
    if (redis.status === 'ready') {
      await deleteKeysUnder(redis, options.keyPrefix!);
    }
    redis.disconnect();
  });
  return fleet;
}

/** How Balancer.Submit ended (sim's one classification); `code` is '' when the error carries no headroom-error-code. */
export type SubmitResult = SubmitAnswer;

let taskCounter = 0;

/** bank-a tasks that run until the test lets each end, by task id. */
export function heldHandlers() {
  const waiting = new Map<string, () => void>();
  const handlers: HandlerMap = {
    'bank-a': (t) => new Promise<string>((resolve) => waiting.set(t.id, () => resolve(`done ${t.id}`))),
  };
  const finish = async (id: string) => {
    await eventually(`${id} to run`, 5000, () => (waiting.has(id) ? true : undefined));
    waiting.get(id)!();
  };
  return { handlers, waiting, finish };
}

export function task(overrides: Partial<Task> = {}): Task {
  taskCounter++;
  return { id: `task-${taskCounter}`, key: `account-${taskCounter}`, integration: 'bank-a', priority: 'USER_PRESENT', payload: Buffer.alloc(0), ...overrides };
}

export function submit(client: BalancerClient, t: Task, timeoutMs = 15_000): Promise<SubmitResult> {
  return new Promise((resolve) => {
    client.submit({ task: t }, { deadline: Date.now() + timeoutMs }, (error, response) => {
      const answer = classifySubmitAnswer(error, response);
      resolve(answer.ok || answer.coded ? answer : { ...answer, code: '' });
    });
  });
}

export const json = (value: unknown) => Buffer.from(JSON.stringify(value));

/** Runs `fn` over `items` with at most `limit` at once (tests keep their load bounded). */
export async function mapLimit<T, R>(items: readonly T[], limit: number, fn: (item: T, index: number) => Promise<R>): Promise<R[]> {
  const results = new Array<R>(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(limit, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        results[i] = await fn(items[i]!, i);
      }
    }),
  );
  return results;
}
