import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as readline from 'node:readline';

/** A child process the benchmark started and must stop. */
export interface ManagedProcess {
  readonly name: string;
  readonly pid: number;
  /** Where its stdout (after the ready line) and stderr go. */
  readonly logPath: string;
  /** SIGTERM, then SIGKILL when it has not exited after `gracePeriodMs`. Idempotent. */
  stop(gracePeriodMs?: number): Promise<void>;
}

export interface ReadyLine {
  event: 'ready';
  /** Where it listens: its `address` (host:port), or its `url` (the bank simulator says so). */
  address: string;
  [field: string]: unknown;
}

export interface SpawnOptions {
  name: string;
  /** Node flags (e.g. --cpu-prof) before the script. */
  nodeFlags?: readonly string[];
  script: string;
  args: readonly string[];
  env?: NodeJS.ProcessEnv;
  logDir: string;
  readyTimeoutMs: number;
}

const defaultGracePeriodMs = 10_000;

function parseReadyLine(line: string): ReadyLine | undefined {
  let value: unknown;
  try {
    value = JSON.parse(line);
  } catch {
    return undefined;
  }
  if (typeof value !== 'object' || value === null) return undefined;
  const record = value as Record<string, unknown>;
  const address = typeof record.address === 'string' ? record.address : record.url;
  if (record.event !== 'ready' || typeof address !== 'string') return undefined;
  return { ...record, event: 'ready', address };
}

function stopper(name: string, child: ChildProcess): (gracePeriodMs?: number) => Promise<void> {
  const exited = new Promise<void>((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) resolve();
    else child.once('exit', () => resolve());
  });
  let stopping: Promise<void> | undefined;
  return (gracePeriodMs = defaultGracePeriodMs) =>
    (stopping ??= (async () => {
      if (child.exitCode !== null || child.signalCode !== null) return;
      child.kill('SIGTERM');
      let timer: NodeJS.Timeout | undefined;
      const killed = new Promise<'timeout'>((resolve) => (timer = setTimeout(() => resolve('timeout'), gracePeriodMs)));
      const outcome = await Promise.race([exited.then(() => 'exited' as const), killed]);
      clearTimeout(timer);
      if (outcome === 'timeout') {
        process.stderr.write(`bench: ${name} (pid ${child.pid}) did not exit ${gracePeriodMs} ms after SIGTERM; sending SIGKILL\n`);
        child.kill('SIGKILL');
        await exited;
      }
    })());
}

/**
 * Starts `node script args` and waits for the JSON ready line Headroom's CLIs print first
 * on stdout. Everything else the child writes goes to `<logDir>/<name>.log`.
 */
export async function spawnUntilReady(options: SpawnOptions): Promise<{ process: ManagedProcess; ready: ReadyLine }> {
  fs.mkdirSync(options.logDir, { recursive: true });
  const logPath = path.join(options.logDir, `${options.name}.log`);
  const log = fs.createWriteStream(logPath);
  const child = spawn(process.execPath, [...(options.nodeFlags ?? []), options.script, ...options.args], {
    env: options.env ?? process.env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  if (child.pid === undefined) {
    // spawn failed synchronously (e.g. ENOENT); the 'error' event carries why.
    const error = await new Promise<Error>((resolve) => child.once('error', resolve));
    throw new Error(`could not start ${options.name}: ${error.message}`);
  }
  child.stderr.pipe(log, { end: false });
  const managed: ManagedProcess = { name: options.name, pid: child.pid, logPath, stop: stopper(options.name, child) };
  const lines = readline.createInterface({ input: child.stdout, crlfDelay: Infinity });

  const ready = await new Promise<ReadyLine>((resolve, reject) => {
    let settled = false;
    const settle = (error: Error | undefined, line?: ReadyLine) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      child.off('exit', onExit);
      if (error) reject(error);
      else resolve(line!);
    };
    const timer = setTimeout(() => settle(new Error(`${options.name} printed no ready line within ${options.readyTimeoutMs} ms (log: ${logPath})`)), options.readyTimeoutMs);
    const onExit = (code: number | null, signal: NodeJS.Signals | null) =>
      settle(new Error(`${options.name} exited (code ${code}, signal ${signal}) before it was ready; see ${logPath}`));
    child.once('exit', onExit);
    lines.on('line', (text) => {
      if (!settled) {
        const line = parseReadyLine(text);
        if (line) return settle(undefined, line);
      }
      log.write(`${text}\n`);
    });
  }).catch(async (error: unknown) => {
    await managed.stop(2_000);
    throw error;
  });
  return { process: managed, ready };
}
