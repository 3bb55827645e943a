import type { Counter, Gauge } from 'prom-client';
import type { Logger } from '@headroom/common';
import type { RedisConnection } from '@headroom/fleet';
import { controlKeys } from '@headroom/fleet';
import type { AuditEntry, NewAuditEntry } from './record/audit-entry';
import type { AuditQuery, AuditStore, TimedAuditEntry } from './record/audit-store';
import { databaseUnavailable, type Database } from './record/database';

export interface AuditOutboxMetrics {
  outboxDepth: Gauge;
  outboxDropped: Counter;
}

/** How often the outbox tries PostgreSQL again while it holds entries. */
const outboxRetryMs = 1000;
/** Entries written per outbox attempt (the rest wait for the next). */
const outboxBatch = 100;

/**
 * Every change, who made it, when, what was asked, before and after, in PostgreSQL (the record;
 * see record/), announced on a Redis channel for the live event streams.
 *
 * Changes to Unleash write their entry in the transaction that holds the change lock
 * (record/change-lock.ts), so they are refused when PostgreSQL is away. What has already taken
 * effect through Redis (a rollback, a resume, a drain, a profile, a rebuilt override) is not
 * stopped for bookkeeping: `record()` writes its entry now, or keeps it in a bounded outbox in
 * memory and writes it, in order and with its own time, as soon as PostgreSQL answers again.
 */
export class AuditLog {
  readonly channel: string;
  private readonly outbox: TimedAuditEntry[] = [];
  private flushing: Promise<void> | undefined;
  private readonly retryTimer: NodeJS.Timeout;

  constructor(
    private readonly deps: {
      database: Database;
      store: AuditStore;
      redis: RedisConnection;
      keyPrefix: string;
      outboxMaxEntries: number;
      metrics: AuditOutboxMetrics;
      logger: Logger;
    },
  ) {
    this.channel = controlKeys(deps.keyPrefix).auditAppendedChannel;
    this.retryTimer = setInterval(() => {
      if (this.outbox.length > 0) void this.flush();
    }, outboxRetryMs);
    this.retryTimer.unref();
  }

  /** Entries waiting for PostgreSQL. */
  get outboxDepth(): number {
    return this.outbox.length;
  }

  /** Records what already took effect: written now, or kept in the outbox until PostgreSQL is back. Never rejects. */
  async record(entry: NewAuditEntry): Promise<void> {
    const timed: TimedAuditEntry = { ...entry, atUnixMs: Date.now() };
    // Older entries first: the record keeps the order things happened in.
    if (this.outbox.length > 0) await this.flush();
    if (this.outbox.length === 0) {
      try {
        this.announceWritten(await this.deps.store.insert(this.deps.database.pool, timed));
        return;
      } catch (error) {
        this.deps.logger.warn(
          { err: error, action: entry.action, target: entry.target },
          'PostgreSQL did not take an audit entry: kept in the outbox until it does',
        );
      }
    }
    this.keep(timed);
  }

  /**
   * Writes an entry that must be in PostgreSQL before its caller goes on (an autopilot decision,
   * whose intent is cleared only then), at most once per `idempotencyKey`: a second call with the
   * same key writes nothing. Rejects (HR_ERR_DATABASE_UNAVAILABLE) rather than keep it in the
   * outbox, which a process that dies would lose; the caller tries again later. `atUnixMs`: when
   * it happened (the decision's time, whichever control plane writes it).
   */
  async recordOnce(entry: NewAuditEntry & { idempotencyKey: string }, atUnixMs = Date.now()): Promise<void> {
    // Older entries first: the record keeps the order things happened in.
    if (this.outbox.length > 0) await this.flush();
    try {
      if (this.outbox.length > 0) throw new Error(`${this.outbox.length} older entries still wait in the outbox`);
      this.announceWritten(await this.deps.store.insert(this.deps.database.pool, { ...entry, atUnixMs }));
    } catch (error) {
      throw databaseUnavailable(this.deps.database, `the audit entry ${entry.idempotencyKey}`, error);
    }
  }

  /** Keeps entries that PostgreSQL did not take (oldest first), to be written when it answers. */
  keep(...entries: TimedAuditEntry[]): void {
    for (const entry of entries) {
      if (this.outbox.length >= this.deps.outboxMaxEntries) {
        this.deps.metrics.outboxDropped.inc();
        // The log keeps what the record cannot: who did what, when.
        this.deps.logger.error(
          { entry, outboxMaxEntries: this.deps.outboxMaxEntries },
          'the audit outbox is full (PostgreSQL away too long): this entry is dropped from the audit log',
        );
        continue;
      }
      this.outbox.push(entry);
    }
    this.deps.metrics.outboxDepth.set(this.outbox.length);
  }

  /** Writes what the outbox holds, oldest first, until it is empty or PostgreSQL fails (then the retry timer tries again). */
  flush(): Promise<void> {
    this.flushing ??= this.flushSome().finally(() => (this.flushing = undefined));
    return this.flushing;
  }

  /** An entry written (in a change's transaction, now committed): to the live event streams. */
  announce(entry: AuditEntry): void {
    this.deps.redis
      .publish(this.channel, JSON.stringify(entry))
      .catch((error: unknown) => this.deps.logger.debug({ err: error }, 'could not announce an audit entry'));
  }

  /** null: the entry was there already (same idempotency key), and was announced when it was written. */
  private announceWritten(entry: AuditEntry | null): void {
    if (entry) this.announce(entry);
  }

  async list(query: AuditQuery): Promise<AuditEntry[]> {
    try {
      return await this.deps.store.list(query);
    } catch (error) {
      throw databaseUnavailable(this.deps.database, 'reading the audit log', error);
    }
  }

  /** Deletes entries older than `retentionMs`; never rejects (logged). */
  async prune(retentionMs: number): Promise<void> {
    try {
      const deleted = await this.deps.store.prune(Date.now() - retentionMs);
      if (deleted > 0) this.deps.logger.info({ deleted, retentionMs }, 'deleted audit entries past their retention');
    } catch (error) {
      this.deps.logger.warn({ err: error }, 'could not delete old audit entries; trying again later');
    }
  }

  /** Stops retrying; a last attempt at the outbox, then what is left is logged (at error level) so it is not lost silently. */
  async close(): Promise<void> {
    clearInterval(this.retryTimer);
    await this.flush();
    for (const entry of this.outbox.splice(0)) this.deps.logger.error({ entry }, 'stopping with an audit entry PostgreSQL never took');
    this.deps.metrics.outboxDepth.set(0);
  }

  private async flushSome(): Promise<void> {
    for (let i = 0; i < outboxBatch && this.outbox.length > 0; i++) {
      try {
        this.announceWritten(await this.deps.store.insert(this.deps.database.pool, this.outbox[0]!));
      } catch (error) {
        this.deps.logger.debug({ err: error, waiting: this.outbox.length }, 'PostgreSQL still does not take the audit outbox');
        return;
      }
      this.outbox.shift();
      this.deps.metrics.outboxDepth.set(this.outbox.length);
    }
  }
}
