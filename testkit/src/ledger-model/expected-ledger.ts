import type { NoSlotReason } from '@headroom/fleet';
import type { ClockSpan } from './clock';

/** A lease record as the ledger's contract says it holds one (fleet/lua/heartbeat-12.lua). */
interface ExpectedRecord {
  /** When the reservation ran; 'restored' for a record a heartbeat wrote back (dated 0: old at once). */
  reservedAt: ClockSpan | 'restored';
}

export interface ExpectedWorker {
  capacity: number;
  /** Lease id -> record: one per slot counted in flight. */
  readonly records: Map<string, ExpectedRecord>;
  /** When its last heartbeat ran (the sweep's measure). */
  lastHeartbeat: ClockSpan;
}

/**
 * What a reservation must get; `orAtRate`: Redis's clock within the call's span decides whether
 * its integration's start rate refuses it instead ('integration-at-rate' is right too).
 */
export type ExpectedReservation = (
  { ok: true; freeSlots: number; workerIds: string[] } | { ok: false; reason: NoSlotReason | 'integration-at-limit' | 'integration-at-rate' }
) & { orAtRate?: true };

/**
 * What the model knows of an integration's GCRA (settle-12.lua): its theoretical arrival time
 * (Redis's clock, µs) lies in [lowUs, highUs]. Each call's span leaves the script's clock
 * uncertain by a millisecond or two; each answer of the ledger narrows the bounds again.
 */
interface TatBounds {
  lowUs: number;
  highUs: number;
}

/** What the ledger must decide of each record a heartbeat does not hold, and of each worker at a sweep. */
export interface Verdicts {
  removed: string[];
  /** Redis's clock at the script fell within the span of the deadline: either outcome is right, the test reads which. */
  undecided: string[];
}

export interface ExpectedLedgerOptions {
  keptForUserPresentShare: number;
  /** The default integration limit (settle-12.lua): max(ceil(share x capacity), floor), and its start rate (a GCRA, burst one second). */
  integrationLimit: { shareOfCapacity: number; minInFlight: number; maxStartsPerSecond?: number };
  dispatchGraceMs: number;
  sweepAfterMs: number;
}

/**
 * The ledger as its contract says it must be, kept without Redis: a worker's count is its lease
 * records; a reservation adds one on the least-loaded worker; a release removes its own (once);
 * a heartbeat drops the records its worker does not hold that are dispatchGraceMs old (or were
 * written back), writes back held ones that are missing, and registers the worker; a sweep
 * removes workers silent for sweepAfterMs, with their records.
 */
export class ExpectedLedger {
  readonly workers = new Map<string, ExpectedWorker>();
  private readonly tats = new Map<string, TatBounds>();

  constructor(private readonly options: ExpectedLedgerOptions) {}

  inflight(workerId: string): number {
    return this.workers.get(workerId)?.records.size ?? 0;
  }

  /** Sums over the workers that take tasks (every registered one here), free counted as >= 0. */
  totals(): { capacity: number; free: number; leases: number } {
    let capacity = 0;
    let free = 0;
    let leases = 0;
    for (const worker of this.workers.values()) {
      capacity += worker.capacity;
      free += Math.max(0, worker.capacity - worker.records.size);
      leases += worker.records.size;
    }
    return { capacity, free, leases };
  }

