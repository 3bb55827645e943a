import * as os from 'node:os';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import * as grpc from '@grpc/grpc-js';
import type { RedisConnection } from '@headroom/fleet';
import { Registry } from 'prom-client';
import { ConfigError, HeadroomError, once, parseConfig, silentLogger, type Logger } from '@headroom/common';
import { Ledger, maxLeasesWaiting, OverrideStore, overrideCovers, waitUntilReady, type LedgerOptions } from '@headroom/fleet';
import type { FlagClient } from '@headroom/flags';
import {
  BalancerService,
  addHealthService,
  channelSecurity,
  metadataKeys,
  receiveLimitInterceptor,
  serverCredentials,
  withTolerantDeserializers,
  type SubmitRequest__Output,
  type SubmitResponse,
  type UnreadableRequest,
} from '@headroom/proto';
import { Admission } from './admission';
import { balancerOptionsSchema, type BalancerOptions } from './config';
import { Dispatcher } from './dispatch';
import { balancerErrorCodes, toServiceError } from './errors';
import { createPolicy, type SlotPolicy } from './policies';
import { StaticSplitRouter } from './routing/static-split';
import { FlagRouter } from './routing/flag-router';
import { OverrideFollower } from './routing/override-follower';
import type { ClusterRouter } from './routing/cluster-router';
import { maxSubmitMessageBytes, messageTooLarge, validateSubmit, type ValidTask } from './task-validation';
import { WorkerChannels } from './worker-channels';
import { WorkerDirectory } from './worker-directory';
import { WorkerEjection, processTimer, workerHealthCheck } from './worker-ejection';
import { createBalancerMetrics } from './metrics';

export interface BalancerDependencies {
  /** Ledger connection (not closed by the balancer). */
  redis: RedisConnection;
  /** A second connection, used only for pub/sub (not closed by the balancer). */
  subscriber: RedisConnection;
  ledger?: LedgerOptions;
  logger?: Logger;
  /** Unleash flags: the candidate-cluster flag decides each task's cluster (else the static split from the options). */
  flags?: FlagClient;
  /** Replaces the cluster choice altogether (tests, embedding). The rollback override still applies first. */
  router?: ClusterRouter;
  /** Where the balancer's metrics go; a registry of its own by default. */
  registry?: Registry;
}

export interface BalancerStats {
  balancerId: string;
  address: string;
  policy: string;
  submitted: number;
  succeeded: number;
  failedByCode: Record<string, number>;
  retries: number;
  /** Workers this balancer marked unreachable in the ledger, since start (first and renewed ejections). */
  workersEjected: number;
  /** Queued tasks moved from the candidate to the baseline cluster by a rollback. */
  rerouted: number;
  /** The rollback override version this balancer applied (0: none yet). */
  overrideVersion: number;
  queue: ReturnType<Admission['stats']>;
  workerChannels: number;
}

export interface Balancer {
  readonly balancerId: string;
  /** host:port clients dial. */
  readonly address: string;
  /** Its Prometheus metrics. */
  readonly registry: Registry;
  stats(): BalancerStats;
  /** Stops taking tasks, lets the running ones finish, then stops. Idempotent. */
  close(): Promise<void>;
}

