import type pg from 'pg';
import { databaseUnavailable, type Database } from '../record/database';

/** One limit as stored: the ledger's encoded form ('max:<n>', 'share:<x>', 'off'). */
export interface StoredLimit {
  cluster: string;
  integration: string;
  spec: string;
}

/**
 * The durable copy of the integration limits operators set, in the audit's PostgreSQL schema.
 * Redis keeps nothing across a restart; the control plane re-applies this copy to the ledger.
 */
export class LimitStore {
  private readonly table: string;

  constructor(private readonly database: Database) {
    this.table = `${database.schema}.integration_limits`;
  }

  async list(): Promise<StoredLimit[]> {
    try {
      const result = await this.database.pool.query<StoredLimit>(`SELECT cluster, integration, spec FROM ${this.table} ORDER BY cluster, integration`);
      return result.rows;
    } catch (error) {
      throw databaseUnavailable(this.database, 'reading the integration limits', error);
    }
  }

  /**
   * Runs `apply` in a transaction that has written `spec` (null deletes the row) and holds the
   * row's lock: when `apply` rejects, the row is as it was. Resolves with the spec before.
   */
  async change(cluster: string, integration: string, spec: string | null, apply: (before: string | null) => Promise<void>): Promise<string | null> {
    let client: pg.PoolClient;
    try {
      client = await this.database.pool.connect();
    } catch (error) {
      throw databaseUnavailable(this.database, 'an integration limit change', error);
    }
    let began = false;
    try {
      await client.query('BEGIN');
      began = true;
      // Serialises changes of one limit across control planes; the insert takes the lock when absent.
      await client.query(`INSERT INTO ${this.table} (cluster, integration, spec) VALUES ($1, $2, '') ON CONFLICT DO NOTHING`, [cluster, integration]);
      const locked = await client.query<{ spec: string }>(`SELECT spec FROM ${this.table} WHERE cluster = $1 AND integration = $2 FOR UPDATE`, [
        cluster,
        integration,
      ]);
      const before = locked.rows[0]?.spec ? locked.rows[0].spec : null;
      if (spec === null) await client.query(`DELETE FROM ${this.table} WHERE cluster = $1 AND integration = $2`, [cluster, integration]);
      else await client.query(`UPDATE ${this.table} SET spec = $3, updated_at = now() WHERE cluster = $1 AND integration = $2`, [cluster, integration, spec]);
      await apply(before);
      await client.query('COMMIT');
      return before;
    } catch (error) {
      if (began) await client.query('ROLLBACK').catch(() => undefined);
      if (
        error instanceof Error &&
        'code' in error &&
        typeof (error as { code: unknown }).code === 'string' &&
        !String((error as { code: string }).code).startsWith('HR_')
      )
        throw databaseUnavailable(this.database, 'an integration limit change', error);
      throw error;
    } finally {
      client.release();
    }
  }

  async count(cluster: string): Promise<number> {
    try {
      const result = await this.database.pool.query<{ n: string }>(`SELECT count(*) AS n FROM ${this.table} WHERE cluster = $1 AND spec <> ''`, [cluster]);
      return Number(result.rows[0]?.n ?? 0);
    } catch (error) {
      throw databaseUnavailable(this.database, 'counting the integration limits', error);
    }
  }
}
