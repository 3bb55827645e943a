import type { Dispatcher } from 'undici';
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
