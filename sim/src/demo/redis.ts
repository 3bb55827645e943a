/**
 * The Redis the demo runs on: the one at the given URL if something answers there, else a
 * private redis-server of its own on a free port, stopped at exit.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { Redis } from 'ioredis';
import { freePort } from '@headroom/common';
import { keyspacePattern } from '@headroom/fleet';

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
 * see keyspacePattern), a batch at a time; returns how many. For a prefix that belongs to one run only.
 */
export async function deleteKeysUnder(redis: Redis, keyPrefix: string): Promise<number> {
  // The prefix allows no glob characters (A-Z a-z 0-9 : . _ -), so it matches itself only.
  const pattern = keyspacePattern(keyPrefix);
  let cursor = '0';
  let deleted = 0;
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', pattern, 'COUNT', 500);
    cursor = next;
    if (keys.length > 0) deleted += await redis.unlink(...keys);
  } while (cursor !== '0');
  return deleted;
}

export interface PrivateRedisServer {
  readonly url: string;
  readonly pid: number;
  /** Resolves with its last lines of output when it exits. */
  readonly exited: Promise<string>;
  /** SIGTERM, then SIGKILL after `graceMs`; true when it stopped by itself. Idempotent. */
  stop(graceMs?: number): Promise<boolean>;
  /** SIGKILL at once (the launcher is exiting). */
  killNow(): void;
}

const maxKeptLines = 20;

/**
 * Starts redis-server on a free port of 127.0.0.1, without persistence, in a process group
 * of its own so that Ctrl-C reaches the launcher only (which stops Redis last).
 */
export async function startPrivateRedisServer(binary: string, startTimeoutMs = 5000): Promise<PrivateRedisServer> {
  const port = await freePort();
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'headroom-demo-redis-'));
  const child = spawn(binary, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--loglevel', 'warning'], {
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: true,
  });
  // Redis logs its start and stop at warning level too: keep the last lines for when it fails, show none otherwise.
  const lastLines: string[] = [];
  for (const stream of [child.stdout, child.stderr]) {
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
      if (lastLines.push(line.slice(0, 2000)) > maxKeptLines) lastLines.shift();
    });
  }
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', () => resolve());
  });
  void exited.then(() => fs.rmSync(dir, { recursive: true, force: true }));
  const url = `redis://127.0.0.1:${port}`;
  const deadline = Date.now() + startTimeoutMs;
  for (;;) {
    if (child.exitCode !== null || child.pid === undefined) {
      throw new Error(`redis-server exited at start (${child.exitCode ?? 'not started'}):\n${lastLines.join('\n')}`);
    }
    if (await somethingListens(url, 200)) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`redis-server did not listen on port ${port} within ${startTimeoutMs} ms:\n${lastLines.join('\n')}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  let stopping: Promise<boolean> | undefined;
  return {
    url,
    pid: child.pid,
    exited: exited.then(() => lastLines.join('\n')),
    stop: (graceMs = 5000) =>
      (stopping ??= (async () => {
        if (child.exitCode !== null || child.signalCode !== null) return true;
        child.kill('SIGTERM');
        let forced = false;
        const timer = setTimeout(() => {
          forced = true;
          child.kill('SIGKILL');
        }, graceMs);
        await exited;
        clearTimeout(timer);
        return !forced;
      })()),
    killNow: () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    },
  };
}
