/**
 * A redis-server of our own on a free port of 127.0.0.1, without persistence: what the tests
 * restart and flush freely, what the demo runs on when no Redis answers at its URL, and what
 * the scale benchmark measures alone. Also the small checks around it (is something
 * listening, does Redis answer, is a port free, where is a command) and key cleanup.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { Cluster, Redis } from 'ioredis';
import { freePort } from '@headroom/common';
import { keyspacePattern, type RedisConnection } from '@headroom/fleet';

export interface PrivateRedis {
  readonly url: string;
  readonly port: number;
  /** The running server's process id (a new one after `start()`). */
  readonly pid: number;
  /** Resolves with the server's last lines of output when the running server exits. */
  readonly exited: Promise<string>;
  /** SIGTERM (SIGKILL when `hard`, or after `graceMs`), keeping the port for `start()`; true when it stopped by itself. Idempotent. */
  stop(hard?: boolean, graceMs?: number): Promise<boolean>;
  /** Starts it again on the same port (after `stop()`). */
  start(): Promise<void>;
  /** SIGKILL at once, without waiting (the caller is exiting). */
  killNow(): void;
}

export interface PrivateRedisOptions {
  /** The redis-server executable; by default the one on the PATH. */
  binary?: string;
  /** More redis-server arguments (e.g. `--cluster-enabled yes`). */
  extraArgs?: readonly string[];
  /** In a process group of its own, so that a Ctrl-C to the terminal reaches the caller only (which stops Redis last). */
  detached?: boolean;
  startTimeoutMs?: number;
}

const maxKeptLines = 20;
/** Data directories to remove when this process exits: a stopped server may be started again until then. */
const dataDirs = new Set<string>();

function removeAtExit(dir: string): void {
  if (dataDirs.size === 0) process.once('exit', () => dataDirs.forEach((d) => fs.rmSync(d, { recursive: true, force: true })));
  dataDirs.add(dir);
}
const defaultStopGraceMs = 5000;

/** Starts a redis-server on a free port; its data directory is removed when it exits. */
export async function startPrivateRedis(options: PrivateRedisOptions | readonly string[] = {}): Promise<PrivateRedis> {
  const {
    binary = 'redis-server',
    extraArgs = [],
    detached = false,
    startTimeoutMs = 5000,
  } = Array.isArray(options) ? { extraArgs: options } : (options as PrivateRedisOptions);
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'headroom-redis-'));
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  let exited: Promise<string> = Promise.resolve('');
  let stopping: Promise<boolean> | undefined;
  const running = () => child !== undefined && child.exitCode === null && child.signalCode === null;

  const start = async () => {
    stopping = undefined;
    const started = spawn(
      binary,
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--loglevel', 'warning', ...extraArgs],
      {
        stdio: ['ignore', 'pipe', 'pipe'],
        detached,
      },
    );
    child = started;
    // Redis logs its start and stop at warning level too: keep the last lines for when it fails, show none otherwise.
    const lastLines: string[] = [];
    for (const stream of [started.stdout!, started.stderr!]) {
      createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
        if (lastLines.push(line.slice(0, 2000)) > maxKeptLines) lastLines.shift();
      });
    }
    exited = new Promise<string>((resolve) => {
      started.once('exit', () => resolve(lastLines.join('\n')));
      started.once('error', () => resolve(lastLines.join('\n')));
    });
    const deadline = Date.now() + startTimeoutMs;
    for (;;) {
      if (started.exitCode !== null || started.pid === undefined) {
        throw new Error(`redis-server exited at start (${started.exitCode ?? 'not started'}):\n${await exited}`);
      }
      if (await somethingListens(url, 200)) return;
      if (Date.now() > deadline) {
        started.kill('SIGKILL');
        throw new Error(`redis-server did not listen on port ${port} within ${startTimeoutMs} ms:\n${lastLines.join('\n')}`);
      }
      await new Promise((resolve) => setTimeout(resolve, 25));
    }
  };

  const stop = (hard = false, graceMs = defaultStopGraceMs) =>
    (stopping ??= (async () => {
      const stopped = child;
      if (!stopped || !running()) return true;
      stopped.kill(hard ? 'SIGKILL' : 'SIGTERM');
      let forced = false;
      const timer = setTimeout(() => {
        forced = true;
        stopped.kill('SIGKILL');
      }, graceMs);
      await exited;
      clearTimeout(timer);
      return !forced && !hard;
    })());

  await start();
  const server: PrivateRedis = {
    url,
    port,
    get pid() {
      return child?.pid ?? -1;
    },
    get exited() {
      return exited;
    },
    stop,
    start,
    killNow: () => {
      if (running()) child!.kill('SIGKILL');
    },
  };
  removeAtExit(dir);
  return server;
}

/** True when a TCP connection to the URL's host and port succeeds within `timeoutMs`. */
export function somethingListens(url: string, timeoutMs: number): Promise<boolean> {
  const parsed = new URL(url);
  const host = parsed.hostname.replace(/^\[|\]$/g, '') || '127.0.0.1';
  const port = Number(parsed.port || 6379);
  return new Promise((resolve) => {
    const socket = net.connect({ host, port });
    const done = (ok: boolean) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(ok);
    };
    const timer = setTimeout(() => done(false), timeoutMs);
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** Resolves when something listens on `port` of 127.0.0.1; throws after `timeoutMs`. */
export async function waitForPort(port: number, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await somethingListens(`redis://127.0.0.1:${port}`, 1000))) {
    if (Date.now() > deadline) throw new Error(`nothing listens on port ${port} after ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** Resolves when Redis at `url` answers PING; rejects with its error otherwise. */
export async function pingRedis(url: string, timeoutMs: number): Promise<void> {
  const redis = new Redis(url, { lazyConnect: true, connectTimeout: timeoutMs, commandTimeout: timeoutMs, maxRetriesPerRequest: 0, retryStrategy: () => null });
  redis.on('error', () => {
    // Reported through the rejected connect() or ping() below.
  });
  try {
    await redis.connect();
    await redis.ping();
  } finally {
    redis.disconnect();
  }
}

/** Path of an executable on the PATH, or undefined. */
export function findOnPath(command: string, searchPath = process.env.PATH ?? ''): string | undefined {
  for (const dir of searchPath.split(path.delimiter)) {
    if (dir === '') continue;
    const candidate = path.join(dir, command);
    try {
      fs.accessSync(candidate, fs.constants.X_OK);
      if (fs.statSync(candidate).isFile()) return candidate;
    } catch {
      // Not here.
    }
  }
  return undefined;
}

/** Resolves false when `port` on 127.0.0.1 is taken (by anything). */
export function portIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

/**
 * Deletes every key under a key prefix (`{<prefix>:<cluster>}:*`, `{<prefix>:control}:*`, ...:
 * see keyspacePattern), a batch at a time; returns how many. For a prefix that belongs to one
 * run or test only. On a Redis Cluster, each primary is scanned, and keys are deleted one by one
 * (a batch would span hash slots).
 */
export async function deleteKeysUnder(redis: RedisConnection, keyPrefix: string): Promise<number> {
  // The prefix allows no glob characters (A-Z a-z 0-9 : . _ -), so it matches itself only.
  const pattern = keyspacePattern(keyPrefix);
  const cluster = redis instanceof Cluster;
  let deleted = 0;
  for (const node of cluster ? redis.nodes('master') : [redis]) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
      cursor = next;
      if (keys.length === 0) continue;
      if (cluster) for (const key of keys) deleted += await redis.unlink(key);
      else deleted += await node.unlink(...keys);
    } while (cursor !== '0');
  }
  return deleted;
}
