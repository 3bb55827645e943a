import * as grpc from '@grpc/grpc-js';
import { metadataKeys, type Placement } from '@headroom/proto';

/** Whether the task may have run (in part) when the error came: what decides if a retry is safe. */
export type RunState = 'not-run' | 'may-have-run' | 'ran';

/**
 * Every failure of `submit` is a HeadroomClientError, of the subclass for its code: callers
 * branch with `instanceof` (or on `code`), never on the message.
 */
export class HeadroomClientError extends Error {
  /** A stable code: the balancer's HR_ERR_* (or the handler's own for TaskFailedError), or the client's. */
  readonly code: string;
  /** When set, trying again after this many milliseconds may succeed (the balancer's hint). */
  readonly retryAfterMs: number | undefined;
  /** Whether the task may have run: a retry of one that may have run is safe only when it is idempotent. */
  readonly runState: RunState;
  /** The balancer that answered (host:port), when one did. */
  balancer: string | undefined;
  /** Calls made for this task, retries included. */
  attempts = 1;

  constructor(
    code: string,
    message: string,
    options: { runState: RunState; retryAfterMs?: number | undefined; balancer?: string | undefined; cause?: unknown },
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.runState = options.runState;
    this.retryAfterMs = options.retryAfterMs;
    this.balancer = options.balancer;
  }
}

type ErrorOptions = ConstructorParameters<typeof HeadroomClientError>[2];

function codedClass(code: string, runState: RunState) {
  return class extends HeadroomClientError {
    static readonly code = code;
    constructor(message: string, options: Omit<ErrorOptions, 'runState'> = {}) {
      super(code, message, { ...options, runState });
    }
  };
}

/** The balancer's queue for the task's cluster was full (HR_ERR_QUEUE_FULL); it did not run. */
export class QueueFullError extends codedClass('HR_ERR_QUEUE_FULL', 'not-run') {}
/** A queued background task was shed to make room for a user-present one (HR_ERR_SHED); it did not run. */
export class ShedError extends codedClass('HR_ERR_SHED', 'not-run') {}
/** The task's integration had its limit of tasks in flight (or started its start rate) and its share of the queue waiting (HR_ERR_INTEGRATION_AT_LIMIT); it did not run. */
export class IntegrationAtLimitError extends codedClass('HR_ERR_INTEGRATION_AT_LIMIT', 'not-run') {}
/** The task's deadline passed (HR_ERR_DEADLINE_EXCEEDED), queued or while it ran. */
export class DeadlineExceededError extends codedClass('HR_ERR_DEADLINE_EXCEEDED', 'may-have-run') {}
/** The worker running the task vanished without an answer (HR_ERR_WORKER_LOST): it may have run in part. */
export class WorkerLostError extends codedClass('HR_ERR_WORKER_LOST', 'may-have-run') {}
/** Every worker tried refused the task or could not be reached (HR_ERR_NO_WORKER_TOOK_IT); it did not run. */
export class NoWorkerTookItError extends codedClass('HR_ERR_NO_WORKER_TOOK_IT', 'not-run') {}
/** No worker of the cluster has a handler for the task's integration (HR_ERR_NO_HANDLER): every one tried refused it before it started. */
export class NoHandlerError extends codedClass('HR_ERR_NO_HANDLER', 'not-run') {}
/** No cluster is configured for the task (HR_ERR_NO_ROUTE): a setup problem, not worth retrying. */
export class NoRouteError extends codedClass('HR_ERR_NO_ROUTE', 'not-run') {}
/** The balancer is shutting down (HR_ERR_SHUTTING_DOWN); the task did not run. Another balancer takes it. */
export class ShuttingDownError extends codedClass('HR_ERR_SHUTTING_DOWN', 'not-run') {}
/** The call was cancelled (HR_ERR_CANCELLED): by the AbortSignal given to submit, or on the balancer's side. */
export class CancelledError extends codedClass('HR_ERR_CANCELLED', 'may-have-run') {}
/** The balancer refused the task as given (HR_ERR_INVALID_TASK): the message names the field. */
export class InvalidTaskError extends codedClass('HR_ERR_INVALID_TASK', 'not-run') {}
/** The balancer could not reach its slot ledger (Redis) (HR_ERR_LEDGER_UNAVAILABLE); the task did not run. */
export class LedgerUnavailableError extends codedClass('HR_ERR_LEDGER_UNAVAILABLE', 'not-run') {}
/** The balancer failed in a way it did not expect (HR_ERR_INTERNAL, or a status without a code). */
export class InternalError extends codedClass('HR_ERR_INTERNAL', 'may-have-run') {}
/** No balancer could be reached (HR_ERR_BALANCER_UNREACHABLE, the client's own): the task was not sent. */
export class BalancerUnreachableError extends codedClass('HR_ERR_BALANCER_UNREACHABLE', 'not-run') {}
/** The connection to the balancer broke after the task was sent (HR_ERR_BALANCER_LOST, the client's own): it may have run. */
export class BalancerLostError extends codedClass('HR_ERR_BALANCER_LOST', 'may-have-run') {}
/** More submits under way than the client's maxInFlight (HR_ERR_CLIENT_OVERLOADED, the client's own); nothing was sent. */
export class ClientOverloadedError extends codedClass('HR_ERR_CLIENT_OVERLOADED', 'not-run') {}

