import * as os from 'node:os';
import { randomBytes } from 'node:crypto';
import { performance } from 'node:perf_hooks';
import { Registry } from 'prom-client';
import { ConfigError, HeadroomError, once, silentLogger, type Logger } from '@headroom/common';
import { Ledger, maxLeasesWaiting, OverrideStore, overrideCovers, waitUntilReady, type LedgerOptions, type RedisConnection } from '@headroom/fleet';
import type { FlagClient } from '@headroom/flags';
import { channelSecurity, http2ClientTls } from '@headroom/proto';
import { Admission } from './admission';
import { BalancerErrorReports } from './balancer-error-reports';
import type { BalancerConfig } from './config';
import { Dispatcher, type DispatchResult, type WorkerCalls } from './dispatch';
import { balancerErrorCodes } from './errors';
import { createIntegrationLimitMetrics } from './integration-limit-metrics';
import { createBalancerMetrics, type BalancerMetrics } from './metrics';
import { createPolicy, type SlotPolicy } from './policies';
import { StaticSplitRouter } from './routing/static-split';
import { FlagRouter } from './routing/flag-router';
import { OverrideFollower } from './routing/override-follower';
import type { ClusterRouter } from './routing/cluster-router';
import type { ValidTask } from './task-validation';
import { WorkerCallsH2 } from './worker-calls-h2';
import { WorkerChannels, type DispatchOutcome, type WorkerChannelsOptions } from './worker-channels';
import { WorkerDirectory } from './worker-directory';
import { WorkerEjection, processTimer, workerHealthCheck } from './worker-ejection';
import { FailureRate } from './failure-rate';
import { createEjectionMetrics } from './ejection-metrics';
import { OwnTransportFaults, type OwnTransportProblem } from './own-transport-faults';

/** The balancer's settings the engine uses: all but those of its gRPC server (host, port, tls). */
export type DispatchEngineConfig = Omit<BalancerConfig, 'host' | 'port' | 'tls'>;

/**
 * Calls to workers as the engine manages them: `execute`, and the housekeeping WorkerChannels
 * does (closing connections to workers that left, closing all at the end), when it has any.
 */
export interface ManagedWorkerCalls extends WorkerCalls {
  /** Connections open, for stats. */
  readonly size?: number;
  /** Workers not in `live` left the directory: their connections may close (once their calls end). */
  keepOnly?(live: ReadonlySet<string>): void;
  /** Closes every connection (the engine is closing; no call is under way). */
  closeAll?(): void;
}

/** How the engine gets its calls to workers: a factory (the engine owns and closes what it makes), or an instance (the caller's: the engine only calls `execute`). */
export type WorkerCallsSource = ManagedWorkerCalls | ((options: WorkerChannelsOptions) => ManagedWorkerCalls);

export interface DispatchEngineDependencies {
  /** Ledger connection (not closed by the engine). */
  redis: RedisConnection;
  /** A second connection, used only for pub/sub (not closed by the engine). */
  subscriber: RedisConnection;
  ledger?: LedgerOptions;
  logger?: Logger;
  /** Unleash flags: the candidate-cluster flag decides each task's cluster (else the static split from the options). */
  flags?: FlagClient;
  /** Replaces the cluster choice altogether (tests, embedding). The rollback override still applies first. */
  router?: ClusterRouter;
  /** Where the metrics go; a registry of its own by default. */
  registry?: Registry;
  /** Calls to workers; by default as config.workerTransport says (WorkerCallsH2, or WorkerChannels over grpc-js). */
  workerCalls?: WorkerCallsSource;
  /** Told when calls to workers start or stop failing on this balancer's own TLS or credentials (its readiness). */
  ownTransportProblemChanged?: (problem: OwnTransportProblem | undefined) => void;
}

export interface DispatchEngineStats {
  balancerId: string;
  policy: string;
  /** Tasks offered to another worker after one refused, could not be reached, or lost an idempotent task. */
  retries: number;
  /** Workers this engine marked unreachable in the ledger, since start (first and renewed ejections). */
  workersEjected: number;
  /** Queued tasks moved from the candidate to the baseline cluster by a rollback. */
  rerouted: number;
  /** The rollback override version this engine applied (0: none yet). */
  overrideVersion: number;
  queue: ReturnType<Admission['stats']>;
  /** Connections to workers open (0 when the worker calls do not say). */
  workerChannels: number;
  /** Dispatches under way. */
  inflight: number;
  /** Why calls to workers fail on this balancer's own side, while they all do (it reports not ready); null otherwise. */
  ownTransportProblem: OwnTransportProblem | null;
}

/**
 * Everything a balancer does with a task but serve it: cluster choice, the rollback override,
 * a slot through the ledger (waiting in the priority queue when none is free), the call to the
 * worker, another worker before the task started. The gRPC balancer and the proxyless client
 * are two fronts on it.
 */
