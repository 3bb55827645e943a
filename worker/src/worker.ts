import * as os from 'node:os';
import { randomBytes } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import { z } from 'zod';
import { parseConfig, settings, silentLogger, type Logger } from '@headroom/common';
import { LatencyRecorder, Ledger, WorkerReports, type LedgerOptions } from '@headroom/fleet';
import {
  WorkerService,
  addHealthService,
  metadataKeys,
  receiveLimitInterceptor,
  serverCredentials,
  serverTlsSchema,
  withTolerantDeserializers,
} from '@headroom/proto';
import type { RedisConnection } from '@headroom/fleet';
import { Registry } from 'prom-client';
import { createWorkerMetrics } from './metrics';
import { createUpstreamAgent } from './upstream-agent';
import { ParallelismGate } from './gate';
import { RunningTasks } from './running-tasks';
import { ExecuteService, type TaskOutcomes } from './execute-service';
import { WorkerShutdown } from './shutdown';
import { HeartbeatLoop } from './heartbeat-loop';
import { workerErrorCodes } from './errors';
import { WorkerProfiler } from './profiler';
import { WorkerReporter } from './reporter';
import { startSelfProtection, type ProtectionState } from './self-protection';
import { checkAdvertiseHost } from './advertised-host';
import { checkHandlers, type HandlerMap } from './handler';
import { maxParallelismLimit, type FlagClient } from '@headroom/flags';

export const workerOptionsSchema = z
  .object({
    /** The cluster the worker serves in, e.g. "baseline" or "candidate". */
    cluster: settings.name(),
    /** Unique among live workers; defaults to <hostname>-<pid>-<random>. */
    workerId: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,128}$/, 'expected 1-128 characters of A-Z, a-z, 0-9, ".", "_", "-"')
      .optional(),
    /** Tasks run at once unless the max-parallelism flag sets it for this cluster. @default 1 */
    maxParallelism: settings.positiveInt(maxParallelismLimit).default(1),
    /** Interface the gRPC server binds. @default '127.0.0.1' */
    host: z.string().min(1).default('127.0.0.1'),
    /** 0 picks a free port. @default 0 */
    port: settings.nonNegativeInt(65_535).default(0),
    /** Host balancers dial; defaults to `host`. Checked at start: it must resolve. */
    advertiseHost: z.string().min(1).optional(),
    /**
     * Between heartbeats; in a cluster of more than 1,000 workers, times workers ÷ 1,000 (the
     * ledger spreads a large cluster's heartbeats: LedgerOptions.workersAtFullHeartbeatRate).
     * Shorter repairs the ledger sooner (a lost slot comes back in 2 to 3 periods, a registration
     * Redis lost in 1) and costs Redis more (one call per worker per period). @default 1000
     */
    heartbeatIntervalMs: settings.positiveInt(60_000).default(1000),
    /** Longest a drain waits for running tasks before the worker leaves anyway. @default 300000 */
    drainTimeoutMs: settings.positiveInt(24 * 3600_000).default(300_000),
    /** Largest request the gRPC server accepts. @default 4 MiB + 64 KiB */
    maxReceiveMessageBytes: settings.positiveInt(256 * 1024 * 1024).default(4 * 1024 * 1024 + 64 * 1024),
    /** Connections the shared HTTP agent opens per upstream origin (TaskContext.httpAgent). @default 64 */
    maxUpstreamConnections: settings.positiveInt(100_000).default(64),
    /** How often task latencies are added to the rolling summaries in Redis. @default 5000 */
    latencyReportIntervalMs: settings.positiveInt(600_000).default(5000),
    /** TLS for the gRPC server balancers call; with clientCaFile, only balancers with a certificate that CA signed (mutual TLS). */
    tls: serverTlsSchema.optional(),
    /** How often the worker reports its heap, GC, event loop and task figures for the admin UI; sent with the first heartbeat due after it (at least one heartbeat period apart). @default 2000 */
    reportIntervalMs: settings.positiveInt(600_000).default(2000),
    /**
     * A task that finds every slot busy: "refuse" it (the balancer tries another worker: what
     * Headroom's balancers expect), or "queue" it here, first come first served, until a slot
     * frees, its deadline passes or the caller leaves (what balancers without a shared count of
     * free slots need, as a single-task worker of the old kind did). @default 'refuse'
     */
    overflow: z.enum(['refuse', 'queue'], { error: 'expected refuse or queue' }).default('refuse'),
    /** With overflow "queue": tasks that may wait at once; more are refused (HR_ERR_WORKER_QUEUE_FULL). @default 1000 */
    maxQueuedTasks: settings.positiveInt(1_000_000).default(1000),
    /**
     * Self-protection: event-loop delay p99 (ms, over one check) above which the worker
     * advertises half as many slots per check, down to one, until it is back below 80% of this
     * line; 0 turns it off. @default 1000
     */
    protectEventLoopDelayP99Ms: settings.nonNegativeInt(600_000).default(1000),
    /** Self-protection: old-generation heap used ÷ its limit (--max-old-space-size) above which the worker advertises fewer slots, as above; 0 turns it off. @default 0.85 */
    protectHeapShare: settings.share().default(0.85),
    /** How often self-protection checks the event loop and the heap. @default 1000 */
    protectCheckIntervalMs: settings.positiveInt(600_000).default(1000),
    /**
     * Also run a task whose ExecuteRequest names no worker (empty workerId; its cluster must still
     * be this worker's), as a worker behind a proxy that picks the worker itself (HAProxy, a
     * Kubernetes Service) must: such a proxy cannot write the worker's id into the body. A task
     * addressed to another worker is refused either way. @default false
     */
    acceptUnaddressed: settings.switch().default(false),
  })
  .strict();

