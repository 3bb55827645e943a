import type pg from 'pg';
import { Umzug, type UmzugStorage } from 'umzug';
import { HeadroomError } from '@headroom/common';
import { apiErrorCodes } from '../errors';
import { advisoryLockKey, databaseUnavailable, type Database } from './database';

/**
 * The audit schema's migrations, in order; each runs once per schema, recorded in
 * `<schema>.schema_migrations`. Append only: never edit or reorder one that shipped.
 */
export const migrations: readonly { name: string; sql: (schema: string) => string }[] = [
  {
    name: '0001-audit-entries',
    sql: (schema) => `
      CREATE TABLE ${schema}.audit_entries (
        id bigserial PRIMARY KEY,
        at timestamptz NOT NULL,
        actor text NOT NULL,
        action text NOT NULL,
        target text NOT NULL,
        request jsonb,
        before jsonb,
        after jsonb,
        outcome text NOT NULL CHECK (outcome IN ('ok', 'failed')),
        error text,
        reason text
      );
      CREATE INDEX audit_entries_at ON ${schema}.audit_entries (at);
      CREATE INDEX audit_entries_action_id ON ${schema}.audit_entries (action, id);
      CREATE INDEX audit_entries_actor_id ON ${schema}.audit_entries (actor, id);`,
  },
  {
    // Entries copied from the Redis stream the audit log was before: its id makes the copy idempotent.
    name: '0002-legacy-redis-id',
    sql: (schema) => `ALTER TABLE ${schema}.audit_entries ADD COLUMN legacy_redis_id text UNIQUE;`,
  },
  {
    // An entry that whichever control plane finishes a decision may write (the autopilot's
    // intents, rollouts/intent.ts): the second insert with the same key is a no-op.
    name: '0003-idempotency-key',
    sql: (schema) => `ALTER TABLE ${schema}.audit_entries ADD COLUMN idempotency_key text UNIQUE;`,
  },
  {
    // The integration limits operators set: Redis keeps no data across a restart, this copy does.
    name: '0004-integration-limits',
    sql: (schema) => `
      CREATE TABLE ${schema}.integration_limits (
        cluster text NOT NULL,
        integration text NOT NULL,
        spec text NOT NULL,
        updated_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (cluster, integration)
      );`,
  },
];

/** Which migrations a schema has: umzug's storage, in the same transaction as the migrations. */
class MigrationTable implements UmzugStorage<pg.ClientBase> {
  constructor(private readonly table: string) {}

  async executed({ context }: { context: pg.ClientBase }): Promise<string[]> {
    const result = await context.query<{ name: string }>(`SELECT name FROM ${this.table} ORDER BY name`);
    return result.rows.map((row) => row.name);
  }

  async logMigration({ name, context }: { name: string; context: pg.ClientBase }): Promise<void> {
    await context.query(`INSERT INTO ${this.table} (name) VALUES ($1)`, [name]);
  }

  async unlogMigration({ name, context }: { name: string; context: pg.ClientBase }): Promise<void> {
    await context.query(`DELETE FROM ${this.table} WHERE name = $1`, [name]);
  }
}

/**
 * Brings the schema to the newest migration this control plane knows, in one transaction under
 * an advisory lock (replicas starting together migrate once; the others wait, then find nothing
 * to do). A schema that has a migration this code does not know was migrated by a newer control
 * plane: refused, since this one would misread its tables. Returns the migrations applied now.
 */
export async function migrate(database: Database): Promise<string[]> {
  let client: pg.PoolClient;
  try {
    client = await database.pool.connect();
  } catch (error) {
    throw databaseUnavailable(database, 'the audit schema migrations at start', error);
  }
  const table = `${database.schema}.schema_migrations`;
  try {
    await client.query('BEGIN');
    await client.query('SELECT pg_advisory_xact_lock($1)', [advisoryLockKey(`headroom.migrations:${database.schema}`)]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${database.schema}`);
    await client.query(`CREATE TABLE IF NOT EXISTS ${table} (name text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
    const known = new Set(migrations.map((m) => m.name));
    const storage = new MigrationTable(table);
    const unknown = (await storage.executed({ context: client })).filter((name) => !known.has(name));
    if (unknown.length > 0) {
      throw new HeadroomError(
        apiErrorCodes.databaseSchemaTooNew,
        `the audit schema ${database.schema} in ${database.where} has migration(s) ${unknown.join(', ')} that this control plane does not know (it knows up to ${migrations.at(-1)!.name}): a newer control plane migrated it. Run that version or a newer one; this one would misread the tables. Nothing was changed.`,
      );
    }
    const umzug = new Umzug<pg.ClientBase>({
      migrations: migrations.map((m) => ({ name: m.name, up: async ({ context }) => void (await context.query(m.sql(database.schema))) })),
      context: client,
      storage,
      logger: undefined,
    });
    const applied = await umzug.up();
    await client.query('COMMIT');
    return applied.map((m) => m.name);
  } catch (error) {
    await client.query('ROLLBACK').catch(() => undefined);
    if (error instanceof HeadroomError) throw error;
    throw new HeadroomError(
      apiErrorCodes.databaseUnavailable,
      `the audit schema ${database.schema} in ${database.where} could not be migrated: ${error instanceof Error ? error.message : String(error)}`,
      { cause: error },
    );
  } finally {
    client.release();
  }
}
