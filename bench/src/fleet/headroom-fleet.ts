import * as os from 'node:os';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { keyspacePattern } from '@headroom/fleet';
import { nodeProcessDefaults, startNodeProcess, type NodeProcess, type ReadyLine } from '@headroom/testkit';

export interface WorkerEndpoint {
  name: string;
  workerId: string;
  cluster: string;
  address: string;
  /** Where the worker serves /metrics, when it was started with --metrics-port. */
  metricsUrl?: string;
}

export interface BalancerEndpoint {
  name: string;
  balancerId: string;
  address: string;
  /** Where the balancer serves /metrics, when it was started with --metrics-port. */
  metricsUrl?: string;
}

export interface WorkerGroup {
  cluster: string;
  count: number;
  maxParallelismPerWorker: number;
  /** This group's handlers module, instead of the fleet's. */
  handlersPath?: string;
  /** Environment of this group's workers, over the fleet's workerEnv. */
  env?: NodeJS.ProcessEnv;
}

export interface FleetOptions {
  redisUrl: string;
  workers: readonly WorkerGroup[];
  /** @default 1 */
  balancerCount?: number;
  /** Balancers are named (and identified) `<prefix>`, or `<prefix>-1`.. when there are several. @default 'balancer' */
  balancerNamePrefix?: string;
  /** The workers' handlers module. @default the demo handlers (sim/src/handlers/demo.ts) */
  handlersPath?: string;
  /** Extra environment of the workers, e.g. for their handlers. */
  workerEnv?: NodeJS.ProcessEnv;
  /** Extra worker CLI flags, e.g. --metrics-port 0 or --max-semi-space-size-mb 64. */
  workerArgs?: readonly string[];
  logDir: string;
  /** Extra balancer CLI flags. */
  balancerArgs?: readonly string[];
  /** Node flags for the balancer processes, e.g. --cpu-prof. */
  balancerNodeFlags?: readonly string[];
  /** How long each process may take to print its ready line. @default 20000 */
  readyTimeoutMs?: number;
  /** close() leaves the prefix's Redis keys: balancers started and stopped in front of another fleet's workers. @default false */
  keepKeysOnClose?: boolean;
}

/** Balancers and workers, each its own process, on the shared Redis under a key prefix of their own. */
export interface ProcessFleet {
  readonly keyPrefix: string;
  readonly balancers: readonly BalancerEndpoint[];
  readonly workers: readonly WorkerEndpoint[];
  /** Name → pid, for CPU accounting. */
  readonly pids: ReadonlyMap<string, number>;
  /** Stops the balancers, then the workers (they drain), then deletes the prefix's Redis keys. Idempotent. */
  close(): Promise<void>;
}

const readyTimeoutMs = 20_000;
const workerCli = require.resolve('@headroom/worker/cli');
const balancerCli = require.resolve('@headroom/balancer/cli');
const demoHandlers = require.resolve('@headroom/sim/handlers/demo');

export function benchKeyPrefix(benchmark: string): string {
  return `bench:${benchmark}:${randomBytes(6).toString('hex')}`;
}

/**
 * Starts the fleet: the workers first, then the balancers. `register` receives each process's
 * clean-up as soon as it exists, so a failure or Ctrl-C half-way through still stops what was started.
 * Processes are named worker-1.. and balancer (balancer-1.. when there are several).
 */
