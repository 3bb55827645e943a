import { randomUUID } from 'node:crypto';
import type { Task } from '@headroom/proto';
import { CancelledError, InvalidTaskError } from './errors';
import type { SubmitRequest } from './submit-types';

const priorities: ReadonlySet<string> = new Set(['USER_PRESENT', 'BACKGROUND']);

/** The task as sent, or InvalidTaskError naming the field (the balancer checks the limits it alone knows). */
export function taskOf(request: SubmitRequest, defaultDeadlineMs: number): Task & { deadlineUnixMs: number } {
  const invalid = (field: string, message: string) => new InvalidTaskError(`${field}: ${message}`);
  if (typeof request !== 'object' || request === null) throw invalid('request', 'expected an object');
  for (const field of ['integration', 'key'] as const) {
    if (typeof request[field] !== 'string' || request[field].length === 0)
      throw invalid(field, `got ${JSON.stringify(request[field])}, expected a non-empty string`);
  }
  if (request.id !== undefined && (typeof request.id !== 'string' || request.id.length === 0))
    throw invalid('id', `got ${JSON.stringify(request.id)}, expected a non-empty string`);
  const priority = request.priority ?? 'BACKGROUND';
  if (!priorities.has(priority)) throw invalid('priority', `got ${JSON.stringify(priority)}, expected USER_PRESENT or BACKGROUND`);
  const deadlineMs = request.deadlineMs ?? defaultDeadlineMs;
  if (!Number.isSafeInteger(deadlineMs) || deadlineMs <= 0)
    throw invalid('deadlineMs', `got ${JSON.stringify(request.deadlineMs)}, expected a whole number of milliseconds > 0`);
  const { payload } = request;
  if (payload !== undefined && typeof payload !== 'string' && !(payload instanceof Uint8Array)) throw invalid('payload', 'expected a string or a Uint8Array');
  if (request.signal !== undefined && !(request.signal instanceof AbortSignal)) throw invalid('signal', 'expected an AbortSignal');
  return {
    id: request.id ?? randomUUID(),
    key: request.key,
    integration: request.integration,
    priority,
    payload: payload === undefined ? Buffer.alloc(0) : typeof payload === 'string' ? Buffer.from(payload) : payload,
    deadlineUnixMs: Date.now() + deadlineMs,
    idempotent: request.idempotent === true,
  };
}

export function cancelledByCaller(signal: AbortSignal, balancer: string | undefined, attempts?: number): CancelledError {
  const error = new CancelledError('cancelled by the AbortSignal given to submit', { balancer, cause: signal.reason });
  if (attempts !== undefined) error.attempts = attempts;
  return error;
}

/** Resolves true after `ms`, or false as soon as `signal` aborts. */
export function sleepUnlessAborted(ms: number, signal: AbortSignal | undefined): Promise<boolean> {
  return new Promise((resolve) => {
    const onAbort = () => {
      clearTimeout(timer);
      resolve(false);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
