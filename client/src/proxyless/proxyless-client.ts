import { setMaxListeners } from 'node:events';
import * as os from 'node:os';
import { performance } from 'node:perf_hooks';
import { randomBytes } from 'node:crypto';
import type { Registry } from 'prom-client';
import { isHeadroomError, once, silentLogger } from '@headroom/common';
import { createDispatchEngine, validateTask, type DispatchEngineDependencies, type DispatchEngineStats, type ValidTask } from '@headroom/balancer';
import { HeadroomClientError, InternalError, ShuttingDownError, TaskFailedError, errorFromCode } from '../errors';
import { retryDelayMs, retryable, type RetryPolicy } from '../retry-policy';
import { cancelledByCaller, sleepUnlessAborted, taskOf } from '../task-request';
import type { ClientStats, SubmitRequest, SubmitResult, TaskPlacement } from '../submit-types';
import { SubmitTally } from '../submit-tally';
import { parseProxylessOptions, type ProxylessClientOptions } from './options';

/** What the proxyless client needs besides its options: the balancer's dependencies, the ledger's settings being in the options. */
export type ProxylessClientDependencies = Omit<DispatchEngineDependencies, 'ledger'>;

export interface ProxylessClientStats extends ClientStats {
  /** What the balancer's logic in this client did: dispatch retries, its queue, the override it applied. */
  engine: DispatchEngineStats;
}

export interface ProxylessClient {
  /** Its id in the control plane's balancer register. */
  readonly balancerId: string;
  /** The label it registers with instead of an address (`proxyless:<hostname>:<pid>`); SubmitResult.balancer carries it. */
  readonly address: string;
  /** The balancer's metrics (headroom_balancer_*), counted here. */
  readonly registry: Registry;
  /** Runs one task; rejects with a HeadroomClientError subclass (see errors.ts) when it does not succeed: the same as HeadroomClient. */
  submit(request: SubmitRequest): Promise<SubmitResult>;
  stats(): ProxylessClientStats;
  /** Refuses new submits, answers queued ones HR_ERR_SHUTTING_DOWN, lets running ones finish, leaves the register. Idempotent. */
  close(): Promise<void>;
}

/** The signal of a submit given none: never aborts. */
const neverAborted = new AbortController().signal;
// Every submit without a signal shares it, and each call to a worker listens on it while it runs
// (and stops after): more than 10 at once is normal, not the leak Node's warning is about.
setMaxListeners(0, neverAborted);

/**
 * Starts a client that does the balancer's work itself, as gRPC's proxyless service mesh does: it
 * reserves a slot through the ledger (waiting in its own priority queue, registered as a waiter in
 * the ledger like a balancer), calls the worker directly, follows and acknowledges the rollback
 * override, and retries as HeadroomClient does. Bad options reject with a ConfigError naming the
 * field before anything starts.
 */
