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
