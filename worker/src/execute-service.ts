import { performance } from 'node:perf_hooks';
import * as grpc from '@grpc/grpc-js';
import { BoundedLabelValues, HeadroomError, maxLabelledIntegrations, type Logger } from '@headroom/common';
import { UnreadableRequest, metadataKeys, type ExecuteRequest__Output, type ExecuteResponse, type Task__Output } from '@headroom/proto';
import { workerErrorCodes } from './errors';
import type { ParallelismGate } from './gate';
import type { HandlerMap, TaskContext, TaskHandler } from './handler';
import type { WorkerMetrics } from './metrics';
import { cancelIsTheDeadline, type RunningTask, type RunningTasks } from './running-tasks';

/** What Execute uses of a gRPC call (grpc.ServerUnaryCall has it; unit tests pass a fake). */
export interface ExecuteCall {
  /** An UnreadableRequest when the bytes did not decode (withTolerantDeserializers). */
  readonly request: ExecuteRequest__Output | UnreadableRequest;
  readonly cancelled: boolean;
  on(event: 'cancelled', listener: () => void): unknown;
  off(event: 'cancelled', listener: () => void): unknown;
  sendMetadata(metadata: grpc.Metadata): void;
}

/** Where a task's outcome goes besides the metrics: the latency summaries in Redis and the worker's report. */
export interface TaskOutcomes {
  succeeded(integration: string, runMs: number): void;
  failed(integration: string): void;
}

/** What ExecuteService uses of the worker, and nothing more. */
export interface ExecuteContext {
  readonly workerId: string;
  readonly cluster: string;
  /** Also run tasks that name no worker (WorkerOptions.acceptUnaddressed). */
  readonly acceptUnaddressed: boolean;
  readonly handlers: HandlerMap;
  readonly gate: ParallelismGate;
  readonly tasks: RunningTasks;
  readonly metrics: Pick<WorkerMetrics, 'refusals' | 'localQueueWait' | 'taskDuration' | 'handlerErrors'>;
  readonly outcomes: TaskOutcomes;
  readonly httpAgent: TaskContext['httpAgent'];
  readonly logger: Logger;
  /** The worker drains: new tasks are refused, queued ones sent back. */
  isDraining(): boolean;
  /** A task left its slot (a draining worker waits for the last). */
  slotFreed(): void;
}

interface Refusal {
  readonly status: grpc.status;
  readonly code: string;
  readonly message: string;
}

type Admission = { readonly admitted: true; readonly queueWaitMs: number } | { readonly admitted: false; readonly refusal: Refusal };
type QueueOutcome = 'admitted' | 'queue_full' | 'draining' | 'cancelled' | 'deadline';

/**
 * The Execute call: checks the request, admits the task to the parallelism gate (or the local
 * queue, with --overflow queue), runs its handler and answers. Refusals carry a code in the
 * metadata (metadataKeys.errorCode) the balancer branches on; an answered task's outcome is in
 * the response.
 */
export class ExecuteService {
  // Integration names become metric labels: keep their number bounded.
  private readonly integrationLabels = new BoundedLabelValues(maxLabelledIntegrations);
  // Said in the refusal of a task the worker has no handler for.
  private readonly servedIntegrations: string;

  constructor(private readonly context: ExecuteContext) {
    this.servedIntegrations = Object.keys(context.handlers)
      .map((name) => JSON.stringify(name))
      .join(', ');
  }

  /**
   * The gRPC handler. grpc-js ignores what a handler returns: a throw outside the task handler's
   * own try would end the process as an unhandled rejection, and take every other running task with it.
   */
  readonly handle = (call: ExecuteCall, callback: grpc.sendUnaryData<ExecuteResponse>): void => {
    this.execute(call, callback).catch((error: unknown) => {
      this.context.logger.error({ err: error }, 'Execute failed outside the task handler');
      try {
        const message = `worker ${this.context.workerId} failed: ${error instanceof Error ? error.message : String(error)}`;
        refuse(callback, { status: grpc.status.INTERNAL, code: workerErrorCodes.handlerFailed, message });
      } catch {
        // The call was answered already.
      }
    });
  };

