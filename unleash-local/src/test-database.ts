import { randomBytes } from 'node:crypto';
import pg from 'pg';
import { testPostgresUrl } from './test-unleash';

export interface TestSchema {
  /** The test PostgreSQL's URL. */
  readonly url: string;
  /** A schema name no other test uses (not created: the control plane creates its own). */
  readonly schema: string;
  /** Runs one statement on the test PostgreSQL (its own connection). */
  query<R extends pg.QueryResultRow = pg.QueryResultRow>(sql: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
  /** Drops the schema and all in it. */
  drop(): Promise<void>;
}

/** A fresh schema name on the test PostgreSQL for one test's control plane (its audit log): tests never share one. */
export function testSchema(prefix = 'hr_audit'): TestSchema {
  const schema = `${prefix}_${randomBytes(5).toString('hex')}`;
  const query = async <R extends pg.QueryResultRow>(sql: string, values?: unknown[]) => {
    const client = new pg.Client({ connectionString: testPostgresUrl, ssl: false });
    await client.connect();
    try {
      return await client.query<R>(sql, values);
    } finally {
      await client.end();
    }
  };
  return {
    url: testPostgresUrl,
    schema,
    query,
    drop: async () => void (await query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`)),
  };
}

export interface TestDatabase {
  /** postgres://…/<the database>: for a process whose schema cannot be chosen (the demo uses "headroom"). */
  readonly url: string;
  /** Drops the database, ending the sessions still on it. */
  drop(): Promise<void>;
}

/** A fresh database on the test PostgreSQL, for a test that runs a whole program. */
export async function testDatabase(prefix = 'hr_test'): Promise<TestDatabase> {
  const name = `${prefix}_${randomBytes(5).toString('hex')}`;
  const admin = testSchema();
  await admin.query(`CREATE DATABASE "${name}"`);
  const url = new URL(testPostgresUrl);
  url.pathname = `/${name}`;
  return { url: url.toString(), drop: async () => void (await admin.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`)) };
}
