import { performance } from 'node:perf_hooks';
import * as grpc from '@grpc/grpc-js';
import type { Registry } from 'prom-client';
import { HeadroomError, once, parseConfig, silentLogger } from '@headroom/common';
import {
  BalancerService,
  addHealthService,
  metadataKeys,
  receiveLimitInterceptor,
  serverCredentials,
  withTolerantDeserializers,
  type SubmitRequest__Output,
  type SubmitResponse,
  type UnreadableRequest,
} from '@headroom/proto';
import { balancerOptionsSchema, type BalancerOptions } from './config';
import { createDispatchEngine, type DispatchEngineDependencies, type DispatchEngineStats } from './engine';
import { balancerErrorCodes, toServiceError } from './errors';
import { maxSubmitMessageBytes, messageTooLarge, validateSubmit, type ValidTask } from './task-validation';

/** Redis connections, ledger options, logger, flags or router, registry, calls to workers: see DispatchEngineDependencies. */
export type BalancerDependencies = DispatchEngineDependencies;

export interface BalancerStats extends Omit<DispatchEngineStats, 'inflight'> {
  address: string;
  submitted: number;
  succeeded: number;
  failedByCode: Record<string, number>;
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

/**
 * Starts a balancer: the gRPC front (Balancer.Submit, health) on a dispatch engine (engine.ts),
 * listening, subscribed to the ledger and sweeping it when this resolves.
 */
export async function createBalancer(options: BalancerOptions, deps: BalancerDependencies): Promise<Balancer> {
  const config = parseConfig('balancer options', balancerOptionsSchema, options);
  // Certificates are read now: a wrong path stops the start before anything runs.
  const serverSecurity = serverCredentials(config.tls, 'tls');
  const logger = deps.logger ?? silentLogger;
  const engine = await createDispatchEngine(config, deps);
  const { balancerId, registry, metrics } = engine;
  const counters = { submitted: 0, succeeded: 0, failedByCode: {} as Record<string, number> };
  let accepting = true;

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
    void engine
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
      .finally(() => call.off('cancelled', onCancelled));
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

  let port: number;
  try {
    port = await new Promise<number>((resolve, reject) =>
      server.bindAsync(`${config.host}:${config.port}`, serverSecurity, (error, bound) => (error ? reject(error) : resolve(bound))),
    );
  } catch (error) {
    // Leave nothing running behind a failed start (e.g. the port is taken).
    await engine.close();
    server.forceShutdown();
    throw error;
  }
  const address = `${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  await engine.register(address).catch((error: unknown) => logger.warn({ err: error }, 'could not register with the control plane yet; the heartbeat tries again'));
  setHealth('SERVING');
  logger.info({ balancerId, address, policy: engine.stats().policy, clusters: [config.clusters.baseline, config.clusters.candidate] }, 'balancer ready');

  const close = once(async () => {
    accepting = false;
    setHealth('NOT_SERVING');
    // Queued tasks get a clear "shutting down" now; running ones finish (the engine waits for them).
    await engine.close();
    await new Promise<void>((resolve) => server.tryShutdown(() => resolve()));
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
