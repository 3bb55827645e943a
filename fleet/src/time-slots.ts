import type { RedisConnection } from './redis';
import { LedgerUnavailableError } from './errors';

/**
 * The time slots in which workers' latency summaries (latency.ts) and balancers' errors
 * (balancer-errors.ts) are counted in Redis: both use the same slots, so that a reader adds one
 * slot of each together.
 */
export const latencyDefaults = {
  /** @default 10000 */
  slotMs: 10_000,
  /** Slots kept; the longest window that can be read. @default 3600000 (1 h) */
  retentionMs: 3_600_000,
};

/** The start (Unix ms) of the slot that holds `atUnixMs`. */
export function slotStartOf(atUnixMs: number, slotMs: number): number {
  return atUnixMs - (atUnixMs % slotMs);
}

/**
 * The start of each slot that overlaps the last `windowMs` before `nowUnixMs`, oldest first (the
 * newest is still filling). A window is at most the retention, so these are at most
 * retentionMs / slotMs + 1.
 */
export function slotStartsWithin(windowMs: number, nowUnixMs: number, slotMs: number): number[] {
  const starts: number[] = [];
  for (let slot = slotStartOf(nowUnixMs - windowMs, slotMs); slot <= nowUnixMs; slot += slotMs) starts.push(slot);
  return starts;
}

export interface SlotCountsOptions {
  slotMs: number;
  retentionMs: number;
  /** Slots kept in memory while Redis cannot be reached; older ones are dropped (counted). */
  maxPendingSlots: number;
  /** The Redis hash of the slot that starts at `slotStartMs`. */
  keyOf(slotStartMs: number): string;
  /** For the error when a flush fails: "latency flush". */
  what: string;
}

/** What a recorder is given: the slots' settings, each with its default. */
export interface SlotSettings {
  slotMs?: number;
  retentionMs?: number;
  /** Slots kept in memory while Redis cannot be reached; older ones are dropped (counted). @default 60 */
  maxPendingSlots?: number;
}

/** `settings` with their defaults, for the hashes `keyOf` names. */
export function slotCountsOptions(settings: SlotSettings, keyOf: (slotStartMs: number) => string, what: string): SlotCountsOptions {
  return {
    slotMs: settings.slotMs ?? latencyDefaults.slotMs,
    retentionMs: settings.retentionMs ?? latencyDefaults.retentionMs,
    maxPendingSlots: settings.maxPendingSlots ?? 60,
    keyOf,
    what,
  };
}

/**
 * Counts by field and time slot, kept in memory and added to Redis hashes (one per slot) on
 * flush(), all slots in one MULTI: a failed flush applied nothing and is kept for the next one.
 * Bounded by maxPendingSlots x the fields the caller uses (which it bounds).
 */
export class SlotCounts {
  private readonly pending = new Map<number, Map<string, number>>();
  /** Counts dropped because Redis was away for longer than maxPendingSlots slots. */
  dropped = 0;

  constructor(
    private readonly redis: RedisConnection,
    private readonly options: SlotCountsOptions,
  ) {}

  add(atUnixMs: number, field: string, count = 1): void {
    this.addToSlot(slotStartOf(atUnixMs, this.options.slotMs), field, count);
  }

  async flush(): Promise<void> {
    if (this.pending.size === 0) return;
    const batch = [...this.pending];
    this.pending.clear();
    const transaction = this.redis.multi();
    for (const [slot, counts] of batch) {
      const key = this.options.keyOf(slot);
      for (const [field, count] of counts) transaction.hincrby(key, field, count);
      transaction.pexpire(key, this.options.retentionMs + this.options.slotMs);
    }
    try {
      const results = await transaction.exec();
      if (!results) throw new Error('transaction aborted');
      for (const [error] of results) if (error) throw error;
    } catch (error) {
      // MULTI/EXEC: none of it was applied. Put it back (added to what came meanwhile).
      for (const [slot, counts] of batch) for (const [field, count] of counts) this.addToSlot(slot, field, count);
      throw new LedgerUnavailableError(this.options.what, error);
    }
  }

  private addToSlot(slot: number, field: string, count: number): void {
    let counts = this.pending.get(slot);
    if (!counts) {
      counts = new Map();
      this.pending.set(slot, counts);
      while (this.pending.size > this.options.maxPendingSlots) {
        const oldest = Math.min(...this.pending.keys());
        for (const dropped of this.pending.get(oldest)!.values()) this.dropped += dropped;
        this.pending.delete(oldest);
      }
    }
    counts.set(field, (counts.get(field) ?? 0) + count);
  }
}
