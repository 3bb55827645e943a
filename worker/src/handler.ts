import type { Dispatcher } from 'undici';
import { ConfigError } from '@headroom/common';
import type { Priority } from '@headroom/proto';

/** What a handler gets of a task. */
export interface TaskContext {
  readonly id: string;
  readonly key: string;
  readonly integration: string;
  readonly priority: Priority;
  readonly payload: Buffer;
  readonly deadlineUnixMs: number;
  readonly idempotent: boolean;
  readonly cluster: string;
  readonly workerId: string;
  /**
   * The worker's shared HTTP agent: pass it as `dispatcher` to undici's `request` or `fetch`.
   * Its connections per upstream are capped (--max-upstream-connections) and shown in metrics.
   */
  readonly httpAgent: Dispatcher;
}

/**
 * A task handler. `signal` aborts at the task's deadline or when the balancer gives up;
 * pass it to every call that can wait (fetch, timers). The returned bytes are the result.
 */
export type TaskHandler = (task: TaskContext, signal: AbortSignal) => Promise<Uint8Array | string | void>;

/** Handlers by integration; '*' serves integrations that have no handler of their own. */
export type HandlerMap = Readonly<Record<string, TaskHandler>>;

/**
 * The handlers a worker is given, checked before it starts: an object with at least one
 * integration, each a function. A module that exports `{}`, or `{ acme: "not a function" }`,
 * would start a worker that takes tasks it cannot run; it is refused here, naming the entry.
 */
export function checkHandlers(handlers: unknown, where: string): HandlerMap {
  if (typeof handlers !== 'object' || handlers === null || Array.isArray(handlers)) {
    throw new ConfigError(
      `handlers: ${where} exports no \`handlers\` object (got ${Array.isArray(handlers) ? 'an array' : typeof handlers}); expected { [integration]: async (task, signal) => result }`,
    );
  }
  const entries = Object.entries(handlers);
  if (entries.length === 0)
    throw new ConfigError(
      `handlers: ${where} exports an empty \`handlers\` object: the worker would serve no integration; add one, or '*' for every integration`,
    );
  for (const [integration, handler] of entries) {
    if (typeof handler !== 'function') {
      throw new ConfigError(
        `handlers.${integration}: ${where} gives ${handler === null ? 'null' : typeof handler}, expected a function (task, signal) => Promise<result>`,
      );
    }
  }
  return handlers as HandlerMap;
}