/** Starts a balancer: listening, subscribed to the ledger and sweeping it when this resolves. */
export async function createBalancer(options: BalancerOptions, deps: BalancerDependencies): Promise<Balancer> {
  const config = parseConfig('balancer options', balancerOptionsSchema, options);
  // Certificates are read now: a wrong path stops the start before anything runs.
  const serverSecurity = serverCredentials(config.tls, 'tls');
  const workerSecurity = channelSecurity(config.workerTls, 'workerTls');
  const logger = deps.logger ?? silentLogger;
  const balancerId = config.balancerId ?? `${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const ledger = new Ledger(deps.redis, deps.ledger);
  if (config.queueRecheckIntervalMs * 2 > ledger.options.waiterTtlMs) {
    // Each recheck renews this balancer's "waiting" entries: two must fit in one lifetime.
    throw new ConfigError(
      `queueRecheckIntervalMs (${config.queueRecheckIntervalMs}) must be at most half of the ledger's waiterTtlMs (${ledger.options.waiterTtlMs}), or priority across balancers lapses between rechecks`,
    );
  }
  const clusters = [config.clusters.baseline, config.clusters.candidate];
  const router: ClusterRouter = deps.router ?? (deps.flags ? new FlagRouter(config.clusters, deps.flags) : new StaticSplitRouter(config.clusters, config));
  const directory = new WorkerDirectory(ledger, clusters, config.directoryRefreshIntervalMs, logger);
  const policy: SlotPolicy = createPolicy(config.policy, { ledger, balancerId, directory });
  const admission = new Admission({
    ledger,
    policy,
    balancerId,
    clusters,
    subscriber: deps.subscriber,
    maxQueuedTasks: config.maxQueuedTasks,
    maxQueuedBytes: config.maxQueuedBytes,
    queueRecheckIntervalMs: config.queueRecheckIntervalMs,
    logger,
  });
  const channels = new WorkerChannels({ maxSendMessageBytes: config.maxPayloadBytes + 64 * 1024, maxChannels: config.maxWorkerChannels, security: workerSecurity });
  directory.onRefresh(() => {
    const live = new Set<string>();
    for (const cluster of clusters) for (const worker of directory.workers(cluster)) live.add(worker.address);
    channels.keepOnly(live);
  });

  const counters = { submitted: 0, succeeded: 0, failedByCode: {} as Record<string, number> };
  const registry = deps.registry ?? new Registry();
  const metrics = createBalancerMetrics(
    registry,
    () => ({ ...admission.stats(), maxQueued: config.maxQueuedTasks, maxQueuedBytes: config.maxQueuedBytes }),
    () => ({ ...ledger.settleCounts, ...ledger.batchState(), maxWaiting: maxLeasesWaiting }),
  );
  // Workers this balancer cannot connect to are marked unreachable in the ledger for all balancers.
  const ejection = new WorkerEjection(
    config,
    {
      markUnreachable: (cluster, workerId, forMs, maxMarkedShare) => ledger.markUnreachable(cluster, workerId, forMs, maxMarkedShare),
      clearUnreachable: (cluster, workerId) => ledger.clearUnreachable(cluster, workerId),
      checkHealth: workerHealthCheck(workerSecurity),
      addressOf: (cluster, workerId) => directory.workers(cluster).find((w) => w.workerId === workerId)?.address,
      setTimer: processTimer,
    },
    { ejected: metrics.workersEjected, logger },
  );
  directory.onRefresh((cluster, workers) => ejection.forgetMissing(cluster, workers));
  // The rollback override comes first: a covered integration goes to the baseline, whatever the flags say.
  const override = new OverrideFollower({
    store: new OverrideStore(deps.redis, ledger.options.keyPrefix),
    subscriber: deps.subscriber,
    balancerId,
    heartbeatIntervalMs: config.balancerHeartbeatIntervalMs,
    logger,
    describe: () => ({ queued: admission.queuedByPriority(), trafficFlag: deps.flags?.trafficSplit() ?? null }),
    onApplied: (state): Promise<void> => {
      metrics.overrideVersion.set(state.version);
      metrics.overrideActive.set(state.all || state.integrations.length > 0 ? 1 : 0);
      // Acknowledged once the covered tasks already on their way to a candidate worker have started there.
      return dispatcher.rollBack((integration) => overrideCovers(state, integration)).then((settled) => {
        if (!settled) logger.warn({ version: state.version, rollbackSettleTimeoutMs: config.rollbackSettleTimeoutMs }, 'acknowledging the override before every dispatch to the candidate was answered');
      });
    },
  });
  const dispatcher: Dispatcher = new Dispatcher(config, { admission, workers: channels, reachability: ejection, router, override, metrics, logger });
  let accepting = true;
  let inflightSubmits = 0;
  let allSubmitsDone: (() => void) | undefined;

  function countFailure(labels: { cluster: string; priority: string }, code: string): void {
    counters.failedByCode[code] = (counters.failedByCode[code] ?? 0) + 1;
    metrics.tasks.inc({ ...labels, outcome: code });
  }

  // The request is an UnreadableRequest when its bytes did not decode (withTolerantDeserializers below).
  function submit(call: grpc.ServerUnaryCall<SubmitRequest__Output | UnreadableRequest, SubmitResponse>, callback: grpc.sendUnaryData<SubmitResponse>): void {
    counters.submitted++;
    const receivedAt = performance.now();
    const fail = (error: unknown, labels: { cluster: string; priority: string }) => {
      const serviceError = toServiceError(error);
      const code = String(serviceError.metadata?.get('headroom-error-code')[0]);
      countFailure(labels, code);
      if (code === balancerErrorCodes.internal) logger.error({ err: error }, 'submit failed');
      callback(serviceError);
    };
    const unrouted = { cluster: 'none', priority: 'none' };
    let task: ValidTask;
    try {
      task = validateSubmit(call.request, config);
    } catch (error) {
      return fail(error, unrouted);
    }
    if (!accepting) return fail(new HeadroomError(balancerErrorCodes.shuttingDown, 'the balancer is shutting down', { retryAfterMs: 100 }), unrouted);
    const priority = task.priority === 'USER_PRESENT' ? 'user_present' : 'background';
    const abort = new AbortController();
    const onCancelled = () => abort.abort();
    call.on('cancelled', onCancelled);
    inflightSubmits++;
    void dispatcher
      .dispatch(task, abort.signal)
      .then((result) => {
        // Counted under the cluster the task ended in: a rollback may have moved it to the baseline.
        if (!result.ok) return fail(result.error, { cluster: result.cluster, priority });
        counters.succeeded++;
        metrics.tasks.inc({ cluster: result.cluster, priority, outcome: 'ok' });
        // Time in the balancer itself: all of it but the wait for a slot and the handler's run.
        const { queueWaitMs, runMs } = result.answer.placement ?? {};
        const overheadMs = performance.now() - receivedAt - Number(queueWaitMs ?? 0) - Number(runMs ?? 0);
        metrics.dispatchOverhead.observe({ cluster: result.cluster }, Math.max(0, overheadMs) / 1000);
        callback(null, result.answer);
      })
      .finally(() => {
        call.off('cancelled', onCancelled);
        if (--inflightSubmits === 0) allSubmitsDone?.();
      });
  }

  const server = new grpc.Server({
    'grpc.max_receive_message_length': maxSubmitMessageBytes(config),
    // A message over that limit, or one that does not decode, is the client's mistake: HR_ERR_INVALID_TASK,
    // not grpc-js's RESOURCE_EXHAUSTED / INTERNAL (see proto/src/unreadable-requests.ts for why this way).
    interceptors: [
      receiveLimitInterceptor({
        methodPaths: [BalancerService.service.Submit.path],
        errorCodeKey: metadataKeys.errorCode,
        tooLarge: () => {
          const { code, details, metadata } = toServiceError(messageTooLarge(config));
          return { code: code!, details: details!, metadata: metadata ?? null };
        },
        onTooLarge: () => {
          counters.submitted++;
          countFailure({ cluster: 'none', priority: 'none' }, balancerErrorCodes.invalidTask);
        },
      }),
    ],
  });
  const setHealth = addHealthService(server, ['headroom.v1.Balancer']);
  server.addService(withTolerantDeserializers(BalancerService.service, ['Submit']), { Submit: submit } as grpc.UntypedServiceImplementation);

  let sweepTimer: NodeJS.Timeout | undefined;
  let port: number;
  try {
    await waitUntilReady(deps.subscriber);
    await directory.start();
    await admission.start();
    await override.start();
    sweepTimer = setInterval(() => {
      for (const cluster of clusters) {
        ledger.sweep(cluster, config.heartbeatTimeoutMs).catch((error: unknown) => logger.debug({ err: error }, 'sweep failed'));
      }
    }, config.sweepIntervalMs);
    sweepTimer.unref();
    port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`${config.host}:${config.port}`, serverSecurity, (error, bound) => (error ? reject(error) : resolve(bound))),
    );
  } catch (error) {
    // Leave nothing running behind a failed start (e.g. the port is taken).
    clearInterval(sweepTimer);
    directory.stop();
    await admission.close().catch(() => undefined);
    await override.close();
    server.forceShutdown();
    throw error;
  }
  const address = `${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  await override.register(address).catch((error: unknown) => logger.warn({ err: error }, 'could not register with the control plane yet; the heartbeat tries again'));
  setHealth('SERVING');
  logger.info({ balancerId, address, policy: policy.name, clusters }, 'balancer ready');

  const close = once(async () => {
    accepting = false;
    setHealth('NOT_SERVING');
    // Queued tasks have no slot yet: they get a clear "shutting down" now. Running ones finish.
    await admission.close();
    if (inflightSubmits > 0) await new Promise<void>((resolve) => (allSubmitsDone = resolve));
    clearInterval(sweepTimer);
    directory.stop();
    ejection.close();
    await override.close();
    await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
    channels.closeAll();
    logger.info('balancer stopped');
  });

  return {
    balancerId,
    address,
    registry,
    stats: () => ({
      balancerId,
      address,
      policy: policy.name,
      ...counters,
      failedByCode: { ...counters.failedByCode },
      retries: dispatcher.retries,
      rerouted: dispatcher.rerouted,
      workersEjected: ejection.ejectionCount,
      overrideVersion: override.current.version,
      queue: admission.stats(),
      workerChannels: channels.size,
    }),
    close,
  };
}
