import { performance } from 'node:perf_hooks';
import type { IntegrationWaiting, LedgerPriority } from '@headroom/fleet';

/** Most integrations marked at their limit or rate per cluster (each mark costs a map entry). */
export const maxMarksPerCluster = 10_000;

/** Why the ledger last refused an integration's task: its in-flight limit, or its start rate until a time. */
export type IntegrationHold = { kind: 'in-flight'; limit: number } | { kind: 'rate'; maxStartsPerSecond: number; untilMs: number };

/**
 * What admission knows of each integration's tasks on this balancer: how many wait, by
 * priority, and which integrations the ledger last answered "at its limit" (or "at its rate")
 * in which cluster. A waiter of an integration so marked is passed over when the queue is
 * served, so that it holds up no other integration. A mark at the in-flight limit lasts until the
 * next news of a freed slot, when the integration is tried again; a mark at the rate lasts until
 * the time the ledger said its next start is allowed (a freed slot changes nothing to a rate).
 *
 * Bounded: an integration is held only while tasks of it wait (at most maxQueuedTasks) or while
 * it is marked in a cluster (in-flight marks cleared at every wake-up of that cluster's queue,
 * rate marks at their time), and at most `maxMarksPerCluster` are marked at once: past that, an
 * integration is not marked (its tasks wait in turn, as before marks existed) and `marksDropped` counts it.
 */
export class IntegrationShares {
  private readonly queued = new Map<string, { user: number; background: number }>();
  /** cluster -> integration -> why it is held, as the ledger last answered. */
  private readonly atLimit = new Map<string, Map<string, IntegrationHold>>();
  /** Tasks refused because their integration was at its limit (or rate) and its share of the queue was full. */
  refusedAtLimit = 0;
  /** Of those, the ones at its start rate. */
  refusedAtRate = 0;
  /** Marks not made because `maxMarksPerCluster` integrations were marked in the cluster already. */
  marksDropped = 0;

  constructor(
    /** Most tasks of one integration waiting on this balancer while it is at its limit. */
    readonly maxQueuedPerIntegration: number,
    private readonly nowMs: () => number = () => performance.now(),
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
    this.mark(cluster, integration, { kind: 'in-flight', limit });
  }

  /** The ledger refused a start for the integration's rate: it is passed over for `retryAfterMs`. */
  markAtRate(cluster: string, integration: string, maxStartsPerSecond: number, retryAfterMs: number): void {
    this.mark(cluster, integration, { kind: 'rate', maxStartsPerSecond, untilMs: this.nowMs() + retryAfterMs });
  }

  /**
   * A slot freed in the cluster (or the periodic recheck came): every integration at its
   * in-flight limit gets tried again; those at their rate wait for their time.
   */
  clear(cluster: string): void {
    const marks = this.atLimit.get(cluster);
    if (!marks) return;
    const nowMs = this.nowMs();
    for (const [integration, hold] of marks) if (hold.kind === 'in-flight' || hold.untilMs <= nowMs) marks.delete(integration);
  }

  /** Why the integration is held in the cluster now, else undefined (a rate mark past its time is dropped here). */
  holdOf(cluster: string, integration: string): IntegrationHold | undefined {
    const marks = this.atLimit.get(cluster);
    const hold = marks?.get(integration);
    if (hold?.kind === 'rate' && hold.untilMs <= this.nowMs()) {
      marks!.delete(integration);
      return undefined;
    }
    return hold;
  }

  isAtLimit(cluster: string, integration: string): boolean {
    return this.holdOf(cluster, integration) !== undefined;
  }

  /** Integrations marked at their limit in the cluster now (bounded by the integrations queued). */
  markedCount(cluster: string): number {
    return this.atLimit.get(cluster)?.size ?? 0;
  }

  /** The ms until the first rate mark in the cluster that is still on ends (when its waiters are to be tried again); undefined when none. */
  msUntilRateDue(cluster: string): number | undefined {
    const nowMs = this.nowMs();
    let first = Infinity;
    for (const hold of this.atLimit.get(cluster)?.values() ?? []) if (hold.kind === 'rate' && hold.untilMs > nowMs) first = Math.min(first, hold.untilMs);
    return first === Infinity ? undefined : first - nowMs;
  }

  private mark(cluster: string, integration: string, hold: IntegrationHold): void {
    let marks = this.atLimit.get(cluster);
    if (!marks) this.atLimit.set(cluster, (marks = new Map()));
    if (!marks.has(integration) && marks.size >= maxMarksPerCluster) {
      // Rate marks past their time go first; in-flight marks go at the next wake-up.
      for (const marked of [...marks.keys()]) this.holdOf(cluster, marked);
      if (marks.size >= maxMarksPerCluster) {
        this.marksDropped++;
        return;
      }
    }
    marks.set(integration, hold);
  }

  /** Waiting tasks of the integrations at their limit in `cluster`, of `priority` (or of both when 'all'). */
  queuedAtLimit(cluster: string, which: LedgerPriority | 'all'): number {
    let total = 0;
    for (const integration of this.atLimit.get(cluster)?.keys() ?? []) {
      if (!this.isAtLimit(cluster, integration)) continue;
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
        if (!this.isAtLimit(cluster, integration)) continue;
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
