import { HeadroomError, type Logger } from '@headroom/common';
import { leaseNonceOf } from '@headroom/fleet';
import { workerErrorCodes } from './errors';

/**
 * A cancel that comes this close to the task's deadline, or after it, is the deadline: the
 * caller's own timer for the same deadline ended the call a moment before ours fired (a loaded
 * event loop runs timers late; the two hosts' clocks differ by a few ms). Reporting it as a cancel
 * would tell the caller the wrong story.
 */
export const cancelCountsAsDeadlineWithinMs = 50;
export const cancelIsTheDeadline = (deadlineUnixMs: number): boolean => Date.now() >= deadlineUnixMs - cancelCountsAsDeadlineWithinMs;
/**
 * An answer this close to the task's deadline, or after it, may not reach the balancer (its call
 * ends at the deadline): the worker releases the lease itself. Wider than the cancel margin, as
 * an answer takes a while on its way (a loaded event loop, the network).
 */
export const answerNearDeadlineMs = 250;

/** A task admitted to a slot, from its start to its answer. */
export interface RunningTask {
  readonly leaseId: string;
  readonly deadlineUnixMs: number;
  /** Aborts when the deadline passes, the caller cancels, or the worker stops. */
  readonly signal: AbortSignal;
  /** The caller ended the call: aborts the handler (as the deadline when the cancel is the deadline). */
  cancel(): void;
  /** The handler settled: its deadline timer stops and its outcome counts. Its lease stays held until `stopHolding`. */
  settle(outcome: 'completed' | 'failed'): void;
}

export interface RunningTasksContext {
  readonly workerId: string;
  /** Ends a lease in the ledger (Ledger.release for this worker's cluster). */
  releaseLease(leaseId: string): Promise<unknown>;
  readonly logger: Logger;
}

/**
 * The leases this worker holds, and the tasks behind them: queued in the local queue or running,
 * from admission to answer. The heartbeat reports them (the ledger ends the worker's other leases);
 * the worker releases a lease itself only when its balancer will not (see `stopHolding`).
 */
export class RunningTasks {
  // Bounded by the gate: one entry per admitted task.
  private readonly running = new Map<string, AbortController>();
  // Bounded by the local queue's limit: leases of tasks waiting there for a slot.
  private readonly queuedLeaseIds = new Set<string>();
  // A subset of `running`: answered tasks whose lease this worker is releasing itself (stopHolding).
  private readonly releasing = new Set<string>();
  private completedCount = 0;
  private failedCount = 0;

  constructor(private readonly context: RunningTasksContext) {}

  /** Tasks whose handler finished without an error. */
  get completed(): number {
    return this.completedCount;
  }

  /** Tasks whose handler threw (or stopped on its abort signal). */
  get failed(): number {
    return this.failedCount;
  }

  /** Tasks admitted and not yet answered. */
  get runningCount(): number {
    return this.running.size;
  }

  get queuedCount(): number {
    return this.queuedLeaseIds.size;
  }

  /** A task waits in the local queue: its lease is held (the heartbeat keeps it) until `dequeue`. */
  enqueue(leaseId: string): void {
    this.queuedLeaseIds.add(leaseId);
  }

  dequeue(leaseId: string): void {
    this.queuedLeaseIds.delete(leaseId);
  }

  /** Starts holding an admitted task, in the same turn as its admission (a heartbeat never sees it in neither). */
  start(leaseId: string, deadlineUnixMs: number): RunningTask {
    const abort = new AbortController();
    this.running.set(leaseId, abort);
    const deadlineTimer = setTimeout(
      () => abort.abort(new HeadroomError(workerErrorCodes.deadlineExceeded, 'task deadline passed')),
      Math.max(0, deadlineUnixMs - Date.now()),
    );
    deadlineTimer.unref();
    return {
      leaseId,
      deadlineUnixMs,
      signal: abort.signal,
      cancel: () =>
        abort.abort(
          cancelIsTheDeadline(deadlineUnixMs)
            ? new HeadroomError(workerErrorCodes.deadlineExceeded, 'task deadline passed (the caller ended the call at it)')
            : new HeadroomError(workerErrorCodes.cancelled, 'the balancer cancelled the task'),
        ),
      settle: (outcome) => {
        clearTimeout(deadlineTimer);
        if (outcome === 'completed') this.completedCount++;
        else this.failedCount++;
      },
    };
  }

  /**
   * Stops holding an answered task's lease. The balancer that receives the answer releases the
   * lease, batched with its other calls to Redis. When the caller left it will not, nor when the
   * task's deadline passed (or nearly): its call ended at the deadline while the answer was on its
   * way, and the answer is lost. The lease is then released here, and no longer reported as held
   * from then on: a heartbeat that reported it and ran after the release would write its record
   * back, and count it in its cluster and integration, for a period. Either the release or a
   * heartbeat then drops the record, and frees the slot once. Left to the heartbeats, such slots
   * came back a period late each, and under an incident, where tasks run out their deadlines,
   * that was enough capacity lost to keep the queue's head expiring after the upstream was fast
   * again (faults/test/incident-recovery.test.ts).
   */
  async stopHolding(task: RunningTask, callerLeft: boolean): Promise<void> {
    if (callerLeft || Date.now() >= task.deadlineUnixMs - answerNearDeadlineMs) {
      this.releasing.add(task.leaseId);
      try {
        await this.context.releaseLease(task.leaseId);
      } catch (error) {
        this.context.logger.warn({ err: error, leaseId: task.leaseId }, 'could not release lease; the next heartbeats give its slot back');
      } finally {
        this.releasing.delete(task.leaseId);
      }
    }
    this.running.delete(task.leaseId);
  }

  /** Aborts every running task with `reason` (the worker stops); their leases stay held until answered. */
  abortAll(reason: HeadroomError): void {
    for (const abort of this.running.values()) abort.abort(reason);
  }

  /**
   * The leases to report in a heartbeat: queued and running tasks' leases on this worker. Another
   * worker's lease id, or one the ledger did not give out, is no lease here (the ledger would ignore it).
   */
  *heldLeaseIds(): Generator<string> {
    for (const leaseId of this.running.keys()) if (!this.releasing.has(leaseId) && this.isOwnLease(leaseId)) yield leaseId;
    for (const leaseId of this.queuedLeaseIds) if (this.isOwnLease(leaseId)) yield leaseId;
  }

  private isOwnLease(leaseId: string): boolean {
    return leaseNonceOf(leaseId, this.context.workerId) !== undefined;
  }
}
