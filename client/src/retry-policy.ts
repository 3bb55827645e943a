import { z } from 'zod';
import { settings } from '@headroom/common';
import type { HeadroomClientError } from './errors';

/** The retry settings of both clients (through balancers, and proxyless). */
export const retryPolicySchema = z
  .object({
    maxAttempts: settings.positiveInt(20).default(4),
    minDelayMs: settings.positiveInt(60_000).default(100),
    maxDelayMs: settings.positiveInt(600_000).default(5_000),
  })
  .strict()
  .refine((r) => r.minDelayMs <= r.maxDelayMs, { message: 'retry.minDelayMs must not exceed retry.maxDelayMs', path: ['minDelayMs'] });

export interface RetryPolicy {
  /** Calls per task at most, the first included (1 = never retry). */
  maxAttempts: number;
  /** The backoff before the second call (ms), doubled for each call after it. */
  minDelayMs: number;
  /** The longest wait between two calls (ms), the balancer's hint included. */
  maxDelayMs: number;
}

/**
 * Whether a task that failed with `error` may be sent again. Never when it may have run, unless
 * the caller said running it twice is harmless; never what another try cannot fix (a bad task,
 * no route, the caller's own cancellation, a passed deadline, a handler's failure).
 */
export function retryable(error: HeadroomClientError, idempotent: boolean): boolean {
  switch (error.code) {
    case 'HR_ERR_QUEUE_FULL':
    case 'HR_ERR_SHED':
    case 'HR_ERR_INTEGRATION_AT_LIMIT':
    case 'HR_ERR_NO_WORKER_TOOK_IT':
    case 'HR_ERR_SHUTTING_DOWN':
    case 'HR_ERR_LEDGER_UNAVAILABLE':
    case 'HR_ERR_BALANCER_UNREACHABLE':
      return true;
    case 'HR_ERR_WORKER_LOST':
    case 'HR_ERR_BALANCER_LOST':
      return idempotent;
    default:
      return false;
  }
}

/**
 * The wait before call number `attempt + 1` (after `attempt` calls): at least the balancer's
 * hint when it gave one, else an exponential backoff; spread over [1, 1.5) of that so that the
 * clients a full queue turned away do not all come back at once; never above maxDelayMs.
 * (A balancer that could not be reached or is shutting down is not waited for while another
 * one is left to try: the client decides that, see client.ts.)
 */
export function retryDelayMs(policy: RetryPolicy, attempt: number, error: HeadroomClientError, random = Math.random): number {
  const backoffMs = policy.minDelayMs * 2 ** Math.min(attempt - 1, 20);
  const baseMs = error.retryAfterMs ?? backoffMs;
  return Math.min(policy.maxDelayMs, Math.round(baseMs * (1 + random() / 2)));
}
