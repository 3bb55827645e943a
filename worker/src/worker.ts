import * as os from 'node:os';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import * as grpc from '@grpc/grpc-js';
import { z } from 'zod';
import { BoundedLabelValues, HeadroomError, maxLabelledIntegrations, once, parseConfig, settings, silentLogger, type Logger } from '@headroom/common';
import { LatencyRecorder, Ledger, WorkerReports, type LedgerOptions } from '@headroom/fleet';
import {
  UnreadableRequest,
  WorkerService,
  addHealthService,
  metadataKeys,
  receiveLimitInterceptor,
  serverCredentials,
  serverTlsSchema,
  withTolerantDeserializers,
  type ExecuteRequest__Output,
  type ExecuteResponse,
} from '@headroom/proto';
import type { RedisConnection } from '@headroom/fleet';
import { Registry } from 'prom-client';
import { createWorkerMetrics } from './metrics';
import { createUpstreamAgent } from './upstream-agent';
import { ParallelismGate } from './gate';
import { workerErrorCodes } from './errors';
import { WorkerProfiler } from './profiler';
import { WorkerReporter } from './reporter';
import { startSelfProtection, type ProtectionState } from './self-protection';
import { checkAdvertiseHost } from './advertised-host';
import { checkHandlers, type HandlerMap, type TaskContext } from './handler';
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

/**
 * A cancel that comes this close to the task's deadline, or after it, is the deadline: the
 * caller's own timer for the same deadline ended the call a moment before ours fired (a loaded
 * event loop runs timers late; the two hosts' clocks differ by a few ms). Reporting it as a cancel
 * would tell the caller the wrong story.
 */
export const cancelCountsAsDeadlineWithinMs = 50;
const cancelIsTheDeadline = (deadlineUnixMs: number) => Date.now() >= deadlineUnixMs - cancelCountsAsDeadlineWithinMs;
/**
 * An answer this close to the task's deadline, or after it, may not reach the balancer (its call
 * ends at the deadline): the worker releases the lease itself. Wider than the cancel margin, as
 * an answer takes a while on its way (a loaded event loop, the network).
 */
export const answerNearDeadlineMs = 250;

/** How long a worker's report lives in Redis: a few missed intervals, then a dead worker's goes away on its own. */
export const workerReportTtlMs = (reportIntervalMs: number) => Math.max(10_000, 3 * reportIntervalMs);

interface RunningTask {
  readonly leaseId: string;
  readonly abort: AbortController;
}

