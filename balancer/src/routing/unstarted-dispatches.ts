interface Pending {
  readonly integration: string;
}

/**
 * Tasks sent to a worker that has not yet said "started". A rollback is acknowledged only once
 * none of those it covers is left, so after a balancer's acknowledgement no task of a covered
 * integration starts on the candidate cluster: not even one already on the wire.
 * Bounded by the tasks this balancer has in flight (one dispatch each at a time).
 */
export class UnstartedDispatches {
  private readonly pending = new Set<Pending>();
  private readonly waiters = new Set<() => void>();

  /** Records a dispatch; call the returned function (idempotent) when the worker said started or the call ended. */
  begin(integration: string): () => void {
    const entry: Pending = { integration };
    this.pending.add(entry);
    return () => {
      if (!this.pending.delete(entry)) return;
      for (const check of this.waiters) check();
    };
  }

  /**
   * Resolves true when no pending dispatch that `covers` selects is left, or false after
   * `timeoutMs` (a worker that never answers must not hold a rollback's acknowledgement).
   * Call after new dispatches of the covered integrations have stopped.
   */
  settled(covers: (integration: string) => boolean, timeoutMs: number): Promise<boolean> {
    const anyLeft = () => {
      for (const entry of this.pending) if (covers(entry.integration)) return true;
      return false;
    };
    if (!anyLeft()) return Promise.resolve(true);
    return new Promise((resolve) => {
      const finish = (settled: boolean) => {
        clearTimeout(timer);
        this.waiters.delete(check);
        resolve(settled);
      };
      const check = () => {
        if (!anyLeft()) finish(true);
      };
      const timer = setTimeout(() => finish(false), timeoutMs);
      timer.unref();
      this.waiters.add(check);
    });
  }
}