/** The handler ran and failed: `code` is its own (e.g. HR_ERR_UPSTREAM_UNAVAILABLE), with where it ran. */
export class TaskFailedError extends HeadroomClientError {
  constructor(
    code: string,
    message: string,
    readonly placement: Placement | undefined,
    options: Omit<ErrorOptions, 'runState'> = {},
  ) {
    super(code, message, { ...options, runState: 'ran' });
  }
}

const classByCode = new Map<string, new (message: string, options?: Omit<ErrorOptions, 'runState'>) => HeadroomClientError>(
  [
    QueueFullError,
    ShedError,
    IntegrationAtLimitError,
    DeadlineExceededError,
    WorkerLostError,
    NoWorkerTookItError,
    NoHandlerError,
    NoRouteError,
    ShuttingDownError,
    CancelledError,
    InvalidTaskError,
    LedgerUnavailableError,
    InternalError,
  ].map((c) => [c.code, c]),
);

/**
 * The error for a Headroom code (HR_ERR_*): the class for it, or a HeadroomClientError that may
 * have run for a code this client does not know. The proxyless client gets codes without gRPC.
 */
export function errorFromCode(code: string, message: string, options: Omit<ErrorOptions, 'runState'> = {}): HeadroomClientError {
  const Coded = classByCode.get(code);
  if (Coded) return new Coded(message, options);
  return new HeadroomClientError(code, message, { ...options, runState: 'may-have-run' });
}

/**
 * The error for a failed Submit call. A status without a Headroom code came from the
 * connection or grpc-js, not the balancer: UNAVAILABLE before the call was sent (no connection
 * could be made) means the task was not sent; other such statuses mean it may have run.
 */
export function errorFromStatus(error: grpc.ServiceError, balancer: string): HeadroomClientError {
  const code = String(error.metadata?.get(metadataKeys.errorCode)[0] ?? '');
  const hint = Number(error.metadata?.get(metadataKeys.retryAfterMs)[0] ?? NaN);
  const options = { balancer, cause: error, ...(Number.isFinite(hint) && hint >= 0 ? { retryAfterMs: hint } : {}) };
  const message = error.details || error.message;
  if (code !== '') return errorFromCode(code, message, options);
  if (error.code === grpc.status.UNAVAILABLE && notConnected(error.details)) {
    return new BalancerUnreachableError(`balancer ${balancer} could not be reached: ${message}`, options);
  }
  if (error.code === grpc.status.UNAVAILABLE) return new BalancerLostError(`the connection to balancer ${balancer} broke during the call: ${message}`, options);
  if (error.code === grpc.status.DEADLINE_EXCEEDED) return new DeadlineExceededError(`no answer from balancer ${balancer} by the deadline`, options);
  if (error.code === grpc.status.CANCELLED) return new CancelledError(message, options);
  return new InternalError(`balancer ${balancer} answered ${grpc.status[error.code] ?? error.code} without a Headroom code: ${message}`, options);
}

/** grpc-js's words for a call that failed because no connection could be made (pick-first and round-robin). */
function notConnected(details: string): boolean {
  return /No connection established/.test(details);
}