export interface DispatchEngine {
  /** Its id in the ledger (waiting entries) and in the control plane's balancer register. */
  readonly balancerId: string;
  readonly registry: Registry;
  /** The metrics; the fronts count outcomes (`countTask`) and overhead on them. */
  readonly metrics: BalancerMetrics;
  /**
   * Never rejects. After close() began, answers HR_ERR_SHUTTING_DOWN. A failure before any worker
   * started the task is also counted in Redis as an error of its cluster and integration.
   */
  dispatch(task: ValidTask, signal: AbortSignal): Promise<DispatchResult>;
  /**
   * Registers with the control plane under `address` (what the control plane shows; it does not
   * dial it) and keeps heartbeating, so that rollbacks wait for this engine's acknowledgement.
   */
  register(address: string): Promise<void>;
  stats(): DispatchEngineStats;
  /** Queued tasks get HR_ERR_SHUTTING_DOWN at once; running ones finish; then everything stops. Idempotent. */
  close(): Promise<void>;
}

/**
 * When this balancer's own TLS or credentials fail its calls: not ready after this many in a row,
 * ready again after this long without one, one error log per reason per interval.
 */
const ownTransportFaultSettings = { notReadyAfterFaultsInARow: 3, readyAgainAfterMs: 30_000, logIntervalMs: 10_000 };

