import { HeadroomError, once, type Logger } from '@headroom/common';
import type { HealthStatus } from '@headroom/proto';
import { workerErrorCodes } from './errors';
import type { ParallelismGate } from './gate';
import type { RunningTasks } from './running-tasks';

/** What WorkerShutdown uses of the worker, and nothing more. */
export interface ShutdownContext {
  readonly gate: Pick<ParallelismGate, 'inflight' | 'withdrawAll'>;
  readonly tasks: Pick<RunningTasks, 'abortAll'>;
  /** The gRPC server: a drain lets its calls end, a stop ends them. */
  readonly server: { tryShutdown(callback: (error?: Error) => void): void; forceShutdown(): void };
  setHealth(status: HealthStatus): void;
  /** Stops a CPU profile under way. */
  stopProfiling(): void;
  /** One heartbeat now: a draining worker leaves the ledger's free set with it. */
  beat(): Promise<void>;
  /** Stops the heartbeats and timers, sends what is due and leaves the ledger. */
  leave(): Promise<void>;
  readonly drainTimeoutMs: number;
  readonly logger: Logger;
}

/**
 * How the worker stops: `close` drains (no new task, queued ones sent back, running ones
 * finish, up to drainTimeoutMs), `destroy` stops at once. Either is idempotent, and `stopped`
 * resolves when the worker has stopped, whichever way.
 */
export class WorkerShutdown {
  private drainingNow = false;
  private drained: (() => void) | undefined;
  private markStopped!: () => void;
  /** Resolves when the worker has stopped (close, destroy, or an operator's drain). */
  readonly stopped = new Promise<void>((resolve) => (this.markStopped = resolve));

  constructor(private readonly context: ShutdownContext) {}

  /** Set from the first close or destroy on: new tasks are refused. */
  get draining(): boolean {
    return this.drainingNow;
  }

  /** A task left its slot: the last one ends a drain's wait. */
  slotFreed(): void {
    if (this.drainingNow && this.context.gate.inflight === 0) this.drained?.();
  }

  /** Stops taking tasks, lets running ones finish, leaves the ledger, stops the server. */
  readonly close = once(async () => {
    const { gate, logger, drainTimeoutMs } = this.context;
    this.drainingNow = true;
    // Tasks waiting in the local queue have not started: they go back to their balancers.
    gate.withdrawAll();
    this.context.stopProfiling();
    this.context.setHealth('NOT_SERVING');
    // Leave the free set at once so no balancer picks this worker any more.
    await this.context.beat().catch(() => undefined);
    if (gate.inflight > 0) {
      logger.info({ inflight: gate.inflight }, 'draining: waiting for running tasks');
      await new Promise<void>((resolve) => {
        this.drained = resolve;
        setTimeout(resolve, drainTimeoutMs).unref();
      });
    }
    await this.context.leave();
    if (gate.inflight > 0) {
      // drainTimeoutMs passed: stop what still runs rather than hang.
      logger.warn({ inflight: gate.inflight, drainTimeoutMs }, 'drain timed out: aborting running tasks');
      this.context.tasks.abortAll(new HeadroomError(workerErrorCodes.workerStopped, 'the worker stopped: drain timed out'));
      this.context.server.forceShutdown();
    } else {
      await new Promise<void>((resolve) => this.context.server.tryShutdown(() => resolve()));
    }
    logger.info('worker stopped');
    this.markStopped();
  });

  /** Stops at once: running tasks are aborted and the worker leaves the ledger. */
  readonly destroy = once(async () => {
    this.drainingNow = true;
    this.context.gate.withdrawAll();
    this.context.stopProfiling();
    this.context.tasks.abortAll(new HeadroomError(workerErrorCodes.workerStopped, 'the worker is stopping'));
    this.context.server.forceShutdown();
    await this.context.leave();
    this.markStopped();
  });
}
