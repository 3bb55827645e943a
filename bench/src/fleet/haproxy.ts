/**
 * Debian's HAProxy in front of the benchmark's workers: the anchor the balancer's cost is read
 * against (what a proxy written in C costs for the same gRPC hop and a balancing decision). h2c on
 * both sides, one thread, no logging, its config and admin socket in a temporary directory, on a
 * free port.
 *
 * It balances for real: `balance leastconn` over the workers, each at most its max parallelism of
 * requests at once (`maxconn`; more wait in HAProxy's queue, as tasks wait in the balancer's). A
 * call through it names no worker (HAProxy cannot write the worker's id into a protobuf body), so
 * the workers run with --accept-unaddressed. HAProxy's count of a worker's requests is its own: it
 * does not know of tasks that reach the worker another way.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { createInterface } from 'node:readline';
import { freePort } from '@headroom/common';
import { findOnPath, somethingListens } from '@headroom/testkit';

export const haproxyDefaults = {
  /** Where Debian installs it; found on the PATH first. */
  debianBinary: '/usr/sbin/haproxy',
  startTimeoutMs: 5_000,
  stopGraceMs: 5_000,
  connectTimeoutMs: 2_000,
  /** Client and server inactivity: longer than any call, and than the idle gaps between phases. */
  idleTimeoutMs: 300_000,
  /** Longest a request waits in the queue for a server under its maxconn; then 503. */
  queueTimeoutMs: 30_000,
  maxConnections: 4_096,
  keptLines: 20,
};

export interface HaproxyServer {
  /** The server's name in HAProxy's config and stats: letters, digits, '-', '_', '.'. */
  name: string;
  /** host:port of the worker's gRPC server (h2c). */
  address: string;
  /** Requests HAProxy sends it at once (its max parallelism); more wait in HAProxy's queue. */
  maxConcurrentRequests: number;
}

export interface HaproxyProcess {
  /** 127.0.0.1:port of its h2c frontend. */
  readonly address: string;
  readonly pid: number;
  /** Requests HAProxy has sent to each server so far (its `stot` counter), from the admin socket. */
  requestsByServer(): Promise<Record<string, number>>;
  /** SIGTERM, SIGKILL after stopGraceMs; removes its directory. Idempotent. */
  stop(): Promise<void>;
}

/** The haproxy executable: on the PATH, or Debian's; undefined when it is not installed. */
export function findHaproxy(): string | undefined {
  const onPath = findOnPath('haproxy');
  if (onPath) return onPath;
  try {
    fs.accessSync(haproxyDefaults.debianBinary, fs.constants.X_OK);
    return haproxyDefaults.debianBinary;
  } catch {
    return undefined;
  }
}

export function haproxyConfig(port: number, servers: readonly HaproxyServer[], adminSocketPath: string): string {
  const d = haproxyDefaults;
  return [
    'global',
    '  nbthread 1',
    `  maxconn ${d.maxConnections}`,
    `  stats socket ${adminSocketPath} mode 600 level user`,
    '',
    'defaults',
    '  mode http',
    `  timeout connect ${d.connectTimeoutMs}ms`,
    `  timeout client ${d.idleTimeoutMs}ms`,
    `  timeout server ${d.idleTimeoutMs}ms`,
    `  timeout queue ${d.queueTimeoutMs}ms`,
    '',
    'frontend grpc_in',
    `  bind 127.0.0.1:${port} proto h2`,
    '  default_backend workers',
    '',
    'backend workers',
    '  balance leastconn',
    // Every call is alike (no per-client state): share the h2 connections to the workers.
    '  http-reuse always',
    ...servers.map((server) => `  server ${server.name} ${server.address} proto h2 maxconn ${server.maxConcurrentRequests}`),
    '',
  ].join('\n');
}

/**
 * Starts HAProxy in the foreground (-db) in front of `servers`. It dies with this process: under
 * `setpriv --pdeathsig KILL` where util-linux has it (a SIGKILLed benchmark leaves no HAProxy
 * behind), and `register` receives its stop() as soon as it runs.
 */