export async function createProxylessClient(options: ProxylessClientOptions, deps: ProxylessClientDependencies): Promise<ProxylessClient> {
  const config = parseProxylessOptions(options);
  const logger = deps.logger ?? silentLogger;
  const balancerId = config.balancerId ?? `proxyless-${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
  const engine = await createDispatchEngine({ ...config, balancerId }, { ...deps, ledger: config.ledger });
  const { metrics } = engine;
  // The control plane shows it and never dials it; the prefix says there is nothing to dial.
  const address = `proxyless:${os.hostname()}:${process.pid}`;
  await engine
    .register(address)
    .catch((error: unknown) => logger.warn({ err: error }, 'could not register with the control plane yet; the heartbeat tries again'));
  const policy: RetryPolicy = config.retry;
  const tally = new SubmitTally(config.maxInFlight);
  let closing = false;

  /** The request as a task the balancer would accept, or the error the balancer would answer (InvalidTaskError naming the field). */
  function validTaskOf(request: SubmitRequest): ValidTask {
    const task = taskOf(request, config.defaultTaskTimeoutMs);
    const payload = task.payload ?? Buffer.alloc(0);
    try {
      return validateTask(
        {
          id: task.id ?? '',
          key: task.key ?? '',
          integration: task.integration ?? '',
          priority: task.priority as ValidTask['priority'],
          payload:
            typeof payload === 'string'
              ? Buffer.from(payload)
              : Buffer.isBuffer(payload)
                ? payload
                : Buffer.from(payload.buffer, payload.byteOffset, payload.byteLength),
          deadlineUnixMs: task.deadlineUnixMs,
          idempotent: task.idempotent === true,
        },
        config,
      );
    } catch (error) {
      if (isHeadroomError(error)) {
        // Counted as the balancer counts a task it refused before routing.
        metrics.countTask({ cluster: 'none', integration: 'none', priority: 'none', outcome: error.code });
        // HR_ERR_INVALID_TASK, or HR_ERR_DEADLINE_EXCEEDED for a deadline already passed.
        throw errorFromCode(error.code, `${error.code}: ${error.message}`, { balancer: address });
      }
      throw error;
    }
  }

  /** One dispatch through the engine, answered as the balancer's answer is read by HeadroomClient. */
  async function dispatchOnce(task: ValidTask, signal: AbortSignal | undefined): Promise<Omit<SubmitResult, 'attempts'>> {
    const startedAt = performance.now();
    const priority = task.priority === 'USER_PRESENT' ? 'user_present' : 'background';
    const result = await engine.dispatch(task, signal ?? neverAborted);
    if (!result.ok) {
      const error = result.error;
      const code = isHeadroomError(error) ? error.code : InternalError.code;
      metrics.countTask({ cluster: result.cluster, integration: task.integration, priority, outcome: code });
      if (signal?.aborted) throw cancelledByCaller(signal, address);
      if (!isHeadroomError(error)) {
        logger.error({ err: error }, 'submit failed');
        throw new InternalError(`${InternalError.code}: internal error`, { balancer: address, cause: error });
      }
      throw errorFromCode(error.code, `${error.code}: ${error.message}`, {
        balancer: address,
        cause: error,
        ...(error.retryAfterMs !== undefined ? { retryAfterMs: error.retryAfterMs } : {}),
      });
    }
    const { answer } = result;
    metrics.countTask({ cluster: result.cluster, integration: task.integration, priority, outcome: 'ok' });
    const placement: TaskPlacement = {
      cluster: answer.placement?.cluster ?? '',
      workerId: answer.placement?.workerId ?? '',
      queueWaitMs: Number(answer.placement?.queueWaitMs ?? 0),
      runMs: Number(answer.placement?.runMs ?? 0),
      workerAttempts: answer.placement?.attempts ?? 0,
    };
    // Time in the client's balancer logic: all of it but the wait for a slot and the handler's run.
    const overheadMs = performance.now() - startedAt - placement.queueWaitMs - placement.runMs;
    metrics.dispatchOverhead.observe({ cluster: result.cluster }, Math.max(0, overheadMs) / 1000);
    if (answer.error) {
      const { code = '', message = '', retryAfterMs } = answer.error;
      throw new TaskFailedError(code, message, placement, {
        balancer: address,
        ...(retryAfterMs !== undefined && Number(retryAfterMs) > 0 ? { retryAfterMs: Number(retryAfterMs) } : {}),
      });
    }
    const bytes = answer.result ?? Buffer.alloc(0);
    // The worker's answer is a Buffer already (no copy); a string or other view is converted.
    const resultBuffer = Buffer.isBuffer(bytes)
      ? bytes
      : typeof bytes === 'string'
        ? Buffer.from(bytes)
        : Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    return { taskId: answer.taskId ?? task.id, result: resultBuffer, placement, balancer: address };
  }

  /** HeadroomClient's retry loop, with one "balancer": this client's own engine. */
  async function run(request: SubmitRequest): Promise<SubmitResult> {
    const task = validTaskOf(request);
    const { signal } = request;
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw cancelledByCaller(signal, undefined, attempt - 1);
      try {
        return { ...(await dispatchOnce(task, signal)), attempts: attempt };
      } catch (thrown) {
        const error = thrown as HeadroomClientError;
        error.attempts = attempt;
        // Closing: the engine would only answer HR_ERR_SHUTTING_DOWN again.
        if (attempt >= policy.maxAttempts || signal?.aborted || closing || !retryable(error, task.idempotent)) throw error;
        const delayMs = retryDelayMs(policy, attempt, error);
        if (Date.now() + delayMs >= task.deadlineUnixMs) throw error;
        tally.countRetry();
        if (delayMs > 0 && !(await sleepUnlessAborted(delayMs, signal))) throw cancelledByCaller(signal!, undefined, attempt);
      }
    }
  }

  return {
    balancerId: engine.balancerId,
    address,
    registry: engine.registry,
    async submit(request) {
      if (closing) {
        tally.countFailure(ShuttingDownError.code);
        throw new ShuttingDownError('the proxyless client is closed (close() was called)', { balancer: address });
      }
      return tally.run(() => run(request));
    },
    stats: () => ({ ...tally.snapshot(), engine: engine.stats() }),
    close: once(async () => {
      closing = true;
      await engine.close();
    }),
  };
}
