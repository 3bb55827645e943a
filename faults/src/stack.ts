/**
 * A Headroom fleet of real processes (worker and balancer CLIs) on a private Redis, to break on
 * purpose. Every process serves its metrics, so the suite reads each worker's own figures (in
 * flight, max parallelism, high-water mark) and each balancer's tallies from outside.
 */
import type { TestContext } from 'node:test';
import * as grpc from '@grpc/grpc-js';
import { Redis } from 'ioredis';
import { setTimeout as sleep } from 'node:timers/promises';
import { Ledger, type RedisConnection } from '@headroom/fleet';
import { BalancerService, type BalancerClient } from '@headroom/proto';
import {
  cliPaths,
  connected,
  handlersPaths,
  type PrivateRedis,
  type ReadyProcess,
  type RedisClusterNodes,
  type SentinelRedis,
  spawnReady,
  startPrivateRedis,
  startRedisCluster,
  startSentinelRedis,
} from '@headroom/testkit';

/** The commands and handler modules the stack starts (the packages' exports). */
export { cliPaths, handlersPaths };

/** Short heartbeats so that a silent worker leaves the ledger within about a second. */
export const heartbeatIntervalMs = 200;
export const heartbeatTimeoutMs = 1000;
export const keyPrefix = 'hr';
/** How long a process may take to print its ready line on a busy shared machine. */
export const readyTimeoutMs = 30_000;

/** Where balancers and workers read their flags (a real Unleash server). */
export interface FlagSource {
  unleashUrl: string;
  clientToken: string;
  candidateFlag: string;
  parallelismFlag: string;
}

export interface WorkerSpec {
  workerId: string;
  cluster: string;
  /** Its own setting (--max-parallelism); a flag may override it. */
  maxParallelism: number;
  handlers?: keyof typeof handlersPaths;
  /** Its period between heartbeats (--heartbeat-interval-ms). @default heartbeatIntervalMs (200) */
  heartbeatIntervalMs?: number;
  /** More CLI flags, e.g. --latency-report-interval-ms. */
  args?: string[];
}

export interface StackOptions {
  workers: WorkerSpec[];
  balancerCount: number;
  /** Extra balancer CLI flags, e.g. --max-queued-tasks. */
  balancerArgs?: string[];
  /** How long the balancers let a worker be silent before they sweep it (--heartbeat-timeout-ms): keep it a few of the workers' periods. @default heartbeatTimeoutMs (1000) */
  heartbeatTimeoutMs?: number;
  flags?: FlagSource;
  /**
   * 'sentinel': a primary, a replica and three sentinels, every process given the
   * redis+sentinel:// URL; 'cluster': a Redis Cluster of 3 primaries with a replica each, given
   * redis+cluster://. @default 'cluster' when HEADROOM_TEST_REDIS=cluster (the suite run again
   * on a cluster: faults-on-cluster.test.ts), else 'single'
   */
  redis?: 'single' | 'sentinel' | 'cluster';
}

interface FleetProcess {
  readonly id: string;
  readonly process: ReadyProcess;
  readonly metricsPort: number;
  /** False once the suite stopped or killed it. */
  alive: boolean;
}

export interface WorkerProcess extends FleetProcess {
  readonly kind: 'worker';
  readonly cluster: string;
}

export interface BalancerProcess extends FleetProcess {
  readonly kind: 'balancer';
  readonly client: BalancerClient;
}

export interface FaultStack {
  /** The Redis the stack started on (with Sentinel: the first primary; with a cluster: its first node). */
  readonly redis: PrivateRedis;
  /** What every process was given: redis://, or redis+sentinel:// with Sentinel. */
  readonly redisUrl: string;
  readonly sentinel: SentinelRedis | undefined;
  readonly cluster: RedisClusterNodes | undefined;
  /** A connection of the suite's own, to read the ledger (and flush it). */
  readonly ledgerRedis: RedisConnection;
  readonly ledger: Ledger;
  readonly workers: WorkerProcess[];
  readonly balancers: BalancerProcess[];
  readonly clusters: string[];
  worker(workerId: string): WorkerProcess;
  liveWorkers(cluster?: string): WorkerProcess[];
  liveBalancers(): BalancerProcess[];
  /** Kills every Redis node at once and starts them again `downMs` later: empty (no persistence), a cluster keeps its slot map (nodes.conf). */
  restartRedis(downMs: number): Promise<void>;
  /** FLUSHALL on every primary. */
  flushRedis(): Promise<void>;
  /**
   * Sends `signal` and waits for the process to exit (SIGKILL after `exitTimeoutMs`, and the
   * answer says so); it counts as dead from the moment of the signal.
   */
  stop(target: FleetProcess, signal: NodeJS.Signals, exitTimeoutMs?: number): Promise<{ exitCode: number | null; killedAfterTimeout: boolean }>;
}

function flagArgs(flags: FlagSource | undefined, forBalancer: boolean): string[] {
  if (!flags) return [];
  return [
    '--unleash-url',
    flags.unleashUrl,
    '--unleash-client-token',
    flags.clientToken,
    // Faster than the default 1 s, so convergence after Unleash returns is measured in polls of 200 ms.
    '--flags-refresh-interval-ms',
    '200',
    '--parallelism-flag',
    flags.parallelismFlag,
    ...(forBalancer ? ['--candidate-flag', flags.candidateFlag] : []),
  ];
}

