/** Who gives a lease's slot back: this balancer (through `abandon()`), or the worker running its task. */
export type LeaseOwner = 'balancer' | 'worker';

/** Where a lease goes when this balancer is done with it (the ledger and the slot policy, in the balancer). */
export interface LeaseEnds {
  release(cluster: string, leaseId: string): Promise<unknown>;
  /** The balancer's part in a task placed on `workerId` ended (the policy's local counts). */
  finished(cluster: string, workerId: string): void;
}

/**
 * A slot reserved in the ledger on one worker for one task. This balancer owns it from the
 * reservation on, and `abandon()` is the only way it gives the slot back. Once the task started
 * on the worker and no answer came back (`leaveToWorker()`), the worker owns it: the worker
 * releases it when its task ends (or its heartbeat drops it: it no longer holds it), or the sweep
 * does if it died, and `abandon()` does nothing.
 */
export class Lease {
  private currentOwner: LeaseOwner = 'balancer';
  private abandoned: Promise<void> | undefined;

  constructor(
    readonly cluster: string,
    readonly leaseId: string,
    readonly workerId: string,
    /** host:port of the worker. */
    readonly address: string,
    private readonly ends: LeaseEnds,
  ) {}

  get owner(): LeaseOwner {
    return this.currentOwner;
  }

  /**
   * Gives the slot back: the worker answered the task (and let go of the lease), or the task did
   * not run there. Idempotent: a second call returns the first call's promise. Never rejects (a
   * release Redis did not get is made good by the worker's next heartbeats).
   */
  abandon(): Promise<void> {
    if (this.abandoned) return this.abandoned;
    if (this.currentOwner === 'worker') return (this.abandoned = Promise.resolve());
    this.ends.finished(this.cluster, this.workerId);
    this.abandoned = this.ends.release(this.cluster, this.leaseId).then(
      () => undefined,
      () => undefined,
    );
    return this.abandoned;
  }

  /** The task started on the worker and its answer will not reach this balancer: the lease is the worker's now. */
  leaveToWorker(): void {
    if (this.abandoned || this.currentOwner === 'worker') return;
    this.currentOwner = 'worker';
    this.ends.finished(this.cluster, this.workerId);
  }
}
