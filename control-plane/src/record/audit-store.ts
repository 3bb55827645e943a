import type pg from 'pg';
import type { AuditEntry, NewAuditEntry } from './audit-entry';
import type { Database } from './database';

/** What GET /audit asks for: newest first, `beforeId` pages back, `action` and `actor` filter. */
export interface AuditQuery {
  limit: number;
  beforeId?: string | undefined;
  action?: string | undefined;
  actor?: string | undefined;
}

/** An entry as it is written: the time it happened is set by the caller, the id by PostgreSQL. */
export type TimedAuditEntry = NewAuditEntry & { atUnixMs: number };

interface AuditRow {
  id: string;
  at: Date;
  actor: string;
  action: AuditEntry['action'];
  target: string;
  request: unknown;
  before: unknown;
  after: unknown;
  outcome: AuditEntry['outcome'];
  error: string | null;
  reason: string | null;
}

/** Rows deleted per statement when old entries are pruned, and statements per prune. */
const pruneBatchRows = 10_000;
const pruneMaxBatches = 100;

/** The audit log's table (`<schema>.audit_entries`, made by migrations.ts). */
/** An entry's values for the columns (at, actor, action, target, request, before, after, outcome, error, reason), in that order. */
function entryValues(entry: TimedAuditEntry): unknown[] {
  return [
    new Date(entry.atUnixMs),
    entry.actor,
    entry.action,
    entry.target,
    json(entry.request),
    json(entry.before),
    json(entry.after),
    entry.outcome,
    entry.error ?? null,
    entry.reason ?? null,
  ];
}

export class AuditStore {
  private readonly table: string;

  constructor(private readonly database: Database) {
    this.table = `${database.schema}.audit_entries`;
  }

  /**
   * Writes one entry through `on` (the pool, or the client of a change's transaction); its id
   * orders entries. Resolves with null when an entry with the same `idempotencyKey` is there
   * already (written once, whoever tries again).
   */
  async insert(on: pg.Pool | pg.ClientBase, entry: TimedAuditEntry): Promise<AuditEntry | null> {
    const result = await on.query<AuditRow>(
      `INSERT INTO ${this.table} (at, actor, action, target, request, before, after, outcome, error, reason, idempotency_key)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (idempotency_key) DO NOTHING RETURNING *`,
      [...entryValues(entry), entry.idempotencyKey ?? null],
    );
    return result.rows[0] ? toEntry(result.rows[0]) : null;
  }

  /** Copies an entry of the old Redis stream, once: returns false when it was copied before. */
  async importLegacy(on: pg.ClientBase, entry: TimedAuditEntry, legacyRedisId: string): Promise<boolean> {
    const result = await on.query(
      `INSERT INTO ${this.table} (at, actor, action, target, request, before, after, outcome, error, reason, legacy_redis_id)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) ON CONFLICT (legacy_redis_id) DO NOTHING`,
      [...entryValues(entry), legacyRedisId],
    );
    return (result.rowCount ?? 0) > 0;
  }

  async list(query: AuditQuery): Promise<AuditEntry[]> {
    const conditions: string[] = [];
    const values: unknown[] = [];
    const where = (sql: string, value: unknown) => {
      values.push(value);
      conditions.push(sql.replace('?', `$${values.length}`));
    };
    if (query.beforeId !== undefined) where('id < ?', query.beforeId);
    if (query.action !== undefined) where('action = ?', query.action);
    if (query.actor !== undefined) where('actor = ?', query.actor);
    values.push(query.limit);
    const result = await this.database.pool.query<AuditRow>(
      `SELECT * FROM ${this.table} ${conditions.length > 0 ? `WHERE ${conditions.join(' AND ')}` : ''} ORDER BY id DESC LIMIT $${values.length}`,
      values,
    );
    return result.rows.map(toEntry);
  }

  /** Deletes entries from before `beforeUnixMs`, oldest first, in bounded batches; returns how many. */
  async prune(beforeUnixMs: number): Promise<number> {
    let deleted = 0;
    for (let batch = 0; batch < pruneMaxBatches; batch++) {
      const result = await this.database.pool.query(
        `DELETE FROM ${this.table} WHERE id IN (SELECT id FROM ${this.table} WHERE at < $1 ORDER BY at LIMIT ${pruneBatchRows})`,
        [new Date(beforeUnixMs)],
      );
      deleted += result.rowCount ?? 0;
      if ((result.rowCount ?? 0) < pruneBatchRows) break;
    }
    return deleted;
  }
}

/** jsonb parameters go as JSON text: an array passed as is would become a PostgreSQL array. */
function json(value: unknown): string | null {
  return value === undefined ? null : JSON.stringify(value);
}

function toEntry(row: AuditRow): AuditEntry {
  return {
    id: row.id,
    atUnixMs: row.at.getTime(),
    actor: row.actor,
    action: row.action,
    target: row.target,
    ...(row.request !== null ? { request: row.request } : {}),
    before: row.before,
    after: row.after,
    outcome: row.outcome,
    ...(row.error !== null ? { error: row.error } : {}),
    ...(row.reason !== null ? { reason: row.reason } : {}),
  };
}
