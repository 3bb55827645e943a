/**
 * A real Unleash server in a child process (see child.ts) on a fresh schema of the test
 * PostgreSQL, which the fault suite stops and starts again on the same port, data and tokens.
 */
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import pg from 'pg';
import { freePort } from '@headroom/common';
import { startNodeProcess, type NodeProcess } from '@headroom/testkit';
import { testPostgresUrl, type UnleashServerOptions } from '@headroom/unleash-local';
import { unleashOptionsEnv } from './child';

/** The first start runs Unleash's migrations: tens of seconds on a busy machine. */
const readyTimeoutMs = 90_000;
const childPath = path.join(__dirname, 'child.js');

export interface UnleashProcess {
  readonly url: string;
  readonly adminToken: string;
  readonly clientToken: string;
  /** kill -9: Unleash is gone at once, its connections with it. */
  stop(): Promise<void>;
  /** Starts it again on the same port, data and tokens. */
  start(): Promise<void>;
  /** Stops it and drops its schema. Idempotent. */
  close(): Promise<void>;
}

async function withClient<T>(fn: (client: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ connectionString: testPostgresUrl, ssl: false });
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end();
  }
}

export async function startUnleashProcess(): Promise<UnleashProcess> {
  const schema = `hr_faults_${randomBytes(5).toString('hex')}`;
  const url = new URL(testPostgresUrl);
  const options: UnleashServerOptions = {
    database: {
      host: url.hostname,
      port: Number(url.port || 5432),
      user: decodeURIComponent(url.username || 'root'),
      password: decodeURIComponent(url.password),
      database: url.pathname.slice(1) || 'test',
      schema,
    },
    host: '127.0.0.1',
    port: await freePort(),
    adminToken: `*:*.${randomBytes(16).toString('hex')}`,
    clientToken: `default:development.${randomBytes(16).toString('hex')}`,
  };
  await withClient((client) => client.query(`CREATE SCHEMA ${schema}`));
  let child: NodeProcess | undefined;
  const stop = async () => {
    const running = child;
    child = undefined;
    await running?.kill('SIGKILL');
  };
  const start = async () => {
    // Stopped with its parent, even by SIGKILL (exit-with-parent).
    const started = await startNodeProcess({
      name: 'unleash',
      script: childPath,
      env: { ...process.env, [unleashOptionsEnv]: JSON.stringify(options) },
      readyTimeoutMs,
    });
    child = started.process;
  };
  let closing: Promise<void> | undefined;
  const close = () =>
    (closing ??= (async () => {
      await stop();
      await withClient((client) => client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`));
    })());
  try {
    await start();
  } catch (error) {
    await close();
    throw error;
  }
  return { url: `http://127.0.0.1:${options.port}`, adminToken: options.adminToken!, clientToken: options.clientToken!, stop, start, close };
}
