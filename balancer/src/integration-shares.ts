import type { IntegrationWaiting, LedgerPriority } from '@headroom/fleet';

/**
 * What admission knows of each integration's tasks on this balancer: how many wait, by
 * priority, and which integrations the ledger last answered "at its limit" in which cluster.
 * A waiter of an integration at its limit is passed over when the queue is served, so that
 * it holds up no other integration; the mark lasts until the next news of a freed slot, when
 * the integration is tried again.
 *
 * Bounded: an integration is held only while tasks of it wait (at most maxQueuedTasks) or while
 * it is marked at its limit in a cluster (cleared at every wake-up of that cluster's queue).
 */
export class IntegrationShares {
  private readonly queued = new Map<string, { user: number; background: number }>();
  /** cluster -> integration -> its limit (tasks in flight), as the ledger last answered. */
  private readonly atLimit = new Map<string, Map<string, number>>();
  /** Tasks refused because their integration was at its limit and its share of the queue was full. */
  refusedAtLimit = 0;

  constructor(
    /** Most tasks of one integration waiting on this balancer while it is at its limit. */
    readonly maxQueuedPerIntegration: number,
  ) {}

  added(integration: string, priority: LedgerPriority): void {
    const counts = this.queued.get(integration) ?? { user: 0, background: 0 };
    counts[priority === 'user' ? 'user' : 'background']++;
    this.queued.set(integration, counts);
  }

  removed(integration: string, priority: LedgerPriority): void {
    const counts = this.queued.get(integration);
    if (!counts) return;
    counts[priority === 'user' ? 'user' : 'background']--;
    if (counts.user <= 0 && counts.background <= 0) this.queued.delete(integration);
  }

  queuedOf(integration: string): number {
    const counts = this.queued.get(integration);
    return counts ? counts.user + counts.background : 0;
  }

  markAtLimit(cluster: string, integration: string, limit: number): void {
    let marks = this.atLimit.get(cluster);
    if (!marks) this.atLimit.set(cluster, (marks = new Map()));
    marks.set(integration, limit);
  }

  /** A slot freed in the cluster (or the periodic recheck came): every integration gets tried again. */
  clear(cluster: string): void {
    this.atLimit.get(cluster)?.clear();
  }

  /** The integration's limit when the ledger last said it was at it (since the last wake-up), else undefined. */
  limitOf(cluster: string, integration: string): number | undefined {
    return this.atLimit.get(cluster)?.get(integration);
  }

  isAtLimit(cluster: string, integration: string): boolean {
    return this.atLimit.get(cluster)?.has(integration) ?? false;
  }

  /** Integrations marked at their limit in the cluster now (bounded by the integrations queued). */
  markedCount(cluster: string): number {
    return this.atLimit.get(cluster)?.size ?? 0;
  }

  /** Waiting tasks of the integrations at their limit in `cluster`, of `priority` (or of both when 'all'). */
  queuedAtLimit(cluster: string, which: LedgerPriority | 'all'): number {
    let total = 0;
    for (const integration of this.atLimit.get(cluster)?.keys() ?? []) {
      const counts = this.queued.get(integration);
      if (!counts) continue;
      total += which === 'user' ? counts.user : which === 'background' ? counts.background : counts.user + counts.background;
    }
    return total;
  }

  /** Tasks waiting here per integration marked at its limit, per cluster: the `maxEntries` with the most. */
  waitingAtLimit(maxEntries: number): IntegrationWaiting[] {
    const entries: IntegrationWaiting[] = [];
    for (const [cluster, marks] of this.atLimit)
      for (const integration of marks.keys()) {
        const waiting = this.queuedOf(integration);
        if (waiting > 0) entries.push({ cluster, integration, waiting });
      }
    return entries.sort((a, b) => b.waiting - a.waiting).slice(0, maxEntries);
  }

  /** Whether a task of `integration` must be refused now: at its limit, with its share of the queue full. */
  shareFull(cluster: string, integration: string): boolean {
    return this.isAtLimit(cluster, integration) && this.queuedOf(integration) >= this.maxQueuedPerIntegration;
  }
}
