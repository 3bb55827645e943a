/**
 * Workers this balancer could not reach lately. New tasks skip them until the sweep has had
 * time to remove a dead worker from the ledger (about the heartbeat timeout).
 */
export class SuspectWorkers {
  /** Bounded: skip lists passed to the ledger are capped at 32 anyway. */
  static readonly maxEntries = 16;
  private readonly untilMs = new Map<string, number>();

  constructor(private readonly suspicionMs: number) {}

  add(workerId: string): void {
    this.untilMs.delete(workerId);
    if (this.untilMs.size >= SuspectWorkers.maxEntries) this.untilMs.delete(this.untilMs.keys().next().value as string);
    this.untilMs.set(workerId, Date.now() + this.suspicionMs);
  }

  list(): string[] {
    if (this.untilMs.size === 0) return [];
    const now = Date.now();
    const live: string[] = [];
    for (const [workerId, until] of this.untilMs) {
      if (until <= now) this.untilMs.delete(workerId);
      else live.push(workerId);
    }
    return live;
  }
}