export async function startProcessFleet(keyPrefix: string, options: FleetOptions, register: (cleanup: () => Promise<void>) => void): Promise<ProcessFleet> {
  const workerProcesses: NodeProcess[] = [];
  const balancerProcesses: NodeProcess[] = [];
  let keysDeleted: Promise<void> | undefined;
  const close = async () => {
    await Promise.all(balancerProcesses.map(stopProcess));
    await Promise.all(workerProcesses.map(stopProcess));
    if (!options.keepKeysOnClose) await (keysDeleted ??= deleteKeys(options.redisUrl, keyPrefix));
  };
  register(close);

  const env = { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' };
  const common = ['--key-prefix', keyPrefix, '--redis-url', options.redisUrl];
  const pids = new Map<string, number>();
  const workerSpecs = options.workers.flatMap((group) => Array.from({ length: group.count }, () => group));
  const workers = await allStarted(
    workerSpecs.map(async (group, index): Promise<WorkerEndpoint> => {
      const name = `worker-${index + 1}`;
      const { process: child, ready } = await startNodeProcess({
        name,
        script: workerCli,
        args: [
          '--cluster',
          group.cluster,
          '--handlers',
          group.handlersPath ?? options.handlersPath ?? demoHandlers,
          '--max-parallelism',
          String(group.maxParallelismPerWorker),
          ...(options.workerArgs ?? []),
          ...common,
        ],
        env: { ...env, ...options.workerEnv, ...group.env },
        logDir: options.logDir,
        readyTimeoutMs: options.readyTimeoutMs ?? readyTimeoutMs,
      });
      workerProcesses.push(child);
      pids.set(name, child.pid);
      const metricsUrl = metricsUrlOf(ready);
      return { name, workerId: String(ready.workerId), cluster: group.cluster, address: ready.address, ...(metricsUrl ? { metricsUrl } : {}) };
    }),
  );
  const balancerCount = options.balancerCount ?? 1;
  const namePrefix = options.balancerNamePrefix ?? 'balancer';
  const balancers = await allStarted(
    Array.from({ length: balancerCount }, async (_unused, index): Promise<BalancerEndpoint> => {
      const name = balancerCount === 1 ? namePrefix : `${namePrefix}-${index + 1}`;
      const { process: child, ready } = await startNodeProcess({
        name,
        nodeFlags: options.balancerNodeFlags,
        script: balancerCli,
        args: ['--port', '0', '--balancer-id', name, ...(options.balancerArgs ?? []), ...common],
        env,
        logDir: options.logDir,
        readyTimeoutMs: options.readyTimeoutMs ?? readyTimeoutMs,
      });
      balancerProcesses.push(child);
      pids.set(name, child.pid);
      const metricsUrl = metricsUrlOf(ready);
      return { name, balancerId: name, address: ready.address, ...(metricsUrl ? { metricsUrl } : {}) };
    }),
  );
  return { keyPrefix, balancers, workers, pids, close };
}

/** Stops one of the benchmark's processes (SIGTERM, then SIGKILL), saying so on stderr when it had to be killed. */
export async function stopProcess(child: NodeProcess): Promise<void> {
  const graceMs = nodeProcessDefaults.stopGraceMs;
  const { forced } = await child.stop(graceMs);
  if (forced) process.stderr.write(`bench: ${child.name} (pid ${child.pid}) did not exit ${graceMs} ms after SIGTERM; sent SIGKILL\n`);
}

/** Headroom's CLIs print the port of their /metrics (with --metrics-port) in the ready line. */
const metricsUrlOf = (ready: ReadyLine) => (typeof ready.metricsPort === 'number' ? `http://127.0.0.1:${ready.metricsPort}/metrics` : undefined);

/**
 * Like Promise.all, but waits until every start has settled before throwing the first failure,
 * so each process that did start is registered for clean-up by then (a balancer that failed
 * to start once left its siblings running).
 */
async function allStarted<T>(starts: readonly Promise<T>[]): Promise<T[]> {
  const results = await Promise.allSettled(starts);
  const failed = results.find((result): result is PromiseRejectedResult => result.status === 'rejected');
  if (failed) throw failed.reason;
  return results.map((result) => (result as PromiseFulfilledResult<T>).value);
}

/** Deletes every key of the prefix: all keys carry a hash tag `{<prefix>:...}` (see keyspacePattern). */
export async function deleteKeys(redisUrl: string, keyPrefix: string): Promise<void> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: false });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', keyspacePattern(keyPrefix), 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
  } catch (error) {
    process.stderr.write(`bench: could not delete the Redis keys ${keyspacePattern(keyPrefix)}: ${error instanceof Error ? error.message : String(error)}\n`);
  } finally {
    redis.disconnect();
  }
}

/** The pid of the Redis server when it runs on this machine (for CPU accounting), and its version. */
export async function describeRedis(redisUrl: string): Promise<{ version: string; pid: number | undefined }> {
  const redis = new Redis(redisUrl, { lazyConnect: true, maxRetriesPerRequest: 1, enableOfflineQueue: false });
  redis.on('error', () => undefined);
  try {
    await redis.connect();
    const info = await redis.info('server');
    const field = (name: string) => new RegExp(`^${name}:(.*)$`, 'm').exec(info)?.[1]?.trim();
    const host = new URL(redisUrl).hostname;
    const local = host === '127.0.0.1' || host === 'localhost' || host === '[::1]';
    const pid = Number(field('process_id'));
    return { version: field('redis_version') ?? 'unknown', pid: local && Number.isInteger(pid) ? pid : undefined };
  } finally {
    redis.disconnect();
  }
}

export const logDirFor = (baseDir: string, keyPrefix: string) => path.join(baseDir, keyPrefix.replace(/[^A-Za-z0-9._-]/g, '-'));

/** A run's own Redis key prefix, and the directory its processes log to (under the OS's temporary directory). */
export function benchPlace(benchmark: string): { keyPrefix: string; logDir: string } {
  const keyPrefix = benchKeyPrefix(benchmark);
  return { keyPrefix, logDir: logDirFor(path.join(os.tmpdir(), 'headroom-bench'), keyPrefix) };
}
