import * as grpc from '@grpc/grpc-js';
import { HeadroomError } from '@headroom/common';
import { ledgerErrorCodes } from '@headroom/fleet';

/** Codes a client of Balancer.Submit can get (metadata "headroom-error-code"). */
export const balancerErrorCodes = {
  invalidTask: 'HR_ERR_INVALID_TASK',
  queueFull: 'HR_ERR_QUEUE_FULL',
  shed: 'HR_ERR_SHED',
  /** The task's integration has its limit of tasks in flight (or is at its start rate), and its share of this balancer's queue waits already; retryable. */
  integrationAtLimit: 'HR_ERR_INTEGRATION_AT_LIMIT',
  deadlineExceeded: 'HR_ERR_DEADLINE_EXCEEDED',
  workerLost: 'HR_ERR_WORKER_LOST',
  /** Every worker tried refused the task or could not be reached; it did not run. */
  noWorkerTookIt: 'HR_ERR_NO_WORKER_TOOK_IT',
  noRoute: 'HR_ERR_NO_ROUTE',
  /** Every worker of the cluster refused the task for want of a handler for its integration; it did not run. */
  noHandler: 'HR_ERR_NO_HANDLER',
  shuttingDown: 'HR_ERR_SHUTTING_DOWN',
  cancelled: 'HR_ERR_CANCELLED',
  internal: 'HR_ERR_INTERNAL',
} as const;

/** The one place codes map to gRPC statuses. */
const statusByCode: Record<string, grpc.status> = {
  [balancerErrorCodes.invalidTask]: grpc.status.INVALID_ARGUMENT,
  [balancerErrorCodes.queueFull]: grpc.status.RESOURCE_EXHAUSTED,
  [balancerErrorCodes.shed]: grpc.status.RESOURCE_EXHAUSTED,
  [balancerErrorCodes.integrationAtLimit]: grpc.status.RESOURCE_EXHAUSTED,
  [balancerErrorCodes.deadlineExceeded]: grpc.status.DEADLINE_EXCEEDED,
  [balancerErrorCodes.workerLost]: grpc.status.UNAVAILABLE,
  [balancerErrorCodes.noWorkerTookIt]: grpc.status.UNAVAILABLE,
  [balancerErrorCodes.noRoute]: grpc.status.FAILED_PRECONDITION,
  [balancerErrorCodes.noHandler]: grpc.status.UNIMPLEMENTED,
  [balancerErrorCodes.shuttingDown]: grpc.status.UNAVAILABLE,
  [balancerErrorCodes.cancelled]: grpc.status.CANCELLED,
  [ledgerErrorCodes.unavailable]: grpc.status.UNAVAILABLE,
};

export function grpcStatusOf(code: string): grpc.status {
  return statusByCode[code] ?? grpc.status.INTERNAL;
}

export function invalidTask(field: string, message: string): HeadroomError {
  return new HeadroomError(balancerErrorCodes.invalidTask, `${field}: ${message}`);
}

/** How a call fails, as the client sees it, whatever serves it: gRPC status, details, and the metadata. */
export interface CallFailure {
  status: grpc.status;
  /** "<code>: <message>" (grpc-message). */
  details: string;
  /** Metadata "headroom-error-code". */
  errorCode: string;
  /** Metadata "retry-after-ms", when the same request may succeed later. */
  retryAfterMs: number | undefined;
}

/** Turns any error into the failure a client sees: its code's gRPC status, the code and the retry hint. */
export function toCallFailure(error: unknown): CallFailure {
  const coded = error instanceof HeadroomError ? error : new HeadroomError(balancerErrorCodes.internal, 'internal error', { cause: error });
  return { status: grpcStatusOf(coded.code), details: `${coded.code}: ${coded.message}`, errorCode: coded.code, retryAfterMs: coded.retryAfterMs };
}

/** A CallFailure as grpc-js's server sends it, with code and retry hint as metadata. */
export function serviceErrorOf(failure: CallFailure): Partial<grpc.ServiceError> {
  const metadata = new grpc.Metadata();
  metadata.set('headroom-error-code', failure.errorCode);
  if (failure.retryAfterMs !== undefined) metadata.set('retry-after-ms', String(failure.retryAfterMs));
  return { code: failure.status, details: failure.details, metadata };
}

/** Turns any error into the gRPC error a client sees, with code and retry hint as metadata. */
export function toServiceError(error: unknown): Partial<grpc.ServiceError> {
  return serviceErrorOf(toCallFailure(error));
}