export async function startWorkerProcess(t: TestContext, redisUrl: string, spec: WorkerSpec, flags?: FlagSource): Promise<WorkerProcess> {
  const process = await spawnReady(
    t,
    cliPaths.worker,
    [
      '--redis-url',
      redisUrl,
      '--key-prefix',
      keyPrefix,
      '--cluster',
      spec.cluster,
      '--worker-id',
      spec.workerId,
      '--handlers',
      handlersPaths[spec.handlers ?? 'demo'],
      '--max-parallelism',
      String(spec.maxParallelism),
      '--heartbeat-interval-ms',
      String(spec.heartbeatIntervalMs ?? heartbeatIntervalMs),
      '--metrics-port',
      '0',
      ...(spec.args ?? []),
      ...flagArgs(flags, false),
    ],
    readyTimeoutMs,
  );
  return { kind: 'worker', id: spec.workerId, cluster: spec.cluster, process, metricsPort: process.ready.metricsPort!, alive: true };
}

export async function startBalancerProcess(
  t: TestContext,
  redisUrl: string,
  balancerId: string,
  extraArgs: string[] = [],
  flags?: FlagSource,
  workerHeartbeatTimeoutMs = heartbeatTimeoutMs,
): Promise<BalancerProcess> {
  const process = await spawnReady(
    t,
    cliPaths.balancer,
    [
      '--redis-url',
      redisUrl,
      '--key-prefix',
      keyPrefix,
      '--balancer-id',
      balancerId,
      '--heartbeat-timeout-ms',
      String(workerHeartbeatTimeoutMs),
      '--metrics-port',
      '0',
      ...extraArgs,
      ...flagArgs(flags, true),
    ],
    readyTimeoutMs,
  );
  const client = new BalancerService(process.ready.address, grpc.credentials.createInsecure());
  t.after(() => client.close());
  return { kind: 'balancer', id: balancerId, process, metricsPort: process.ready.metricsPort!, client, alive: true };
}

/** Starts Redis, then the workers, then the balancers (which read the ledger at start). */
export async function startStack(t: TestContext, options: StackOptions): Promise<FaultStack> {
  const kind = options.redis ?? (process.env.HEADROOM_TEST_REDIS === 'cluster' ? 'cluster' : 'single');
  const sentinel = kind === 'sentinel' ? await startSentinelRedis() : undefined;
  const cluster = kind === 'cluster' ? await startRedisCluster() : undefined;
  const redis = sentinel ? sentinel.nodes[0] : cluster ? cluster.nodes[0]! : await startPrivateRedis();
  t.after(() => (sentinel ? sentinel.stop() : cluster ? cluster.stop() : redis.stop(true)));
  const redisUrl = sentinel?.url ?? cluster?.url ?? redis.url;
  const ledgerRedis = await connected(redisUrl);
  t.after(() => ledgerRedis.disconnect());
  const workers = await Promise.all(options.workers.map((spec) => startWorkerProcess(t, redisUrl, spec, options.flags)));
  const balancers = await Promise.all(
    Array.from({ length: options.balancerCount }, (_, i) =>
      startBalancerProcess(t, redisUrl, `b${i}`, options.balancerArgs, options.flags, options.heartbeatTimeoutMs),
    ),
  );
  const clusters = [...new Set(options.workers.map((w) => w.cluster))].sort();
  return {
    redis,
    redisUrl,
    sentinel,
    cluster,
    ledgerRedis,
    ledger: new Ledger(ledgerRedis, { keyPrefix }),
    workers,
    balancers,
    clusters,
    worker(workerId) {
      const found = workers.find((w) => w.id === workerId);
      if (!found) throw new Error(`no worker ${workerId} in this stack`);
      return found;
    },
    liveWorkers: (cluster) => workers.filter((w) => w.alive && (cluster === undefined || w.cluster === cluster)),
    liveBalancers: () => balancers.filter((b) => b.alive),
    async restartRedis(downMs) {
      const nodes = sentinel?.nodes ?? cluster?.nodes ?? [redis];
      await Promise.all(nodes.map((node) => node.stop(true)));
      await sleep(downMs);
      await Promise.all(nodes.map((node) => node.start()));
    },
    async flushRedis() {
      const nodes = sentinel?.nodes ?? cluster?.nodes ?? [redis];
      for (const node of nodes) {
        const connection = new Redis(node.url);
        try {
          if (((await connection.role()) as unknown[])[0] === 'master') await connection.flushall();
        } finally {
          connection.disconnect();
        }
      }
    },
    async stop(target, signal, exitTimeoutMs = 20_000) {
      target.alive = false;
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), exitTimeoutMs)));
      const outcome = await Promise.race([target.process.kill(signal).then(() => 'exited' as const), timedOut]);
      clearTimeout(timer);
      if (outcome === 'timeout') await target.process.kill('SIGKILL');
      return { exitCode: target.process.child.exitCode, killedAfterTimeout: outcome === 'timeout' };
    },
  };
}
