/** What both clients take and give: through balancers (client.ts) and proxyless (proxyless/). */

export type TaskPriority = 'USER_PRESENT' | 'BACKGROUND';

export interface SubmitRequest {
  /** Which integration's handler runs it, e.g. "bank-a". */
  integration: string;
  /** The account or item the task concerns. */
  key: string;
  /** USER_PRESENT when a person waits for the answer (served first); BACKGROUND by default. */
  priority?: TaskPriority;
  /** The handler's input. */
  payload?: Uint8Array | string;
  /** Your id for the task, echoed in logs and the answer; a random UUID by default. */
  id?: string;
  /** Time allowed from now (ms), queueing, retries and running included; defaultDeadlineMs by default (proxyless: defaultTaskTimeoutMs). */
  deadlineMs?: number;
  /** Aborting it cancels the task: the balancer drops it from its queue or cancels it on its worker. */
  signal?: AbortSignal;
  /** Running it twice is harmless: it may then be sent again after it may have run (a worker or balancer lost). */
  idempotent?: boolean;
}

/** Where and how the task ran. */
export interface TaskPlacement {
  cluster: string;
  workerId: string;
  /** Time it waited in the balancer for a free slot (ms). */
  queueWaitMs: number;
  /** Time the handler ran, measured by the worker (ms). */
  runMs: number;
  /** Workers the balancer tried (1 when the first took it). */
  workerAttempts: number;
}

export interface SubmitResult {
  taskId: string;
  /** What the handler returned. */
  result: Buffer;
  placement: TaskPlacement;
  /** The balancer that answered (host:port), or the proxyless client's label (proxyless:<hostname>:<pid>). */
  balancer: string;
  /** Calls made for the task, retries included. */
  attempts: number;
}

export interface ClientStats {
  inFlight: number;
  submitted: number;
  succeeded: number;
  /** Calls sent again after a retryable error. */
  retries: number;
  /** Failures by code; codes past the 100th distinct one count under "other". */
  failedByCode: Record<string, number>;
}