  private async execute(call: ExecuteCall, callback: grpc.sendUnaryData<ExecuteResponse>): Promise<void> {
    const request = call.request;
    if (request instanceof UnreadableRequest) {
      const message = `the message is not a valid ${request.messageType}: ${request.reason}`;
      return refuse(callback, { status: grpc.status.INVALID_ARGUMENT, code: workerErrorCodes.invalidRequest, message });
    }
    const invalid = this.whyInvalid(request);
    if (invalid !== undefined) return refuse(callback, { status: grpc.status.INVALID_ARGUMENT, code: workerErrorCodes.invalidRequest, message: invalid });
    const task = request.task!;
    const handler = this.context.handlers[task.integration] ?? this.context.handlers['*'];
    if (!handler) {
      // Refused at the gate, not answered: nothing ran, so the balancer offers the task to
      // another worker (and counts the refusal against this one's failure rate).
      this.context.metrics.refusals.inc({ reason: 'no_handler' });
      const message = `worker ${this.context.workerId} has no handler for integration ${JSON.stringify(task.integration)} (it serves ${this.servedIntegrations})`;
      return refuse(callback, { status: grpc.status.UNIMPLEMENTED, code: workerErrorCodes.noHandler, message });
    }
    const admission = await this.admit(call, request.leaseId, task.deadlineUnixMs);
    if (!admission.admitted) return refuse(callback, admission.refusal);
    // Tell the balancer the task started: from here on it must not run it elsewhere
    // unless the task is idempotent.
    const started = new grpc.Metadata();
    started.set(metadataKeys.started, '1');
    call.sendMetadata(started);

    const running = this.context.tasks.start(request.leaseId, task.deadlineUnixMs);
    const response = await this.run(call, task, handler, running, admission.queueWaitMs);
    this.record(task.integration, response);
    await this.context.tasks.stopHolding(running, call.cancelled);
    callback(null, response);
  }

  /** Why the request cannot be run here, or undefined when it can. */
  private whyInvalid(request: ExecuteRequest__Output): string | undefined {
    const { workerId, cluster } = this.context;
    if (!request.task) return 'task is missing';
    if (request.leaseId === '') return 'leaseId is missing';
    if (request.cluster !== cluster) return `cluster is ${JSON.stringify(request.cluster)}, this worker serves ${JSON.stringify(cluster)}`;
    const addressedHere = request.workerId === workerId || (this.context.acceptUnaddressed && request.workerId === '');
    if (addressedHere) return undefined;
    const hint = request.workerId === '' ? ' (start it with acceptUnaddressed to run tasks that name no worker)' : '';
    return `workerId is ${JSON.stringify(request.workerId)}, this worker is ${JSON.stringify(workerId)}${hint}`;
  }

  /** A slot for the task: at once, after a wait in the local queue, or a refusal. */
  private async admit(call: ExecuteCall, leaseId: string, deadlineUnixMs: number): Promise<Admission> {
    const { gate, metrics, workerId } = this.context;
    if (this.context.isDraining()) {
      metrics.refusals.inc({ reason: 'draining' });
      return refused(grpc.status.RESOURCE_EXHAUSTED, workerErrorCodes.draining, `worker ${workerId} is draining`);
    }
    if (call.cancelled) {
      return cancelIsTheDeadline(deadlineUnixMs)
        ? refused(grpc.status.DEADLINE_EXCEEDED, workerErrorCodes.deadlineExceeded, 'the deadline passed before the task started')
        : refused(grpc.status.CANCELLED, workerErrorCodes.cancelled, 'the balancer cancelled the task before it started');
    }
    if (gate.tryEnter()) return { admitted: true, queueWaitMs: 0 };
    if (gate.queueLimit === 0) {
      metrics.refusals.inc({ reason: 'full' });
      return refused(grpc.status.RESOURCE_EXHAUSTED, workerErrorCodes.full, `worker ${workerId} runs ${gate.inflight} of ${gate.maxParallelism} tasks`);
    }
    const queuedAt = performance.now();
    const waited = await this.waitForSlot(call, leaseId, deadlineUnixMs);
    if (waited !== 'admitted') {
      metrics.refusals.inc({ reason: waited });
      return { admitted: false, refusal: this.queueRefusal(waited) };
    }
    const queueWaitMs = performance.now() - queuedAt;
    metrics.localQueueWait.observe(queueWaitMs / 1000);
    return { admitted: true, queueWaitMs };
  }

  /** Waits in the local queue for a slot: until one is free (it is then held), or why not. */
  private async waitForSlot(call: ExecuteCall, leaseId: string, deadlineUnixMs: number): Promise<QueueOutcome> {
    const ticket = this.context.gate.wait();
    if (!ticket) return 'queue_full';
    this.context.tasks.enqueue(leaseId);
    let why: 'cancelled' | 'deadline' = 'deadline';
    const onCancelled = () => {
      why = cancelIsTheDeadline(deadlineUnixMs) ? 'deadline' : 'cancelled';
      ticket.withdraw();
    };
    call.on('cancelled', onCancelled);
    const deadlineTimer = setTimeout(() => ticket.withdraw(), Math.max(0, deadlineUnixMs - Date.now()));
    deadlineTimer.unref();
    const admitted = await ticket.admitted;
    this.context.tasks.dequeue(leaseId);
    clearTimeout(deadlineTimer);
    call.off('cancelled', onCancelled);
    if (admitted) return 'admitted';
    return this.context.isDraining() ? 'draining' : why;
  }

