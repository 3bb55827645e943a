import type pg from 'pg';
import { HeadroomError, type Logger } from '@headroom/common';
import type { AuditLog } from '../audit';
import type { AuditEntry, NewAuditEntry } from './audit-entry';
import { apiErrorCodes } from '../errors';
import type { AuditStore, TimedAuditEntry } from './audit-store';
import { advisoryLockKey, databaseUnavailable, type Database } from './database';

/** What a change may do while it holds the lock. */
export interface ChangeUnit {
  /** Writes the change's audit entry in the lock's transaction: entries of changes are ordered as the changes were applied. */
  record(entry: NewAuditEntry): Promise<void>;
}

/** PostgreSQL's SQLSTATE for a lock wait that passed lock_timeout. */
const lockNotAvailable = '55P03';

/**
 * One control plane at a time changes Unleash: a change (read the flag, write it, record it)
 * runs in a PostgreSQL transaction that holds a transaction-scoped advisory lock, whose key
 * every control plane derives from the flags it manages. Another control plane's change waits
 * for the lock (at most `waitMs`, then HR_ERR_BUSY) and so reads the flag only after this one
 * committed. The audit entry is written in the same transaction, so entries come in the order
 * the changes were applied, and a change that cannot reach PostgreSQL is refused (coded 503)
 * before it touches Unleash.
 *
 * Why this and not a Redis lease with fencing tokens: Unleash's Admin API cannot check a fencing
 * token, so a lease would only be as safe as its expiry guess. The advisory lock has no expiry:
 * PostgreSQL releases it only when the transaction ends or its session dies (the holder's
 * process died, or its connection was cut). The case it cannot fence: a holder whose connection
 * PostgreSQL dropped while the holder still runs, and goes on writing to Unleash. Each Admin API
 * call is bounded by the Unleash timeout, the session sets no idle-in-transaction timeout of its
 * own (so PostgreSQL does not end it in the middle of a slow change), and a holder that finds its
 * transaction gone at COMMIT logs it at error level and keeps its entries in the outbox.
 */
export class ChangeLock {
  private readonly key: string;

  constructor(
    private readonly deps: {
      database: Database;
      store: AuditStore;
      audit: AuditLog;
      /** Names what the lock protects: control planes that manage the same flags must give the same name. */
      lockName: string;
      waitMs: number;
      statementTimeoutMs: number;
      logger: Logger;
    },
  ) {
    this.key = advisoryLockKey(`headroom.unleash-changes:${deps.lockName}`);
  }

  /**
   * Runs `change` holding the lock. Rejects with HR_ERR_DATABASE_UNAVAILABLE (PostgreSQL could not
   * be reached) or HR_ERR_BUSY (another control plane held it past `waitMs`) before `change` runs;
   * otherwise with what `change` rejected with, once its entries are committed.
   */
  async run<T>(what: string, change: (unit: ChangeUnit) => Promise<T>): Promise<T> {
    const client = await this.acquire(what);
    const entries: TimedAuditEntry[] = [];
    const written: AuditEntry[] = [];
    let broken = false;
    const unit: ChangeUnit = {
      record: async (entry) => {
        const timed = { ...entry, atUnixMs: Date.now() };
        entries.push(timed);
        if (broken) return;
        try {
          const inserted = await this.deps.store.insert(client, timed);
          if (inserted) written.push(inserted);
        } catch (error) {
          broken = true;
          this.deps.logger.error(
            { err: error, action: entry.action },
            'PostgreSQL did not take the audit entry of a change it had allowed: kept in the outbox',
          );
        }
      },
    };
    let outcome: { ok: true; value: T } | { ok: false; error: unknown };
    try {
      outcome = { ok: true, value: await change(unit) };
    } catch (error) {
      outcome = { ok: false, error };
    }
    try {
      const committed = broken ? undefined : await client.query('COMMIT');
      // An aborted transaction answers COMMIT with ROLLBACK.
      if (committed?.command !== 'COMMIT') throw new Error(broken ? 'an audit entry failed' : 'the transaction had been aborted');
      for (const entry of written) this.deps.audit.announce(entry);
    } catch (error) {
      broken = true;
      this.deps.logger.error(
        { err: error, what },
        'a change to Unleash ran, but its transaction (the lock, the audit entry) did not commit: entries kept in the outbox',
      );
      this.deps.audit.keep(...entries);
      void this.deps.audit.flush();
    } finally {
      client.release(broken ? true : undefined);
    }
    if (!outcome.ok) throw outcome.error;
    return outcome.value;
  }

  private async acquire(what: string): Promise<pg.PoolClient> {
    let client: pg.PoolClient;
    try {
      client = await this.deps.database.pool.connect();
    } catch (error) {
      throw databaseUnavailable(this.deps.database, `${what} (its audit entry, and the lock on changes); nothing was changed`, error);
    }
    try {
      await client.query('BEGIN');
      // Waiting for the lock is bounded by lock_timeout; the change's own statements by the usual timeout.
      await client.query(`SET LOCAL lock_timeout = ${this.deps.waitMs}`);
      await client.query(`SET LOCAL statement_timeout = ${this.deps.waitMs + this.deps.statementTimeoutMs}`);
      await client.query('SET LOCAL idle_in_transaction_session_timeout = 0');
      await client.query({
        text: 'SELECT pg_advisory_xact_lock($1)',
        values: [this.key],
        query_timeout: this.deps.waitMs + this.deps.statementTimeoutMs + 1000,
      } as pg.QueryConfig);
      await client.query(`SET LOCAL statement_timeout = ${this.deps.statementTimeoutMs}`);
      return client;
    } catch (error) {
      await client.query('ROLLBACK').catch(() => undefined);
      client.release(true);
      if ((error as { code?: string }).code === lockNotAvailable) {
        throw new HeadroomError(
          apiErrorCodes.busy,
          `another control plane has been changing Unleash for more than ${this.deps.waitMs} ms (changeLockWaitMs); nothing was changed, try again`,
          { retryAfterMs: 1000 },
        );
      }
      throw databaseUnavailable(this.deps.database, `${what} (its audit entry, and the lock on changes); nothing was changed`, error);
    }
  }
}
