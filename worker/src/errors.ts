import { HeadroomError } from '@headroom/common';

/** Codes the worker answers with. The balancer branches on them (see balancer/src/dispatch). */
export const workerErrorCodes = {
  /** All slots busy: the task did not start and may go to another worker. */
  full: 'HR_ERR_WORKER_FULL',
  /** All slots busy and the local queue (--overflow queue) full: the task did not start and may go to another worker. */
  queueFull: 'HR_ERR_WORKER_QUEUE_FULL',
  /** The worker is draining: the task did not start and may go to another worker. */
  draining: 'HR_ERR_WORKER_DRAINING',
  /** The request was malformed (a balancer bug or a foreign client). */
  invalidRequest: 'HR_ERR_INVALID_REQUEST',
  /** No handler for the task's integration: refused before it started (the balancer tries another worker). */
  noHandler: 'HR_ERR_NO_HANDLER',
  /** The handler threw something that is not a HeadroomError. */
  handlerFailed: 'HR_ERR_HANDLER_FAILED',
  /** The task's deadline passed while the handler ran. */
  deadlineExceeded: 'HR_ERR_DEADLINE_EXCEEDED',
  /** The balancer cancelled the call (its client gave up). */
  cancelled: 'HR_ERR_CANCELLED',
  /** The worker was destroyed while the handler ran. */
  workerStopped: 'HR_ERR_WORKER_STOPPED',
  /** A CPU profile of this process is already being taken (one at a time). */
  profileRunning: 'HR_ERR_PROFILE_RUNNING',
  /** The profile came out larger than profileLimits.maxCpuprofileBytes. */
  profileTooLarge: 'HR_ERR_PROFILE_TOO_LARGE',
  /** The inspector failed to take the profile. */
  profileFailed: 'HR_ERR_PROFILE_FAILED',
} as const;

/** Throw this from a handler to answer with a code of your own (e.g. HR_ERR_UPSTREAM_TIMEOUT). */
export class TaskFailedError extends HeadroomError {
  constructor(code: string, message: string, options?: { cause?: unknown; retryAfterMs?: number }) {
    super(code, message, options);
    this.name = 'TaskFailedError';
  }
}