  private queueRefusal(waited: Exclude<QueueOutcome, 'admitted'>): Refusal {
    const { gate, workerId } = this.context;
    switch (waited) {
      case 'queue_full':
        return {
          status: grpc.status.RESOURCE_EXHAUSTED,
          code: workerErrorCodes.queueFull,
          message: `worker ${workerId} runs ${gate.inflight} of ${gate.maxParallelism} tasks and has ${gate.queued} waiting, its limit (maxQueuedTasks)`,
        };
      case 'draining':
        return { status: grpc.status.RESOURCE_EXHAUSTED, code: workerErrorCodes.draining, message: `worker ${workerId} is draining` };
      case 'cancelled':
        return { status: grpc.status.CANCELLED, code: workerErrorCodes.cancelled, message: 'the balancer cancelled the task while it waited for a slot' };
      case 'deadline':
        return {
          status: grpc.status.DEADLINE_EXCEEDED,
          code: workerErrorCodes.deadlineExceeded,
          message: `the deadline passed while the task waited for a slot on worker ${workerId}`,
        };
    }
  }

  /** Runs the handler of an admitted task, then frees its slot; the response says how it went. */
  private async run(call: ExecuteCall, task: Task__Output, handler: TaskHandler, running: RunningTask, queueWaitMs: number): Promise<ExecuteResponse> {
    const { workerId, cluster, httpAgent } = this.context;
    call.on('cancelled', running.cancel);
    const context: TaskContext = {
      id: task.id,
      key: task.key,
      integration: task.integration,
      priority: task.priority,
      payload: task.payload,
      deadlineUnixMs: task.deadlineUnixMs,
      idempotent: task.idempotent,
      cluster,
      workerId,
      httpAgent,
    };
    const startedAt = performance.now();
    try {
      const result = await handler(context, running.signal);
      running.settle('completed');
      return { workerId, runMs: performance.now() - startedAt, queueWaitMs, result: result === undefined ? Buffer.alloc(0) : Buffer.from(result) };
    } catch (error) {
      running.settle('failed');
      return { workerId, runMs: performance.now() - startedAt, queueWaitMs, error: this.errorOf(error, running.signal, task.id) };
    } finally {
      call.off('cancelled', running.cancel);
      this.context.gate.leave();
      this.context.slotFreed();
    }
  }

  /** A handler's failure as the answer says it: its code, or the abort's (deadline, cancel), else HR_ERR_HANDLER_FAILED. */
  private errorOf(error: unknown, signal: AbortSignal, taskId: string): NonNullable<ExecuteResponse['error']> {
    // A handler that stops because its signal aborted reports the abort's reason (deadline, cancel).
    const coded = error instanceof HeadroomError ? error : signal.reason instanceof HeadroomError ? signal.reason : undefined;
    if (coded) return { code: coded.code, message: coded.message, retryAfterMs: coded.retryAfterMs ?? 0 };
    this.context.logger.debug({ err: error, taskId }, 'handler failed');
    return { code: workerErrorCodes.handlerFailed, message: error instanceof Error ? error.message : String(error) };
  }

  private record(integrationName: string, response: ExecuteResponse): void {
    const { cluster, metrics, outcomes } = this.context;
    const integration = this.integrationLabels.of(integrationName);
    metrics.taskDuration.observe({ cluster, integration, outcome: response.error ? 'error' : 'ok' }, Number(response.runMs) / 1000);
    if (response.error) {
      metrics.handlerErrors.inc({ integration, code: response.error.code });
      outcomes.failed(integration);
    } else {
      outcomes.succeeded(integration, Number(response.runMs));
    }
  }
}

function refused(status: grpc.status, code: string, message: string): Admission {
  return { admitted: false, refusal: { status, code, message } };
}

function refuse(callback: grpc.sendUnaryData<ExecuteResponse>, refusal: Refusal): void {
  const metadata = new grpc.Metadata();
  metadata.set(metadataKeys.errorCode, refusal.code);
  callback({ code: refusal.status, details: refusal.message, metadata });
}
