import { performance } from 'node:perf_hooks';
import type { Registry } from 'prom-client';
import { HeadroomError, once, parseConfig, silentLogger } from '@headroom/common';
import type { SubmitRequest__Output, UnreadableRequest } from '@headroom/proto';
import { balancerOptionsSchema, type BalancerOptions } from './config';
import { createDispatchEngine, type DispatchEngineDependencies, type DispatchEngineStats } from './engine';
import type { TaskOutcome } from './metrics';
import { balancerErrorCodes, toCallFailure } from './errors';
import { submitServer, type SubmitAnswer } from './submit-server';
import { maxSubmitMessageBytes, messageTooLarge, validateSubmit, type ValidTask } from './task-validation';

/** Redis connections, ledger options, logger, flags or router, registry, calls to workers: see DispatchEngineDependencies. */
export type BalancerDependencies = DispatchEngineDependencies;

export interface BalancerStats extends Omit<DispatchEngineStats, 'inflight'> {
  address: string;
  submitted: number;
  succeeded: number;
  failedByCode: Record<string, number>;
}

/** The labels of a task refused before it was routed. */
const unrouted = { cluster: 'none', integration: 'none', priority: 'none' };

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

/**
 * Starts a balancer: the gRPC front (Balancer.Submit, health) on a dispatch engine (engine.ts),
 * listening, subscribed to the ledger and sweeping it when this resolves.
 */
export async function createBalancer(options: BalancerOptions, deps: BalancerDependencies): Promise<Balancer> {
  const config = parseConfig('balancer options', balancerOptionsSchema, options);
  const logger = deps.logger ?? silentLogger;
  const counters = { submitted: 0, succeeded: 0, failedByCode: {} as Record<string, number> };
  let accepting = true;
  // Certificates are read now: a wrong path stops the start before anything runs.
  const server = submitServer(config.serverTransport, config.tls, {
    submit,
    maxSubmitMessageBytes: maxSubmitMessageBytes(config),
    // Read and refused before Submit runs: counted here as Submit counts an invalid task.
    tooLarge: () => {
      counters.submitted++;
      countFailure(unrouted, balancerErrorCodes.invalidTask);
      return toCallFailure(messageTooLarge(config));
    },
  });

  let serving = false;
  // Not ready while its calls to workers fail on its own TLS or credentials: clients and
  // orchestrators that read the health status leave it, and no worker is ejected for it.
  const engine = await createDispatchEngine(config, {
    ...deps,
    ownTransportProblemChanged: (problem) => {
      deps.ownTransportProblemChanged?.(problem);
      if (serving && accepting) server.setHealth(problem ? 'NOT_SERVING' : 'SERVING');
    },
  });
  const { balancerId, registry, metrics } = engine;

  function countFailure(labels: Omit<TaskOutcome, 'outcome'>, code: string): void {
    counters.failedByCode[code] = (counters.failedByCode[code] ?? 0) + 1;
    metrics.countTask({ ...labels, outcome: code });
  }

  /**
   * One Submit, whichever transport serves it: `request` is an UnreadableRequest when its bytes
   * did not decode; `cancelled` aborts when the client cancels or its deadline passes.
   */
  function submit(request: SubmitRequest__Output | UnreadableRequest, cancelled: AbortSignal, answer: SubmitAnswer): void {
    counters.submitted++;
    const receivedAt = performance.now();
    const fail = (error: unknown, labels: Omit<TaskOutcome, 'outcome'>) => {
      const failure = toCallFailure(error);
      countFailure(labels, failure.errorCode);
      if (failure.errorCode === balancerErrorCodes.internal) logger.error({ err: error }, 'submit failed');
      answer(failure);
    };
    let task: ValidTask;
    try {
      task = validateSubmit(request, config);
    } catch (error) {
      return fail(error, unrouted);
    }
    if (!accepting) return fail(new HeadroomError(balancerErrorCodes.shuttingDown, 'the balancer is shutting down', { retryAfterMs: 100 }), unrouted);
    const priority = task.priority === 'USER_PRESENT' ? 'user_present' : 'background';
    const { integration } = task;
    void engine.dispatch(task, cancelled).then((result) => {
      // Counted under the cluster the task ended in: a rollback may have moved it to the baseline.
      if (!result.ok) return fail(result.error, { cluster: result.cluster, integration, priority });
      counters.succeeded++;
      metrics.countTask({ cluster: result.cluster, integration, priority, outcome: 'ok' });
      // Time in the balancer itself: all of it but the wait for a slot and the handler's run.
      const { queueWaitMs, runMs } = result.answer.placement ?? {};
      const overheadMs = performance.now() - receivedAt - Number(queueWaitMs ?? 0) - Number(runMs ?? 0);
      metrics.dispatchOverhead.observe({ cluster: result.cluster }, Math.max(0, overheadMs) / 1000);
      answer(null, result.answer);
    });
  }

  let port: number;
  try {
    port = await server.listen(config.host, config.port);
  } catch (error) {
    // Leave nothing running behind a failed start (e.g. the port is taken).
    await engine.close();
    server.destroy();
    throw error;
  }
  const address = `${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  await engine
    .register(address)
    .catch((error: unknown) => logger.warn({ err: error }, 'could not register with the control plane yet; the heartbeat tries again'));
  serving = true;
  server.setHealth(engine.stats().ownTransportProblem === null ? 'SERVING' : 'NOT_SERVING');
  logger.info({ balancerId, address, policy: engine.stats().policy, clusters: [config.clusters.baseline, config.clusters.candidate] }, 'balancer ready');

  const close = once(async () => {
    accepting = false;
    server.setHealth('NOT_SERVING');
    // Queued tasks get a clear "shutting down" now; running ones finish (the engine waits for them).
    await engine.close();
    await server.close();
    logger.info('balancer stopped');
  });

  return {
    balancerId,
    address,
    registry,
    stats: () => {
      const { inflight: _inflight, ...engineStats } = engine.stats();
      return { ...engineStats, address, ...counters, failedByCode: { ...counters.failedByCode } };
    },
    close,
  };
}