export type WorkerOptions = z.input<typeof workerOptionsSchema>;

export interface WorkerDependencies {
  /** Ledger connection (the worker does not close it). */
  redis: RedisConnection;
  handlers: HandlerMap;
  ledger?: LedgerOptions;
  logger?: Logger;
  /** Where the worker's metrics go; a registry of its own by default. */
  registry?: Registry;
  /** Unleash flags: the max-parallelism flag, when it sets a value for this cluster, wins over the worker's own. */
  flags?: FlagClient;
}

export interface WorkerStats {
  workerId: string;
  cluster: string;
  address: string;
  maxParallelism: number;
  inflight: number;
  /** Tasks waiting in the local queue for a slot (overflow "queue"). */
  queued: number;
  /** Most tasks ever running at once. */
  highWaterMark: number;
  /** Tasks the gate turned away: all slots busy (with overflow "queue": and the local queue full). */
  refusals: number;
  completed: number;
  failed: number;
  draining: boolean;
  /** Heartbeats that could not reach Redis, since start. */
  heartbeatFailures: number;
  /** Null unless the worker advertises fewer slots to protect itself (protectEventLoopDelayP99Ms, protectHeapShare). */
  selfProtection: ProtectionState | null;
}

export interface Worker {
  readonly workerId: string;
  readonly cluster: string;
  /** host:port balancers dial. */
  readonly address: string;
  /** Its Prometheus metrics. */
  readonly registry: Registry;
  /** Sets the worker's own max parallelism; the max-parallelism flag wins over it when it sets one. */
  setMaxParallelism(maxParallelism: number): Promise<void>;
  stats(): WorkerStats;
  /** Resolves when the worker has stopped (close, destroy, or an operator's drain). */
  readonly stopped: Promise<void>;
  /** Stops taking tasks, lets running ones finish, leaves the ledger, stops the server. Idempotent. */
  close(): Promise<void>;
  /** Stops at once: running tasks are aborted and the worker leaves the ledger. Idempotent. */
  destroy(): Promise<void>;
}

export { answerNearDeadlineMs, cancelCountsAsDeadlineWithinMs } from './running-tasks';
export { workerReportTtlMs } from './heartbeat-loop';