/** Starts a worker: its gRPC server is listening and it is in the ledger when this resolves. */
export async function createWorker(options: WorkerOptions, deps: WorkerDependencies): Promise<Worker> {
  const config = parseConfig('worker options', workerOptionsSchema, options);
  const handlers = checkHandlers(deps.handlers, 'deps.handlers');
  // Said in the refusal of a task it has no handler for.
  const servedIntegrations = Object.keys(handlers)
    .map((name) => JSON.stringify(name))
    .join(', ');
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
  const reports = new WorkerReports(deps.redis, ledger.options.keyPrefix);
  // Integration names become metric labels: keep their number bounded.
  const integrationLabels = new BoundedLabelValues(maxLabelledIntegrations);
  // Bounded by the gate: one entry per admitted task.
  const running = new Map<string, RunningTask>();
  // Bounded by the local queue's limit: leases of tasks waiting there for a slot.
  const queuedLeaseIds = new Set<string>();
  /** The leases this worker holds, as its heartbeat tells the ledger: the rest of its leases end there. */
  const heldLeaseIds = function* () {
    yield* running.keys();
    yield* queuedLeaseIds;
  };
  let ownMaxParallelism = config.maxParallelism;
  let draining = false;
  let completed = 0;
  let failed = 0;
  let heartbeatFailures = 0;
  let drained: (() => void) | undefined;
  let markStopped!: () => void;
  const stopped = new Promise<void>((resolve) => (markStopped = resolve));

  const server = new grpc.Server({
    'grpc.max_receive_message_length': config.maxReceiveMessageBytes,
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
            details: `the message is larger than the limit of ${config.maxReceiveMessageBytes} bytes (maxReceiveMessageBytes); it was not read`,
            metadata,
          };
        },
      }),
    ],
  });
  const setHealth = addHealthService(server, ['headroom.v1.Worker']);

  function refuse(callback: grpc.sendUnaryData<ExecuteResponse>, status: grpc.status, code: string, message: string) {
    const metadata = new grpc.Metadata();
    metadata.set(metadataKeys.errorCode, code);
    callback({ code: status, details: message, metadata });
  }

  /** Waits in the local queue for a slot: until one is free (it is then held), or why not. */
  async function waitForSlot(
    call: grpc.ServerUnaryCall<unknown, ExecuteResponse>,
    leaseId: string,
    deadlineUnixMs: number,
  ): Promise<'admitted' | 'queue_full' | 'draining' | 'cancelled' | 'deadline'> {
    const ticket = gate.wait();
    if (!ticket) return 'queue_full';
    queuedLeaseIds.add(leaseId);
    let why: 'cancelled' | 'deadline' = 'deadline';
    const onCancelled = () => {
      why = cancelIsTheDeadline(deadlineUnixMs) ? 'deadline' : 'cancelled';
      ticket.withdraw();
    };
    call.on('cancelled', onCancelled);
    const deadlineTimer = setTimeout(() => ticket.withdraw(), Math.max(0, deadlineUnixMs - Date.now()));
    deadlineTimer.unref();
    const admitted = await ticket.admitted;
    queuedLeaseIds.delete(leaseId);
    clearTimeout(deadlineTimer);
    call.off('cancelled', onCancelled);
    if (admitted) return 'admitted';
    return draining ? 'draining' : why;
  }

  // The request is an UnreadableRequest when its bytes did not decode (withTolerantDeserializers below).
  async function execute(
    call: grpc.ServerUnaryCall<ExecuteRequest__Output | UnreadableRequest, ExecuteResponse>,
    callback: grpc.sendUnaryData<ExecuteResponse>,
  ) {
    const request = call.request;
    if (request instanceof UnreadableRequest) {
      return refuse(
        callback,
        grpc.status.INVALID_ARGUMENT,
        workerErrorCodes.invalidRequest,
        `the message is not a valid ${request.messageType}: ${request.reason}`,
      );
    }
    const task = request.task;
    const addressedHere = request.workerId === workerId || (config.acceptUnaddressed && request.workerId === '');
    if (!task || request.leaseId === '' || request.cluster !== cluster || !addressedHere) {
      const why = !task
        ? 'task is missing'
        : request.leaseId === ''
          ? 'leaseId is missing'
          : request.cluster !== cluster
            ? `cluster is ${JSON.stringify(request.cluster)}, this worker serves ${JSON.stringify(cluster)}`
            : `workerId is ${JSON.stringify(request.workerId)}, this worker is ${JSON.stringify(workerId)}${request.workerId === '' ? ' (start it with acceptUnaddressed to run tasks that name no worker)' : ''}`;
      return refuse(callback, grpc.status.INVALID_ARGUMENT, workerErrorCodes.invalidRequest, why);
    }
    const handler = handlers[task.integration] ?? handlers['*'];
    if (!handler) {
      // Refused at the gate, not answered: nothing ran, so the balancer offers the task to
      // another worker (and counts the refusal against this one's failure rate).
      metrics.refusals.inc({ reason: 'no_handler' });
      return refuse(
        callback,
        grpc.status.UNIMPLEMENTED,
        workerErrorCodes.noHandler,
        `worker ${workerId} has no handler for integration ${JSON.stringify(task.integration)} (it serves ${servedIntegrations})`,
      );
    }
    if (draining) {
      metrics.refusals.inc({ reason: 'draining' });
      return refuse(callback, grpc.status.RESOURCE_EXHAUSTED, workerErrorCodes.draining, `worker ${workerId} is draining`);
    }
    if (call.cancelled) {
      return cancelIsTheDeadline(task.deadlineUnixMs)
        ? refuse(callback, grpc.status.DEADLINE_EXCEEDED, workerErrorCodes.deadlineExceeded, 'the deadline passed before the task started')
        : refuse(callback, grpc.status.CANCELLED, workerErrorCodes.cancelled, 'the balancer cancelled the task before it started');
    }
    let queueWaitMs = 0;
    if (!gate.tryEnter()) {
      if (gate.queueLimit === 0) {
        metrics.refusals.inc({ reason: 'full' });
        return refuse(
          callback,
          grpc.status.RESOURCE_EXHAUSTED,
          workerErrorCodes.full,
          `worker ${workerId} runs ${gate.inflight} of ${gate.maxParallelism} tasks`,
        );
      }
      const queuedAt = performance.now();
      const waited = await waitForSlot(call, request.leaseId, task.deadlineUnixMs);
      if (waited !== 'admitted') {
        metrics.refusals.inc({ reason: waited });
        return waited === 'queue_full'
          ? refuse(
              callback,
              grpc.status.RESOURCE_EXHAUSTED,
              workerErrorCodes.queueFull,
              `worker ${workerId} runs ${gate.inflight} of ${gate.maxParallelism} tasks and has ${gate.queued} waiting, its limit (maxQueuedTasks)`,
            )
          : waited === 'draining'
            ? refuse(callback, grpc.status.RESOURCE_EXHAUSTED, workerErrorCodes.draining, `worker ${workerId} is draining`)
            : waited === 'cancelled'
              ? refuse(callback, grpc.status.CANCELLED, workerErrorCodes.cancelled, 'the balancer cancelled the task while it waited for a slot')
              : refuse(
                  callback,
                  grpc.status.DEADLINE_EXCEEDED,
                  workerErrorCodes.deadlineExceeded,
                  `the deadline passed while the task waited for a slot on worker ${workerId}`,
                );
      }
      queueWaitMs = performance.now() - queuedAt;
      metrics.localQueueWait.observe(queueWaitMs / 1000);
    }
    // Tell the balancer the task started: from here on it must not run it elsewhere
    // unless the task is idempotent.
    const started = new grpc.Metadata();
    started.set(metadataKeys.started, '1');
    call.sendMetadata(started);

    const abort = new AbortController();
    // Held from here to the answer (in the same turn as the admission: a heartbeat never sees the task in neither).
    running.set(request.leaseId, { leaseId: request.leaseId, abort });
    const msLeft = task.deadlineUnixMs - Date.now();
    const deadlineTimer = setTimeout(() => abort.abort(new HeadroomError(workerErrorCodes.deadlineExceeded, 'task deadline passed')), Math.max(0, msLeft));
    deadlineTimer.unref();
    const onCancelled = () =>
      abort.abort(
        cancelIsTheDeadline(task.deadlineUnixMs)
          ? new HeadroomError(workerErrorCodes.deadlineExceeded, 'task deadline passed (the caller ended the call at it)')
          : new HeadroomError(workerErrorCodes.cancelled, 'the balancer cancelled the task'),
      );
    call.on('cancelled', onCancelled);

    const context: TaskContext = {
      id: task.id,
      key: task.key,
      integration: task.integration,
      priority: task.priority,
      payload: task.payload,
      deadlineUnixMs: task.deadlineUnixMs,
      idempotent: task.idempotent,
      cluster,
      workerId,
      httpAgent,
    };
    const startedAt = performance.now();
    let response: ExecuteResponse;
    try {
      const result = await handler(context, abort.signal);
      completed++;
      response = { workerId, runMs: performance.now() - startedAt, queueWaitMs, result: result === undefined ? Buffer.alloc(0) : Buffer.from(result) };
    } catch (error) {
      failed++;
      const runMs = performance.now() - startedAt;
      // A handler that stops because its signal aborted reports the abort's reason (deadline, cancel).
      const coded = error instanceof HeadroomError ? error : abort.signal.reason instanceof HeadroomError ? abort.signal.reason : undefined;
      if (coded) {
        response = { workerId, runMs, queueWaitMs, error: { code: coded.code, message: coded.message, retryAfterMs: coded.retryAfterMs ?? 0 } };
      } else {
        logger.debug({ err: error, taskId: task.id }, 'handler failed');
        response = {
          workerId,
          runMs,
          queueWaitMs,
          error: { code: workerErrorCodes.handlerFailed, message: error instanceof Error ? error.message : String(error) },
        };
      }
    } finally {
      clearTimeout(deadlineTimer);
      call.off('cancelled', onCancelled);
      gate.leave();
      if (draining && gate.inflight === 0) drained?.();
    }
    const integration = integrationLabels.of(task.integration);
    metrics.taskDuration.observe({ cluster, integration, outcome: response.error ? 'error' : 'ok' }, Number(response.runMs) / 1000);
    if (response.error) {
      metrics.handlerErrors.inc({ integration, code: response.error.code });
      latency.recordFailure(integration);
      reporter.taskFailed();
    } else {
      latency.record(integration, Number(response.runMs));
      reporter.taskSucceeded(Number(response.runMs));
    }
    await answer(call, callback, request.leaseId, task.deadlineUnixMs, response);
  }

  // grpc-js ignores what a handler returns: a throw outside the handler's own try would end the
  // process as an unhandled rejection, and take every other running task with it.
  function executeOrLog(
    call: grpc.ServerUnaryCall<ExecuteRequest__Output | UnreadableRequest, ExecuteResponse>,
    callback: grpc.sendUnaryData<ExecuteResponse>,
  ): void {
    execute(call, callback).catch((error: unknown) => {
      logger.error({ err: error }, 'Execute failed outside the task handler');
      try {
        refuse(
          callback,
          grpc.status.INTERNAL,
          workerErrorCodes.handlerFailed,
          `worker ${workerId} failed: ${error instanceof Error ? error.message : String(error)}`,
        );
      } catch {
        // The call was answered already.
      }
    });
  }

  /**
   * Answers a task, and stops holding its lease. The balancer that receives the answer releases
   * the lease, batched with its other calls to Redis. When the balancer cancelled the call it
   * will not, nor when the task's deadline passed (or nearly): its call ended at the deadline
   * while the answer was on its way, and the answer is lost. The worker then releases the lease
   * itself, and holds it until the release is through (a heartbeat sent meanwhile keeps it); a
   * release by both frees the slot once (the lease record goes with the first). Left to the
   * heartbeats, such slots came back a period late each, and under an incident, where tasks run
   * out their deadlines, that was enough capacity lost to keep the queue's head expiring after
   * the upstream was fast again (faults/test/incident-recovery.test.ts).
   */
  async function answer(
    call: grpc.ServerUnaryCall<unknown, ExecuteResponse>,
    callback: grpc.sendUnaryData<ExecuteResponse>,
    leaseId: string,
    deadlineUnixMs: number,
    response: ExecuteResponse,
  ): Promise<void> {
    if (call.cancelled || Date.now() >= deadlineUnixMs - answerNearDeadlineMs) {
      try {
        await ledger.release(cluster, leaseId);
      } catch (error) {
        logger.warn({ err: error, leaseId }, 'could not release lease; the next heartbeats give its slot back');
      }
    }
    running.delete(leaseId);
    callback(null, response);
  }

  const profiler = new WorkerProfiler(workerId, logger);
  server.addService(withTolerantDeserializers(WorkerService.service, ['Execute', 'Profile']), {
    Execute: executeOrLog,
    Profile: profiler.handle,
  } as grpc.UntypedServiceImplementation);
  const boundPort = await new Promise<number>((resolve, reject) =>
    server.bindAsync(`${config.host}:${config.port}`, credentials, (error, port) => (error ? reject(error) : resolve(port))),
  );
  const advertiseHost = config.advertiseHost ?? config.host;
  const address = `${advertiseHost.includes(':') ? `[${advertiseHost}]` : advertiseHost}:${boundPort}`;
  // Heap, GC, event loop and task figures, for the admin UI's workers table (tasks run only once the server is bound).
  const reporter = new WorkerReporter();

  let markedUnreachable = false;
  /** A heartbeat of this process got through: its address is in the ledger unless the ledger lost the worker (then written anyway). */
  let heartbeatSucceeded = false;
  // A large cluster spreads its heartbeats out (the ledger says by how much: LedgerOptions.workersAtFullHeartbeatRate).
  let heartbeatScale = 1;
  async function heartbeat(): Promise<void> {
    const reply = await ledger.heartbeat(cluster, {
      workerId,
      address,
      capacity: gate.maxParallelism,
      draining,
      heldLeaseIds: heldLeaseIds(),
      // A lease reserved on this worker reaches it within one of its periods, or it was not sent.
      dispatchGraceMs: config.heartbeatIntervalMs * heartbeatScale,
      addressUnchanged: heartbeatSucceeded,
    });
    heartbeatSucceeded = true;
    heartbeatScale = reply.heartbeatScale;
    if (reply.leasesDropped > 0) metrics.ledgerRepairs.inc({ repair: 'dropped' }, reply.leasesDropped);
    if (reply.leasesRestored > 0) metrics.ledgerRepairs.inc({ repair: 'restored' }, reply.leasesRestored);
    if (reply.leasesDropped + reply.leasesRestored > 0)
      logger.debug({ dropped: reply.leasesDropped, restored: reply.leasesRestored }, "heartbeat put this worker's leases right in the ledger");
    if (reply.markedUnreachable !== markedUnreachable) {
      markedUnreachable = reply.markedUnreachable;
      if (markedUnreachable) void warnEjected();
      else logger.info({ address }, 'balancers send this worker tasks again');
    }
    if (applyMaxParallelism()) await heartbeat();
    if (reply.drainRequested && !draining) {
      logger.info('an operator asked this worker to drain');
      void close();
    }
  }

  /** Says why balancers ejected this worker (read once per ejection: the heartbeat reply carries only the mark). */
  async function warnEjected(): Promise<void> {
    const reason = await ledger.ejectionReason(cluster, workerId).catch(() => null);
    if (reason === 'failing') {
      logger.warn(
        { address, reason },
        'balancers ejected this worker: its tasks fail far more than those of the other workers on the same integration; they send it no task until their back-off ends (check its handlers, their secrets and config)',
      );
    } else {
      logger.warn(
        { address, reason: 'unreachable' },
        'balancers cannot connect to this worker at the address it advertises: they send it no task until a health check passes (check advertiseHost and the network)',
      );
    }
  }

  /**
   * Sets the gate from the flag (else the worker's own setting); true if it changed. Raising
   * frees slots at once; lowering lets running tasks finish and admits no more until below.
   */
  function applyMaxParallelism(): boolean {
    const flagged = deps.flags?.maxParallelism(cluster);
    const wanted = protection.capacity(flagged ?? ownMaxParallelism);
    if (wanted === gate.maxParallelism) return false;
    const source = protection.current ? 'self-protection' : flagged === undefined ? 'own' : 'flag';
    logger.info({ from: gate.maxParallelism, to: wanted, source }, 'max parallelism changed');
    gate.maxParallelism = wanted;
    return true;
  }
  const advertiseNow = () => {
    if (!draining && applyMaxParallelism()) heartbeat().catch((error: unknown) => logger.warn({ err: error }, 'heartbeat failed'));
  };
  // A flag change is advertised at once rather than at the next heartbeat.
  const stopFollowingFlags = deps.flags?.onChange(advertiseNow);
  // So is a change of self-protection: a stalling worker sheds new work within one check.
  const protectionTimer = protection.enabled
    ? setInterval(() => {
        const before = protection.current;
        if (!protection.check()) return;
        const now = protection.current;
        if (now && !before) logger.warn({ ...now }, 'self-protection: advertising fewer slots until the worker recovers');
        else if (!now) logger.info({ reason: before?.reason }, 'self-protection: recovered, advertising every slot');
        advertiseNow();
      }, config.protectCheckIntervalMs)
    : undefined;
  protectionTimer?.unref();

  let heartbeatTimer: NodeJS.Timeout | undefined;
  let heartbeatsStopped = false;
  const reportTtlMs = workerReportTtlMs(config.reportIntervalMs);
  let nextReportAtMs = performance.now() + config.reportIntervalMs;
  const scheduleHeartbeat = () => {
    if (heartbeatsStopped) return;
    heartbeatTimer = setTimeout(() => {
      // The report rides with the heartbeat: sent in the same turn, both go to Redis in one
      // write on this connection (auto-pipelining), so Redis reads one request, not two.
      if (performance.now() >= nextReportAtMs) {
        nextReportAtMs = performance.now() + config.reportIntervalMs - config.heartbeatIntervalMs / 2;
        reports
          .publish(workerId, { ...reporter.next(), selfProtection: protection.current }, reportTtlMs)
          .catch((error: unknown) => logger.debug({ err: error }, 'worker report failed'));
      }
      heartbeat()
        .catch((error: unknown) => {
          heartbeatFailures++;
          logger.warn({ err: error }, 'heartbeat failed');
        })
        .finally(scheduleHeartbeat);
    }, config.heartbeatIntervalMs * heartbeatScale);
    heartbeatTimer.unref();
  };

  try {
    await heartbeat();
  } catch (error) {
    server.forceShutdown();
    reporter.close();
    throw error;
  }
  setHealth('SERVING');
  scheduleHeartbeat();
  const latencyTimer = setInterval(() => {
    latency.flush().catch((error: unknown) => logger.debug({ err: error }, 'latency report failed; kept for the next one'));
  }, config.latencyReportIntervalMs);
  latencyTimer.unref();
  logger.info({ workerId, cluster, address, maxParallelism: gate.maxParallelism }, 'worker ready');

  const leave = async () => {
    stopFollowingFlags?.();
    clearInterval(protectionTimer);
    closeProtection();
    heartbeatsStopped = true;
    clearTimeout(heartbeatTimer);
    clearInterval(latencyTimer);
    reporter.close();
    await reports.remove(workerId).catch((error: unknown) => logger.debug({ err: error }, 'could not remove the worker report; it expires'));
    await latency.flush().catch((error: unknown) => logger.debug({ err: error }, 'last latency report failed'));
    await httpAgent.close().catch(() => undefined);
    await ledger
      .deregister(cluster, workerId)
      .catch((error: unknown) => logger.warn({ err: error }, 'could not leave the ledger; the sweep will remove this worker'));
  };

  const close = once(async () => {
    draining = true;
    // Tasks waiting in the local queue have not started: they go back to their balancers.
    gate.withdrawAll();
    profiler.stop();
    setHealth('NOT_SERVING');
    // Leave the free set at once so no balancer picks this worker any more.
    await heartbeat().catch(() => undefined);
    if (gate.inflight > 0) {
      logger.info({ inflight: gate.inflight }, 'draining: waiting for running tasks');
      await new Promise<void>((resolve) => {
        drained = resolve;
        setTimeout(resolve, config.drainTimeoutMs).unref();
      });
    }
    await leave();
    if (gate.inflight > 0) {
      // drainTimeoutMs passed: stop what still runs rather than hang.
      logger.warn({ inflight: gate.inflight, drainTimeoutMs: config.drainTimeoutMs }, 'drain timed out: aborting running tasks');
      for (const task of running.values()) task.abort.abort(new HeadroomError(workerErrorCodes.workerStopped, 'the worker stopped: drain timed out'));
      server.forceShutdown();
    } else {
      await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
    }
    logger.info('worker stopped');
    markStopped();
  });

  const destroy = once(async () => {
    draining = true;
    gate.withdrawAll();
    profiler.stop();
    for (const task of running.values()) task.abort.abort(new HeadroomError(workerErrorCodes.workerStopped, 'the worker is stopping'));
    server.forceShutdown();
    await leave();
    markStopped();
  });

  return {
    workerId,
    cluster,
    address,
    registry,
    async setMaxParallelism(maxParallelism: number) {
      ownMaxParallelism = parseConfig('max parallelism', settings.positiveInt(maxParallelismLimit), maxParallelism);
      await heartbeat();
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
      completed,
      failed,
      draining,
      heartbeatFailures,
      selfProtection: protection.current,
    }),
    stopped,
    close,
    destroy,
  };
}
