import { performance } from 'node:perf_hooks';
import type { IntegrationWaiting, LedgerPriority } from '@headroom/fleet';

/** Most integrations marked at their limit or rate per cluster (each mark costs a map entry). */
export const maxMarksPerCluster = 10_000;

/**
 * Why the ledger last refused an integration's task: its in-flight limit, or its start rate until
 * a time; and whom that holds. A background task is refused while only the share kept for
 * user-present tasks is left, so its refusal holds background tasks only; a user-present task's
 * refusal holds both.
 */
export type IntegrationHold = ({ kind: 'in-flight'; limit: number } | { kind: 'rate'; maxStartsPerSecond: number; untilMs: number }) & {
  holds: 'background' | 'all';
};

/**
 * What admission knows of each integration's tasks on this balancer: how many wait, by
 * priority, and which integrations the ledger last answered "at its limit" (or "at its rate")
 * in which cluster, for which priorities. A waiter an integration's mark holds is passed over
 * when the queue is served, so that it holds up no other integration. A mark at the in-flight
 * limit lasts until the next news of a freed slot, when the integration is tried again; a mark at
 * the rate lasts until the time the ledger said its next start is allowed (a freed slot changes
 * nothing to a rate).
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
  /** cluster -> marks made or widened (to every priority) there: a pass over its queue that changed none made no progress. */
  private readonly markChanges = new Map<string, number>();

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

  markAtLimit(cluster: string, integration: string, limit: number, refused: LedgerPriority): void {
    this.mark(cluster, integration, { kind: 'in-flight', limit, holds: holdsFor(refused) });
  }

  /** The ledger refused a start for the integration's rate: it is passed over for `retryAfterMs`. */
  markAtRate(cluster: string, integration: string, maxStartsPerSecond: number, retryAfterMs: number, refused: LedgerPriority): void {
    this.mark(cluster, integration, { kind: 'rate', maxStartsPerSecond, untilMs: this.nowMs() + retryAfterMs, holds: holdsFor(refused) });
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

  isAtLimit(cluster: string, integration: string, priority: LedgerPriority): boolean {
    const hold = this.holdOf(cluster, integration);
    return hold !== undefined && (hold.holds === 'all' || priority === 'background');
  }

  /** Marks made or widened in the cluster so far. */
  markChangesIn(cluster: string): number {
    return this.markChanges.get(cluster) ?? 0;
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
    const before = this.holdOf(cluster, integration);
    if (!before || (before.holds === 'background' && hold.holds === 'all')) this.markChanges.set(cluster, this.markChangesIn(cluster) + 1);
    // A refusal of a background task does not free the user-present ones a standing mark holds.
    marks.set(integration, before?.holds === 'all' && hold.holds === 'background' ? { ...hold, holds: 'all' } : hold);
  }

  /** Waiting tasks in `cluster` that their integration's mark holds, of `priority` (or of both when 'all'). */
  queuedAtLimit(cluster: string, which: LedgerPriority | 'all'): number {
    let total = 0;
    for (const integration of this.atLimit.get(cluster)?.keys() ?? []) total += this.heldOf(cluster, integration, which);
    return total;
  }

  private heldOf(cluster: string, integration: string, which: LedgerPriority | 'all'): number {
    const counts = this.queued.get(integration);
    if (!counts) return 0;
    const user = which !== 'background' && this.isAtLimit(cluster, integration, 'user') ? counts.user : 0;
    const background = which !== 'user' && this.isAtLimit(cluster, integration, 'background') ? counts.background : 0;
    return user + background;
  }

  /** Tasks waiting here per integration marked at its limit, per cluster: the `maxEntries` with the most. */
  waitingAtLimit(maxEntries: number): IntegrationWaiting[] {
    const entries: IntegrationWaiting[] = [];
    for (const [cluster, marks] of this.atLimit)
      for (const integration of marks.keys()) {
        const waiting = this.heldOf(cluster, integration, 'all');
        if (waiting > 0) entries.push({ cluster, integration, waiting });
      }
    return entries.sort((a, b) => b.waiting - a.waiting).slice(0, maxEntries);
  }

  /** Whether a task of `integration` must be refused now: at its limit, with its share of the queue full. */
  shareFull(cluster: string, integration: string, priority: LedgerPriority): boolean {
    return this.isAtLimit(cluster, integration, priority) && this.queuedOf(integration) >= this.maxQueuedPerIntegration;
  }
}

function holdsFor(refused: LedgerPriority): IntegrationHold['holds'] {
  return refused === 'user' ? 'all' : 'background';
}