export async function startHaproxy(
  binary: string,
  servers: readonly HaproxyServer[],
  register: (cleanup: () => Promise<void>) => void,
): Promise<HaproxyProcess> {
  for (const server of servers) {
    if (!/^[A-Za-z0-9_.-]+$/.test(server.name))
      throw new Error(`HAProxy server name ${JSON.stringify(server.name)}: expected letters, digits, '_', '.' and '-'`);
    if (!Number.isInteger(server.maxConcurrentRequests) || server.maxConcurrentRequests < 1)
      throw new Error(`HAProxy server ${server.name}: maxConcurrentRequests is ${server.maxConcurrentRequests}, expected a whole number >= 1`);
  }
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'headroom-haproxy-'));
  const adminSocketPath = path.join(dir, 'admin.sock');
  const configPath = path.join(dir, 'haproxy.cfg');
  const port = await freePort();
  fs.writeFileSync(configPath, haproxyConfig(port, servers, adminSocketPath));

  const setpriv = findOnPath('setpriv');
  const args = ['-db', '-f', configPath];
  const child: ChildProcess = setpriv
    ? spawn(setpriv, ['--pdeathsig', 'KILL', '--', binary, ...args], { stdio: ['ignore', 'pipe', 'pipe'] })
    : spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  const lastLines: string[] = [];
  for (const stream of [child.stdout!, child.stderr!]) {
    createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
      if (lastLines.push(line.slice(0, 2000)) > haproxyDefaults.keptLines) lastLines.shift();
    });
  }
  const exited = new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.once('error', () => resolve());
  });
  const running = () => child.exitCode === null && child.signalCode === null && child.pid !== undefined;
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      if (running()) {
        child.kill('SIGTERM');
        const timer = setTimeout(() => child.kill('SIGKILL'), haproxyDefaults.stopGraceMs);
        await exited;
        clearTimeout(timer);
      }
      fs.rmSync(dir, { recursive: true, force: true });
    })());
  register(stop);

  const address = `127.0.0.1:${port}`;
  const deadline = Date.now() + haproxyDefaults.startTimeoutMs;
  for (;;) {
    if (!running()) {
      await exited;
      throw new Error(`haproxy exited at start (code ${child.exitCode}, signal ${child.signalCode}):\n${lastLines.join('\n')}`);
    }
    if (await somethingListens(`tcp://${address}`, 200)) break;
    if (Date.now() > deadline) throw new Error(`haproxy did not listen on ${address} within ${haproxyDefaults.startTimeoutMs} ms:\n${lastLines.join('\n')}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  return { address, pid: child.pid!, requestsByServer: () => requestsByServer(adminSocketPath), stop };
}

/** `show stat` on the admin socket: the backend's servers and their cumulative requests (`stot`). */
async function requestsByServer(adminSocketPath: string): Promise<Record<string, number>> {
  const csv = await new Promise<string>((resolve, reject) => {
    const socket = net.connect(adminSocketPath);
    let text = '';
    socket.setEncoding('utf8');
    socket.setTimeout(2_000, () => socket.destroy(new Error('haproxy admin socket: no answer within 2000 ms')));
    socket.once('connect', () => socket.write('show stat\n'));
    socket.on('data', (chunk: string) => (text += chunk));
    socket.once('end', () => resolve(text));
    socket.once('error', reject);
  });
  const [header, ...rows] = csv.split('\n').filter((line) => line.length > 0);
  const columns = (header ?? '').replace(/^# /, '').split(',');
  const proxy = columns.indexOf('pxname');
  const server = columns.indexOf('svname');
  const total = columns.indexOf('stot');
  if (proxy < 0 || server < 0 || total < 0) throw new Error(`haproxy admin socket: unexpected "show stat" header ${JSON.stringify(header)}`);
  const requests: Record<string, number> = {};
  for (const row of rows) {
    const fields = row.split(',');
    if (fields[proxy] !== 'workers' || fields[server] === 'BACKEND') continue;
    requests[fields[server]!] = Number(fields[total]);
  }
  return requests;
}
