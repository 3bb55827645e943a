/**
 * Sending one task to a balancer and saying how it ended: the one classification of answers
 * that the load generator, the benchmarks' generator and the fault suite share.
 */
import * as grpc from '@grpc/grpc-js';
import { BalancerService, metadataKeys, type BalancerClient, type SubmitResponse__Output, type Task } from '@headroom/proto';

/** Where and how a task ran, as the balancer's answer says (Placement), in numbers. */
export interface PlacementFigures {
  cluster: string;
  workerId: string;
  /** In the balancer's queue, waiting for a slot (Placement.queue_wait_ms). */
  balancerQueueWaitMs: number;
  /** In the worker's own queue (Placement.worker_queue_wait_ms). */
  workerQueueWaitMs: number;
  /** The handler's own time (Placement.run_ms). */
  runMs: number;
}

/**
 * How one Balancer.Submit ended. `ok`: the balancer answered; the task ran where `placement`
 * says, or its handler failed (`response.error`, an answer-level error). Not `ok`: the call
 * failed with a gRPC status; `code` is the balancer's headroom-error-code, or GRPC_<STATUS>
 * when the error carries none (`coded` false: a transport failure, a deadline, a cancel).
 */
export type SubmitAnswer =
  | { ok: true; response: SubmitResponse__Output; placement: PlacementFigures | undefined }
  | { ok: false; status: grpc.status; code: string; coded: boolean; details: string; retryAfterMs: string | undefined };

/** The code of a failed call to a balancer or a worker: its headroom-error-code, or GRPC_<STATUS>. */
export function errorCodeOf(error: grpc.ServiceError): { code: string; coded: boolean } {
  const coded = error.metadata?.get(metadataKeys.errorCode)[0];
  return coded === undefined ? { code: `GRPC_${grpc.status[error.code] ?? error.code}`, coded: false } : { code: String(coded), coded: true };
}

export function placementFigures(response: SubmitResponse__Output): PlacementFigures | undefined {
  const placement = response.placement;
  if (!placement) return undefined;
  return {
    cluster: placement.cluster,
    workerId: placement.workerId,
    balancerQueueWaitMs: Number(placement.queueWaitMs),
    workerQueueWaitMs: Number(placement.workerQueueWaitMs),
    runMs: Number(placement.runMs),
  };
}

export function classifySubmitAnswer(error: grpc.ServiceError | null, response: SubmitResponse__Output | undefined): SubmitAnswer {
  if (!error) {
    const answered = response ?? ({} as SubmitResponse__Output);
    return { ok: true, response: answered, placement: placementFigures(answered) };
  }
  const { code, coded } = errorCodeOf(error);
  return { ok: false, status: error.code, code, coded, details: error.details, retryAfterMs: error.metadata?.get(metadataKeys.retryAfterMs)[0]?.toString() };
}

/**
 * The call's gRPC deadline comes this long after the task's own: a task that cannot start in
 * time is answered by the balancer with its coded error (HR_ERR_DEADLINE_EXCEEDED), instead of
 * the client giving up at the same moment with a bare gRPC status.
 */
export const callDeadlineMarginMs = 1_000;
/** A task's deadline when it carries none. */
const defaultTaskTimeoutMs = 10_000;

export interface SubmitTaskOptions {
  /** How long after the task's deadline the client stops waiting. @default callDeadlineMarginMs */
  deadlineMarginMs?: number;
  /** Cancels the call (it then answers GRPC_CANCELLED). */
  signal?: AbortSignal;
}

/**
 * One Balancer.Submit. Resolves with the answer whatever it is; rejects only when the call
 * cannot start (the client was closed).
 */
export function submitTask(client: BalancerClient, task: Task, options: SubmitTaskOptions = {}): Promise<SubmitAnswer> {
  const { deadlineMarginMs = callDeadlineMarginMs, signal } = options;
  const deadline = Number(task.deadlineUnixMs ?? Date.now() + defaultTaskTimeoutMs) + deadlineMarginMs;
  return new Promise((resolve) => {
    const call = client.submit({ task }, { deadline }, (error, response) => {
      signal?.removeEventListener('abort', cancel);
      resolve(classifySubmitAnswer(error, response));
    });
    const cancel = () => call.cancel();
    if (signal?.aborted) cancel();
    else signal?.addEventListener('abort', cancel, { once: true });
  });
}

export function connectBalancer(address: string): BalancerClient {
  return new BalancerService(address, grpc.credentials.createInsecure());
}