/** Starts an engine: subscribed to the ledger, following the override and sweeping when this resolves. */
export async function createDispatchEngine(config: DispatchEngineConfig, deps: DispatchEngineDependencies): Promise<DispatchEngine> {
  const workerSecurity = channelSecurity(config.workerTls, 'workerTls');
  const logger = deps.logger ?? silentLogger;
  const balancerId = config.balancerId ?? `${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const ledger = new Ledger(deps.redis, {
    ...deps.ledger,
    ...(config.defaultIntegrationLimit ? { defaultIntegrationLimit: config.defaultIntegrationLimit } : {}),
  });
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
    maxQueuedShareAtLimit: config.maxQueuedShareAtLimit,
    logger,
  });
  const workerHttp2Tls = http2ClientTls(config.workerTls, 'workerTls');
  const channelOptions: WorkerChannelsOptions = {
    maxSendMessageBytes: config.maxPayloadBytes + 64 * 1024,
    maxChannels: config.maxWorkerChannels,
    security: workerSecurity,
    connectTimeoutMs: config.workerConnectTimeoutMs,
    firstByteTimeoutMs: config.workerFirstByteTimeoutMs,
    probeTls: workerHttp2Tls,
  };
  const source =
    deps.workerCalls ??
    (config.workerTransport === 'http2'
      ? (options: WorkerChannelsOptions) =>
          new WorkerCallsH2({
            maxSendMessageBytes: options.maxSendMessageBytes,
            maxChannels: options.maxChannels,
            tls: workerHttp2Tls,
            connectTimeoutMs: options.connectTimeoutMs,
            firstByteTimeoutMs: options.firstByteTimeoutMs,
          })
      : (options: WorkerChannelsOptions) => new WorkerChannels(options));
  // Only calls the engine made itself are its to close.
  const ownsWorkerCalls = typeof source === 'function';
  const workerCalls: ManagedWorkerCalls = typeof source === 'function' ? source(channelOptions) : source;
  if (ownsWorkerCalls && workerCalls.keepOnly) {
    const keepOnly = workerCalls.keepOnly.bind(workerCalls);
    directory.onRefresh(() => {
      const live = new Set<string>();
      for (const cluster of clusters) for (const worker of directory.workers(cluster)) live.add(worker.address);
      keepOnly(live);
    });
  }

  const registry = deps.registry ?? new Registry();
  const metrics = createBalancerMetrics(
    registry,
    () => ({ ...admission.stats(), maxQueued: config.maxQueuedTasks, maxQueuedBytes: config.maxQueuedBytes }),
    () => ({ ...ledger.settleCounts, ...ledger.batchState(), maxWaiting: maxLeasesWaiting }),
  );
  createIntegrationLimitMetrics(registry, ledger, clusters, metrics.integrationLabel);
  // Workers this engine cannot connect to, or that fail far more than their peers, are marked in the ledger for all balancers.
  const failureRate = new FailureRate({
    windowMs: config.ejectFailureWindowMs,
    minTasks: config.ejectFailureMinTasks,
    shareAbovePeers: config.ejectFailureShareAbovePeers,
  });
  const ejectionMetrics = createEjectionMetrics(registry, failureRate);
  const ejection = new WorkerEjection(
    config,
    {
      markUnreachable: (cluster, workerId, forMs, maxMarkedShare, reason) => ledger.markUnreachable(cluster, workerId, forMs, maxMarkedShare, reason),
      clearEjection: (cluster, workerId, markedUntilMs) => ledger.clearEjection(cluster, workerId, markedUntilMs),
      checkHealth: workerHealthCheck(workerSecurity),
      addressOf: (cluster, workerId) => directory.workers(cluster).find((w) => w.workerId === workerId)?.address,
      setTimer: processTimer,
      nowMs: () => performance.now(),
    },
    { ejected: metrics.workersEjected, returned: ejectionMetrics.workersReturned, failureRate, logger },
  );
  directory.onRefresh((cluster, workers) => ejection.forgetMissing(cluster, workers));
  const ownFaults = new OwnTransportFaults(ownTransportFaultSettings, {
    errors: metrics.transportErrors,
    logger,
    readinessChanged: (problem) => {
      metrics.ready.set(problem ? 0 : 1);
      deps.ownTransportProblemChanged?.(problem);
    },
    nowMs: () => performance.now(),
    setTimer: processTimer,
  });
  const reports = {
    dispatchEnded: (cluster: string, workerId: string, address: string, integration: string, outcome: DispatchOutcome) => {
      ownFaults.dispatchEnded(cluster, address, outcome);
      ejection.dispatchEnded(cluster, workerId, address, integration, outcome);
    },
  };
  // The rollback override comes first: a covered integration goes to the baseline, whatever the flags say.
  const override = new OverrideFollower({
    store: new OverrideStore(deps.redis, ledger.options.keyPrefix),
    subscriber: deps.subscriber,
    balancerId,
    heartbeatIntervalMs: config.balancerHeartbeatIntervalMs,
    logger,
    describe: () => ({ queued: admission.queuedByPriority(), trafficFlag: deps.flags?.trafficSplit() ?? null, waitingAtLimit: admission.waitingAtLimit() }),
    onApplied: (state): Promise<void> => {
      metrics.overrideVersion.set(state.version);
      metrics.overrideActive.set(state.all || state.integrations.length > 0 ? 1 : 0);
      // Acknowledged once the covered tasks already on their way to a candidate worker have started there.
      return dispatcher
        .rollBack((integration) => overrideCovers(state, integration))
        .then((settled) => {
          if (!settled)
            logger.warn(
              { version: state.version, rollbackSettleTimeoutMs: config.rollbackSettleTimeoutMs },
              'acknowledging the override before every dispatch to the candidate was answered',
            );
        });
    },
  });
  const dispatcher: Dispatcher = new Dispatcher(config, {
    admission,
    workerCount: (cluster) => directory.workers(cluster).length,
    workers: workerCalls,
    reports,
    router,
    override,
    metrics,
    logger,
  });
  const balancerErrors = new BalancerErrorReports({
    redis: deps.redis,
    keyPrefix: ledger.options.keyPrefix,
    clusters,
    integrationLabel: metrics.integrationLabel,
    flushIntervalMs: config.balancerHeartbeatIntervalMs,
    logger,
  });

  let sweepTimer: NodeJS.Timeout | undefined;
  const stopAll = async () => {
    clearInterval(sweepTimer);
    await balancerErrors.close();
    directory.stop();
    ejection.close();
    ownFaults.close();
    await override.close();
    if (ownsWorkerCalls) workerCalls.closeAll?.();
  };
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
    metrics.ready.set(1);
  } catch (error) {
    // Leave nothing running behind a failed start.
    await admission.close().catch(() => undefined);
    await stopAll();
    throw error;
  }

  let accepting = true;
  let inflight = 0;
  let allDispatchesDone: (() => void) | undefined;

  return {
    balancerId,
    registry,
    metrics,
    async dispatch(task, signal) {
      if (!accepting)
        return {
          ok: false,
          cluster: 'none',
          workerStarted: false,
          error: new HeadroomError(balancerErrorCodes.shuttingDown, `${balancerId} is shutting down (close() was called)`, { retryAfterMs: 100 }),
        };
      inflight++;
      try {
        const result = await dispatcher.dispatch(task, signal);
        balancerErrors.noteResult(result, task.integration);
        return result;
      } finally {
        if (--inflight === 0) allDispatchesDone?.();
      }
    },
    register: (address) => override.register(address),
    stats: () => ({
      balancerId,
      policy: policy.name,
      retries: dispatcher.retries,
      rerouted: dispatcher.rerouted,
      workersEjected: ejection.ejectionCount,
      overrideVersion: override.current.version,
      queue: admission.stats(),
      workerChannels: workerCalls.size ?? 0,
      inflight,
      ownTransportProblem: ownFaults.currentProblem ?? null,
    }),
    close: once(async () => {
      accepting = false;
      metrics.ready.set(0);
      // Queued tasks have no slot yet: they get a clear "shutting down" now. Running ones finish.
      await admission.close();
      if (inflight > 0) await new Promise<void>((resolve) => (allDispatchesDone = resolve));
      await stopAll();
    }),
  };
}