  /** Records per integration, over every worker: the ledger's per-integration counts must be these. */
  inflightByIntegration(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const worker of this.workers.values()) {
      for (const leaseId of worker.records.keys()) {
        const integration = integrationOfLease(leaseId);
        if (integration !== undefined) counts.set(integration, (counts.get(integration) ?? 0) + 1);
      }
    }
    return counts;
  }

  /**
   * The answer a reservation in a call that ran within `span` must get (settle-12.lua: the
   * integration's limit, its start rate, priority rules, then the most free slots).
   */
  reservation(priority: 'user' | 'background', integration: string, span: ClockSpan): ExpectedReservation {
    const limit = Math.max(Math.ceil(this.options.integrationLimit.shareOfCapacity * this.totals().capacity), this.options.integrationLimit.minInFlight);
    const inflight = this.inflightByIntegration().get(integration) ?? 0;
    if (inflight >= limit) return { ok: false, reason: 'integration-at-limit' };
    const rate = this.rateVerdict(integration, span, priority);
    if (rate === 'refuses') return { ok: false, reason: 'integration-at-rate' };
    let answer = this.slotFor(priority);
    // A background task leaves the share of the limit kept for user-present tasks, never all of
    // it; checked after the cluster's share, as settle does.
    const kept = Math.min(Math.ceil(this.options.keptForUserPresentShare * limit), Math.max(0, limit - 1));
    if (answer.ok && priority === 'background' && inflight >= limit - kept) answer = { ok: false, reason: 'integration-at-limit' };
    return rate === 'undecided' ? { ...answer, orAtRate: true } : answer;
  }

  /**
   * The ledger's answer to a reservation that passed its integration's in-flight limit, in a call
   * within `span`: refused at the rate, or not (and `started`: it took a slot). Narrows the TAT's
   * bounds; throws when the answer contradicts them (the GCRA broke its contract).
   */
  rateAnswered(integration: string, priority: 'user' | 'background', span: ClockSpan, refusedAtRate: boolean, started: boolean): void {
    const gcra = this.gcra(priority);
    if (!gcra) return;
    const bounds = this.tats.get(integration) ?? { lowUs: 0, highUs: 0 };
    const { fromUs, toUs } = spanUs(span);
    // settle refuses while TAT > now + (tolerance - interval).
    if (refusedAtRate) bounds.lowUs = Math.max(bounds.lowUs, fromUs + gcra.slackUs);
    else bounds.highUs = Math.min(bounds.highUs, toUs + gcra.slackUs);
    if (bounds.lowUs > bounds.highUs)
      throw new Error(`${integration}'s start rate: the ledger ${refusedAtRate ? 'refused' : 'allowed'} a start its GCRA could not have, by the calls before`);
    if (started) {
      // Each start moves the TAT on by one interval from max(TAT, now); settle writes it rounded up to a whole µs.
      bounds.lowUs = Math.max(bounds.lowUs, fromUs) + gcra.intervalUs;
      bounds.highUs = Math.max(bounds.highUs, toUs) + gcra.intervalUs + 1;
    }
    this.tats.set(integration, bounds);
  }

  private rateVerdict(integration: string, span: ClockSpan, priority: 'user' | 'background'): 'allows' | 'refuses' | 'undecided' {
    const gcra = this.gcra(priority);
    if (!gcra) return 'allows';
    // No key (none yet, or expired when it fell due): a full bucket, as a TAT of 0 is.
    const bounds = this.tats.get(integration) ?? { lowUs: 0, highUs: 0 };
    const { fromUs, toUs } = spanUs(span);
    if (bounds.lowUs > toUs + gcra.slackUs) return 'refuses';
    if (bounds.highUs <= fromUs + gcra.slackUs) return 'allows';
    return 'undecided';
  }

  /**
   * The start rate's emission interval, and how far ahead of now the TAT may be for a start of
   * this priority to go (tolerance - interval, less the share kept for user-present tasks), in µs.
   */
  private gcra(priority: 'user' | 'background'): { intervalUs: number; slackUs: number } | undefined {
    const rate = this.options.integrationLimit.maxStartsPerSecond;
    if (rate === undefined) return undefined;
    const intervalUs = 1e6 / rate;
    const toleranceUs = Math.max(1e6, intervalUs);
    const keptUs = priority === 'user' ? 0 : Math.min(this.options.keptForUserPresentShare * toleranceUs, toleranceUs - intervalUs);
    return { intervalUs, slackUs: toleranceUs - intervalUs - keptUs };
  }

  /** The answer of the priority rules and the free slots (settle-12.lua, after the integration's limits). */
  private slotFor(priority: 'user' | 'background'): ExpectedReservation {
    if (priority === 'background') {
      const totals = this.totals();
      const kept = Math.min(Math.ceil(this.options.keptForUserPresentShare * totals.capacity), Math.max(0, totals.capacity - 1));
      if (totals.free - 1 < kept) return { ok: false, reason: totals.capacity === 0 ? 'no-workers' : totals.free <= 0 ? 'full' : 'kept-for-user-present' };
    }
    if (this.workers.size === 0) return { ok: false, reason: 'no-workers' };
    const freeById = [...this.workers].map(([id, w]) => [id, w.capacity - w.records.size] as const);
    const most = Math.max(...freeById.map(([, free]) => free));
    if (most < 1) return { ok: false, reason: 'full' };
    return { ok: true, freeSlots: most, workerIds: freeById.filter(([, free]) => free === most).map(([id]) => id) };
  }

  reserve(workerId: string, leaseId: string, span: ClockSpan): void {
    this.workers.get(workerId)!.records.set(leaseId, { reservedAt: span });
  }

  /** Ends a lease; whether it was still counted (the answer Ledger.release must give). */
  release(leaseId: string): boolean {
    return this.workers.get(workerOfLease(leaseId))?.records.delete(leaseId) ?? false;
  }

  /** Which records a heartbeat that ran in `span`, holding `heldLeaseIds`, must drop. */
  heartbeatVerdicts(workerId: string, heldLeaseIds: readonly string[], span: ClockSpan): Verdicts {
    const verdicts: Verdicts = { removed: [], undecided: [] };
    const held = new Set(heldLeaseIds);
    for (const [leaseId, record] of this.workers.get(workerId)?.records ?? []) {
      if (held.has(leaseId)) continue;
      // Kept while reserved after (its heartbeat's time - the grace); written-back records never are.
      if (record.reservedAt === 'restored' || record.reservedAt.toMs <= span.fromMs - this.options.dispatchGraceMs) verdicts.removed.push(leaseId);
      else if (record.reservedAt.fromMs <= span.toMs - this.options.dispatchGraceMs) verdicts.undecided.push(leaseId);
    }
    return verdicts;
  }

  /** Applies a heartbeat: `removed` are the records it dropped. What a HeartbeatReply must say of it. */
  heartbeat(
    workerId: string,
    capacity: number,
    heldLeaseIds: readonly string[],
    span: ClockSpan,
    removed: readonly string[],
  ): { inflight: number; dropped: number; restored: number } {
    let worker = this.workers.get(workerId);
    if (!worker) {
      worker = { capacity, records: new Map(), lastHeartbeat: span };
      this.workers.set(workerId, worker);
    }
    for (const leaseId of removed) worker.records.delete(leaseId);
    let restored = 0;
    for (const leaseId of heldLeaseIds) {
      if (worker.records.has(leaseId)) continue;
      worker.records.set(leaseId, { reservedAt: 'restored' });
      restored++;
    }
    worker.capacity = capacity;
    worker.lastHeartbeat = span;
    return { inflight: worker.records.size, dropped: removed.length, restored };
  }

  /** Which workers a sweep that ran in `span` must remove. */
  sweepVerdicts(span: ClockSpan): Verdicts {
    const verdicts: Verdicts = { removed: [], undecided: [] };
    for (const [workerId, worker] of this.workers) {
      if (worker.lastHeartbeat.toMs <= span.fromMs - this.options.sweepAfterMs) verdicts.removed.push(workerId);
      else if (worker.lastHeartbeat.fromMs <= span.toMs - this.options.sweepAfterMs) verdicts.undecided.push(workerId);
    }
    return verdicts;
  }

  remove(workerId: string): void {
    this.workers.delete(workerId);
  }
}

/** A span of Redis's clock in µs: the script's clock (µs) lies within the ms readings around the call. */
function spanUs(span: ClockSpan): { fromUs: number; toUs: number } {
  return { fromUs: span.fromMs * 1000, toUs: span.toMs * 1000 + 999 };
}

/** A lease id is "<worker>|<nonce>" or "<worker>|<nonce>|<integration>" (settle-12.lua). */
export function integrationOfLease(leaseId: string): string | undefined {
  const parts = leaseId.split('|');
  return parts.length > 2 ? parts.slice(2).join('|') : undefined;
}

export function workerOfLease(leaseId: string): string {
  return leaseId.slice(0, leaseId.indexOf('|'));
}
