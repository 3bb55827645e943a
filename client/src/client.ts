import { z } from 'zod';
import { parseConfig, settings } from '@headroom/common';
import { BalancerService, channelSecurity, clientTlsSchema, type BalancerClient, type SubmitResponse__Output, type Task } from '@headroom/proto';
import { BalancerUnreachableError, HeadroomClientError, TaskFailedError, errorFromStatus } from './errors';
import { SubmitTally } from './submit-tally';
import { retryDelayMs, retryable, retryPolicySchema, type RetryPolicy } from './retry-policy';
import { cancelledByCaller, sleepUnlessAborted, taskOf } from './task-request';
import type { ClientStats, SubmitRequest, SubmitResult, TaskPlacement } from './submit-types';

export type { ClientStats, SubmitRequest, SubmitResult, TaskPlacement, TaskPriority } from './submit-types';

const clientOptionsSchema = z
  .object({
    /** The balancers to spread tasks over (host:port); one that cannot be reached is tried last for balancerDownMs. */
    balancers: z.array(settings.hostPort()).min(1, 'expected at least one balancer').max(64, 'expected at most 64 balancers'),
    /** TLS to the balancers (their CA, and a client certificate when they ask for one); plain text without. */
    tls: clientTlsSchema.optional(),
    retry: retryPolicySchema.prefault({}),
    /** The task's deadline when submit is given none (ms from now): the balancer's default task timeout. */
    defaultDeadlineMs: settings.positiveInt(7 * 24 * 3600_000).default(30_000),
    /** Submits under way at most; more are refused at once with ClientOverloadedError. */
    maxInFlight: settings.positiveInt(1_000_000).default(10_000),
    /** How long a balancer that could not be reached is tried only after the others (ms). */
    balancerDownMs: settings.nonNegativeInt(600_000).default(2_000),
    /** The largest answer accepted (bytes): a task's result and its envelope. */
    maxReceiveMessageBytes: settings.positiveInt(2 ** 31 - 1).default(64 * 1024 * 1024 + 64 * 1024),
  })
  .strict();

export type ClientOptions = z.input<typeof clientOptionsSchema>;

export interface HeadroomClient {
  /** Runs one task; rejects with a HeadroomClientError subclass (see errors.ts) when it does not succeed. */
  submit(request: SubmitRequest): Promise<SubmitResult>;
  stats(): ClientStats;
  /** Closes the connections; submits under way fail. */
  close(): void;
}

interface Target {
  address: string;
  client: BalancerClient;
  /** Until then (Date.now() ms) it is tried only after the others: it could not be reached. */
  downUntilMs: number;
}

/** How long after the task's deadline the call itself ends: the balancer answers a coded error at the deadline. */
const answerGraceMs = 1000;

export function createClient(options: ClientOptions): HeadroomClient {
  const config = parseConfig('Headroom client options', clientOptionsSchema, options);
  const security = channelSecurity(config.tls, 'tls');
  const targets: Target[] = config.balancers.map((address) => ({
    address,
    client: new BalancerService(address, security.credentials, {
      ...security.options,
      'grpc.max_receive_message_length': config.maxReceiveMessageBytes,
      'grpc.max_send_message_length': -1,
      // Reconnect soon after a balancer restarts.
      'grpc.initial_reconnect_backoff_ms': 100,
      'grpc.max_reconnect_backoff_ms': 2_000,
    }),
    downUntilMs: 0,
  }));
  const policy: RetryPolicy = config.retry;
  const tally = new SubmitTally(config.maxInFlight);
  let next = 0;

  /** The next balancer in turn that this task has not tried in this round, preferring those not down. */
  function pick(tried: ReadonlySet<Target>): Target {
    const now = Date.now();
    let down: Target | undefined;
    for (let i = 0; i < targets.length; i++) {
      const target = targets[(next + i) % targets.length]!;
      if (tried.has(target)) continue;
      if (target.downUntilMs <= now) {
        next = (next + i + 1) % targets.length;
        return target;
      }
      down ??= target;
    }
    return down ?? targets[next++ % targets.length]!;
  }

  function call(target: Target, task: Task & { deadlineUnixMs: number }, signal: AbortSignal | undefined): Promise<Omit<SubmitResult, 'attempts'>> {
    return new Promise((resolve, reject) => {
      const onAbort = () => pending.cancel();
      const pending = target.client.submit({ task }, { deadline: task.deadlineUnixMs + answerGraceMs }, (error, response) => {
        signal?.removeEventListener('abort', onAbort);
        if (error) {
          return reject(signal?.aborted ? cancelledByCaller(signal, target.address) : errorFromStatus(error, target.address));
        }
        const answer = response as SubmitResponse__Output;
        const placement: TaskPlacement = {
          cluster: answer.placement?.cluster ?? '',
          workerId: answer.placement?.workerId ?? '',
          queueWaitMs: answer.placement?.queueWaitMs ?? 0,
          runMs: answer.placement?.runMs ?? 0,
          workerAttempts: answer.placement?.attempts ?? 0,
        };
        if (answer.error) {
          const { code, message, retryAfterMs } = answer.error;
          return reject(new TaskFailedError(code, message, placement, { balancer: target.address, ...(retryAfterMs > 0 ? { retryAfterMs } : {}) }));
        }
        resolve({ taskId: answer.taskId, result: answer.result ?? Buffer.alloc(0), placement, balancer: target.address });
      });
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }

  async function run(request: SubmitRequest): Promise<SubmitResult> {
    const task = taskOf(request, config.defaultDeadlineMs);
    const idempotent = request.idempotent === true;
    const { signal } = request;
    const tried = new Set<Target>();
    for (let attempt = 1; ; attempt++) {
      if (signal?.aborted) throw cancelledByCaller(signal, undefined, attempt - 1);
      const target = pick(tried);
      try {
        return { ...(await call(target, task, signal)), attempts: attempt };
      } catch (thrown) {
        const error = thrown as HeadroomClientError;
        error.attempts = attempt;
        const unreachable = error instanceof BalancerUnreachableError;
        if (unreachable) target.downUntilMs = Date.now() + config.balancerDownMs;
        if (attempt >= policy.maxAttempts || signal?.aborted || !retryable(error, idempotent)) throw error;
        tried.add(target);
        if (tried.size >= targets.length) tried.clear();
        // Another balancer takes a task that one could not: no wait while one is left to try.
        const elsewhere = (unreachable || error.code === 'HR_ERR_SHUTTING_DOWN') && targets.some((t) => !tried.has(t) && t.downUntilMs <= Date.now());
        const delayMs = elsewhere ? 0 : retryDelayMs(policy, attempt, error);
        if (Date.now() + delayMs >= task.deadlineUnixMs) throw error;
        tally.countRetry();
        if (delayMs > 0 && !(await sleepUnlessAborted(delayMs, signal))) throw cancelledByCaller(signal!, undefined, attempt);
      }
    }
  }

  return {
    submit: (request) => tally.run(() => run(request)),
    stats: () => tally.snapshot(),
    close() {
      for (const target of targets) target.client.close();
    },
  };
}
