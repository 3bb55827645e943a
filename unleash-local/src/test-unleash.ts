import { fork, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import pg from 'pg';
import { freePort } from '@headroom/common';
import type { RunningUnleash, UnleashServerOptions } from './unleash-server';
import { unleashLogEnv, unleashOptionsEnv } from './test-unleash-child';

/** The PostgreSQL the tests use (HEADROOM_TEST_PG_URL, default postgres://root@127.0.0.1:5432/test). */
export const testPostgresUrl = process.env.HEADROOM_TEST_PG_URL ?? 'postgres://root@127.0.0.1:5432/test';

/** The first start runs Unleash's migrations: tens of seconds on a busy machine. */
const readyTimeoutMs = 90_000;
/** What the error that says it did not start quotes of its stderr. */
const maxStderrChars = 4000;
const childPath = path.join(__dirname, 'test-unleash-child.js');

export interface TestUnleashOptions {
  /** 0 or unset: a free port. */
  port?: number;
  adminToken?: string;
  clientToken?: string;
  /** Unleash's log goes to this file (appended); unset: nowhere. */
  logPath?: string;
}

export interface TestUnleash extends RunningUnleash {
  /** Kills the server (kill -9: its connections go at once), keeping its data, port and tokens, to test Headroom while Unleash is away. */
  pause(): Promise<void>;
  /** Starts it again on the same port, data and tokens. */
  resume(): Promise<void>;
  /** Kills the server and drops its schema. Idempotent. */
  stop(): Promise<void>;
}

/**
 * A real Unleash server in a process of its own, on a fresh schema of the test PostgreSQL.
 * Out of the test's process, because Unleash keeps working in the background after a change and
 * rejects with nobody to catch it when stopped under that work, and because a second Unleash
 * started in a process after the first stopped serves stale flags. It dies with whoever started
 * it. Starting one (migrations included) takes a few seconds: share one per test file.
 */
export async function startTestUnleash(options: TestUnleashOptions = {}): Promise<TestUnleash> {
  const url = new URL(testPostgresUrl);
  const environment = 'development';
  const serverOptions: UnleashServerOptions = {
    database: {
      host: url.hostname,
      port: Number(url.port || 5432),
      user: decodeURIComponent(url.username || 'root'),
      password: decodeURIComponent(url.password),
      database: url.pathname.slice(1) || 'test',
      schema: `hr_unleash_${randomBytes(5).toString('hex')}`,
    },
    host: '127.0.0.1',
    port: options.port || (await freePort()),
    environment,
    adminToken: options.adminToken ?? `*:*.${randomBytes(16).toString('hex')}`,
    clientToken: options.clientToken ?? `default:${environment}.${randomBytes(16).toString('hex')}`,
  };
  const { schema } = serverOptions.database;
  await withClient((client) => client.query(`CREATE SCHEMA ${schema}`));
  const dropSchema = async () => {
    await withClient((client) => client.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`));
  };
  let child: ChildProcess | undefined;
  const pause = async () => {
    const running = child;
    child = undefined;
    if (running) await kill(running);
  };
  const resume = async () => {
    await pause();
    child = await startChild(serverOptions, options.logPath);
  };
  try {
    await resume();
  } catch (error) {
    await dropSchema().catch(() => undefined);
    throw error;
  }
  let stopped: Promise<void> | undefined;
  return {
    url: `http://127.0.0.1:${serverOptions.port}`,
    port: serverOptions.port!,
    adminToken: serverOptions.adminToken!,
    clientToken: serverOptions.clientToken!,
    environment,
    pause,
    resume,
    stop: () => (stopped ??= pause().then(dropSchema)),
  };
}

/** Forks the server's process and resolves once it serves; rejects, quoting its stderr, if it exits or is not ready in time. */
async function startChild(serverOptions: UnleashServerOptions, logPath: string | undefined): Promise<ChildProcess> {
  if (logPath) fs.mkdirSync(path.dirname(logPath), { recursive: true });
  const log = logPath ? fs.openSync(logPath, 'a') : 'ignore';
  const child = fork(childPath, [], {
    env: { ...process.env, [unleashOptionsEnv]: JSON.stringify(serverOptions), [unleashLogEnv]: logPath ? '1' : '0' },
    stdio: ['ignore', log, 'pipe', 'ipc'],
    // Not the flags of this process: under `node --test` they would make the server a test run.
    execArgv: [],
  });
  if (typeof log === 'number') fs.closeSync(log);
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-maxStderrChars);
  });
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the test Unleash was not ready within ${readyTimeoutMs} ms`)), readyTimeoutMs);
      child.once('message', () => {
        clearTimeout(timer);
        resolve();
      });
      child.once('exit', (code, signal) => {
        clearTimeout(timer);
        reject(new Error(`the test Unleash exited with ${code ?? signal} before it served: ${stderr.trim() || '(no output)'}`));
      });
    });
  } catch (error) {
    await kill(child);
    throw error;
  }
  // It keeps no test process from exiting: one that forgot to stop it takes it along (the channel closes).
  child.unref();
  child.channel?.unref();
  (child.stderr as unknown as { unref?(): void }).unref?.();
  return child;
}

async function kill(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  // Referenced again while we wait for its exit, or the event loop might end before it.
  child.ref();
  child.kill('SIGKILL');
  await exited;
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