/**
 * Starts a worker: its gRPC server is listening and it is in the ledger when this resolves. The
 * composition root: ExecuteService answers tasks, RunningTasks holds their leases, HeartbeatLoop
 * keeps the ledger told, WorkerShutdown drains and stops; this function wires them.
 */
export async function createWorker(options: WorkerOptions, deps: WorkerDependencies): Promise<Worker> {
  const config = parseConfig('worker options', workerOptionsSchema, options);
  const handlers = checkHandlers(deps.handlers, 'deps.handlers');
  const logger = deps.logger ?? silentLogger;
  const ledger = new Ledger(deps.redis, deps.ledger);
  // Certificates are read now: a wrong path stops the start before anything runs.
  const credentials = serverCredentials(config.tls, 'tls');
  // So is the advertised host: a typo would leave the worker in the ledger, unreachable.
  if (config.advertiseHost !== undefined) await checkAdvertiseHost(config.advertiseHost);
  const workerId = config.workerId ?? `${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const cluster = config.cluster;
  const gate = new ParallelismGate(config.maxParallelism, config.overflow === 'queue' ? config.maxQueuedTasks : 0);
  const registry = deps.registry ?? new Registry();
  const { protection, close: closeProtection } = startSelfProtection({
    eventLoopDelayP99Ms: config.protectEventLoopDelayP99Ms,
    heapShare: config.protectHeapShare,
  });
  const metrics = createWorkerMetrics(registry, () => gate, protection);
  const httpAgent = createUpstreamAgent(config.maxUpstreamConnections, registry);
  // Run times of successful tasks (and counts of failed ones) per integration, merged in Redis for the latency ratio and error rate.
  const latency = new LatencyRecorder(deps.redis, { keyPrefix: ledger.options.keyPrefix, cluster });
  const tasks = new RunningTasks({ workerId, releaseLease: (leaseId) => ledger.release(cluster, leaseId), logger });
  // Heap, GC, event loop and task figures, for the admin UI's workers table.
  const reporter = new WorkerReporter();
  const profiler = new WorkerProfiler(workerId, logger);
  const server = createGrpcServer(config.maxReceiveMessageBytes);
  const setHealth = addHealthService(server, ['headroom.v1.Worker']);
  // Its beat and leave are defined below, before the first heartbeat: no stop can begin before they exist.
  const shutdown = new WorkerShutdown({
    gate,
    tasks,
    server,
    setHealth,
    stopProfiling: () => profiler.stop(),
    beat: (): Promise<void> => heartbeats.beat(),
    leave: (): Promise<void> => leave(),
    drainTimeoutMs: config.drainTimeoutMs,
    logger,
  });
  const execute = new ExecuteService({
    workerId,
    cluster,
    handlers,
    gate,
    tasks,
    metrics,
    httpAgent,
    logger,
    acceptUnaddressed: config.acceptUnaddressed,
    outcomes: taskOutcomes(latency, reporter),
    isDraining: (): boolean => shutdown.draining,
    slotFreed: () => shutdown.slotFreed(),
  });
  server.addService(withTolerantDeserializers(WorkerService.service, ['Execute', 'Profile']), {
    Execute: execute.handle,
    Profile: profiler.handle,
  } as grpc.UntypedServiceImplementation);
  const boundPort = await bindServer(server, `${config.host}:${config.port}`, credentials).catch((error: unknown) => {
    reporter.close();
    closeProtection();
    throw error;
  });
  const advertiseHost = config.advertiseHost ?? config.host;
  const address = `${advertiseHost.includes(':') ? `[${advertiseHost}]` : advertiseHost}:${boundPort}`;

  const heartbeats = new HeartbeatLoop(
    {
      workerId,
      cluster,
      address,
      ledger,
      reporter,
      gate,
      tasks,
      protection,
      metrics,
      logger,
      reports: new WorkerReports(deps.redis, ledger.options.keyPrefix),
      flags: deps.flags,
      isDraining: (): boolean => shutdown.draining,
      drainRequested: () => void shutdown.close(),
    },
    config,
  );
  const latencyTimer = setInterval(() => {
    latency.flush().catch((error: unknown) => logger.debug({ err: error }, 'latency report failed; kept for the next one'));
  }, config.latencyReportIntervalMs);
  latencyTimer.unref();
  const leave = async () => {
    heartbeats.stop();
    closeProtection();
    clearInterval(latencyTimer);
    await heartbeats.removeReport();
    await latency.flush().catch((error: unknown) => logger.debug({ err: error }, 'last latency report failed'));
    await httpAgent.close().catch(() => undefined);
    await ledger
      .deregister(cluster, workerId)
      .catch((error: unknown) => logger.warn({ err: error }, 'could not leave the ledger; the sweep will remove this worker'));
  };

  heartbeats.followChanges();
  try {
    await heartbeats.beat();
  } catch (error) {
    server.forceShutdown();
    heartbeats.stop();
    closeProtection();
    clearInterval(latencyTimer);
    throw error;
  }
  // Unless the first heartbeat found an operator's drain request for this worker id: it drains at once.
  if (!shutdown.draining) setHealth('SERVING');
  heartbeats.start();
  logger.info({ workerId, cluster, address, maxParallelism: gate.maxParallelism }, 'worker ready');

  return {
    workerId,
    cluster,
    address,
    registry,
    async setMaxParallelism(maxParallelism: number) {
      await heartbeats.setOwnMaxParallelism(parseConfig('max parallelism', settings.positiveInt(maxParallelismLimit), maxParallelism));
    },
    stats: () => ({
      workerId,
      cluster,
      address,
      maxParallelism: gate.maxParallelism,
      inflight: gate.inflight,
      queued: gate.queued,
      highWaterMark: gate.highWaterMark,
      refusals: gate.refusals,
      completed: tasks.completed,
      failed: tasks.failed,
      draining: shutdown.draining,
      heartbeatFailures: heartbeats.failures,
      selfProtection: protection.current,
    }),
    stopped: shutdown.stopped,
    close: shutdown.close,
    destroy: shutdown.destroy,
  };
}

/** Where a task's outcome goes besides the metrics: the latency summaries in Redis and the next worker report. */
function taskOutcomes(latency: LatencyRecorder, reporter: WorkerReporter): TaskOutcomes {
  return {
    succeeded: (integration, runMs) => {
      latency.record(integration, runMs);
      reporter.taskSucceeded(runMs);
    },
    failed: (integration) => {
      latency.recordFailure(integration);
      reporter.taskFailed();
    },
  };
}

/** The worker's gRPC server, its services not yet added. */
function createGrpcServer(maxReceiveMessageBytes: number): grpc.Server {
  return new grpc.Server({
    'grpc.max_receive_message_length': maxReceiveMessageBytes,
    'grpc.keepalive_permit_without_calls': 1,
    // An Execute message over that limit, or one that does not decode, is the sender's mistake: HR_ERR_INVALID_REQUEST,
    // not grpc-js's RESOURCE_EXHAUSTED ("full") / INTERNAL (see proto/src/unreadable-requests.ts for why this way).
    interceptors: [
      receiveLimitInterceptor({
        methodPaths: [WorkerService.service.Execute.path, WorkerService.service.Profile.path],
        errorCodeKey: metadataKeys.errorCode,
        tooLarge: () => {
          const metadata = new grpc.Metadata();
          metadata.set(metadataKeys.errorCode, workerErrorCodes.invalidRequest);
          return {
            code: grpc.status.INVALID_ARGUMENT,
            details: `the message is larger than the limit of ${maxReceiveMessageBytes} bytes (maxReceiveMessageBytes); it was not read`,
            metadata,
          };
        },
      }),
    ],
  });
}

/** Binds the server; resolves with the port it got (the one asked for, or a free one for 0). */
function bindServer(server: grpc.Server, hostPort: string, credentials: grpc.ServerCredentials): Promise<number> {
  return new Promise<number>((resolve, reject) => server.bindAsync(hostPort, credentials, (error, port) => (error ? reject(error) : resolve(port))));
}
