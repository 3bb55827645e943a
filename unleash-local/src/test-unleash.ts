import { randomBytes } from 'node:crypto';
import pg from 'pg';
import type { Logger } from '@headroom/common';
import { startUnleashServer, type RunningUnleash, type UnleashServerOptions } from './unleash-server';

/** The PostgreSQL the tests use (HEADROOM_TEST_PG_URL, default postgres://root@127.0.0.1:5432/test). */
export const testPostgresUrl = process.env.HEADROOM_TEST_PG_URL ?? 'postgres://root@127.0.0.1:5432/test';

const settleBeforeStopMs = 1000;

export interface TestUnleash extends RunningUnleash {
  /** Stops the server, keeping its data and port (to test Headroom while Unleash is away). */
  pause(): Promise<void>;
  /** Starts it again on the same port, data and tokens. */
  resume(): Promise<void>;
}

/**
 * A real Unleash server on a fresh schema of the test PostgreSQL; stop() drops the schema.
 * Starting one (migrations included) takes a few seconds: share one per test file.
 */
export async function startTestUnleash(options: { port?: number; logger?: Logger; adminToken?: string; clientToken?: string } = {}): Promise<TestUnleash> {
  const url = new URL(testPostgresUrl);
  const database = {
    host: url.hostname,
    port: Number(url.port || 5432),
    user: decodeURIComponent(url.username || 'root'),
    password: decodeURIComponent(url.password),
    database: url.pathname.slice(1) || 'test',
    schema: `hr_unleash_${randomBytes(5).toString('hex')}`,
  };
  await withClient(testPostgresUrl, (client) => client.query(`CREATE SCHEMA ${database.schema}`));
  let server: RunningUnleash;
  try {
    const serverOptions: UnleashServerOptions = { database, ...options };
    server = await startUnleashServer(serverOptions);
  } catch (error) {
    await withClient(testPostgresUrl, (client) => client.query(`DROP SCHEMA IF EXISTS ${database.schema} CASCADE`)).catch(() => undefined);
    throw error;
  }
  const first = server;
  return {
    url: first.url,
    port: first.port,
    adminToken: first.adminToken,
    clientToken: first.clientToken,
    environment: first.environment,
    pause: () => server.stop(),
    resume: async () => {
      server = await startUnleashServer({ database, ...options, port: first.port, adminToken: first.adminToken, clientToken: first.clientToken });
    },
    stop: async () => {
      // Unleash handles a change's events in the background for about a second; stopped under
      // them, one of its queries rejects with nobody to catch it, and the test file fails.
      await new Promise((resolve) => setTimeout(resolve, settleBeforeStopMs));
      await server.stop();
      await withClient(testPostgresUrl, (client) => client.query(`DROP SCHEMA IF EXISTS ${database.schema} CASCADE`));
    },
  };
}

async function withClient<T>(connectionString: string, fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString, ssl: false });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}
