/**
 * A Node script run as a process of its own (a Headroom command, Unleash, the bank simulator,
 * a load generator), as the tests, benchmarks, fault suite and demo start them, waited for by
 * the JSON events it prints on stdout (`{"event":"ready",...}` first).
 *
 * Every one preloads exit-with-parent, so none outlives whoever started it, even when that one
 * is killed with SIGKILL. Its output goes where the caller wants it, within bounds: forwarded
 * line by line with its name (the demo), to a log file (benchmarks), and always its last lines
 * into the error that says it did not start.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { finished } from 'node:stream';
import { ConfigError } from '@headroom/common';
import { ProcessNotReadyError } from './errors';
import { LastLines, classifyStdoutLine, cutLine, describeExit, pinoLevels, readLines, type ProcessEvent, type ProcessExit } from './process-output';

export { describeExit, type ProcessEvent, type ProcessExit };

export interface NodeProcessOptions {
  /**
   * Names it in errors, in forwarded lines (`[name] ...`) and its log file (`<logDir>/<name>.log`),
   * e.g. "worker-1": letters, digits, '.', '_' and '-'.
   */
  name: string;
  /** The Node script to run. */
  script: string;
  args?: readonly string[];
  /** Node flags before the script, e.g. --cpu-prof. */
  nodeFlags?: readonly string[];
  /** @default process.env */
  env?: NodeJS.ProcessEnv;
  /**
   * In a process group of its own: a Ctrl-C at the terminal reaches only whoever started it
   * (which then stops its children in order), and a forced kill goes to the whole group, so it
   * also reaches what the child started itself (the demo's embedded PostgreSQL). @default false
   */
  detached?: boolean;
  /**
   * Receives its plain output lines (stdout and stderr) and its pino records of level warn and
   * above (formatted), each as `[name] line`, cut at `nodeProcessDefaults.shownLineChars`.
   */
  forward?: (line: string) => void;
  /** Writes every line it prints (stdout and stderr) to `<logDir>/<name>.log` (created). */
  logDir?: string;
  /** How many of its last output lines to keep for error messages. @default 20 (1 to 1000) */
  keptLines?: number;
}

/** The spawner's fixed limits and defaults. */
export const nodeProcessDefaults = {
  /** stop(): how long after SIGTERM before SIGKILL. */
  stopGraceMs: 10_000,
  keptLines: 20,
  maxKeptLines: 1000,
  /** A forwarded or kept line is cut at this length. */
  shownLineChars: 2000,
  /** A longer line is split at this length, so a child writing no newline cannot fill our memory. */
  maxLineChars: 1_048_576,
  /** After its exit, how long to wait for its pipes to close: a grandchild may hold them open. */
  closeAfterExitMs: 2000,
  /** A process that did not start gets this long after SIGTERM before SIGKILL. */
  failedStartGraceMs: 2000,
};

/** Its ready line, with the address it listens on. */
export interface ReadyLine {
  event: 'ready';
  /** Where it listens: the line's `address` (host:port), or its `url` (the bank simulator and the control plane say that). */
  address: string;
  workerId?: string;
  balancerId?: string;
  /** Where it serves /metrics (with --metrics-port). */
  metricsPort?: number;
  [field: string]: unknown;
}

export interface StopOutcome {
  exit: ProcessExit;
  /** It was still running `graceMs` after the signal, and got SIGKILL. */
  forced: boolean;
}

const exitWithParent = require.resolve('./exit-with-parent');
const namePattern = /^[A-Za-z0-9._-]+$/;

export class NodeProcess {
  readonly name: string;
  /** -1 when it could not be started at all (its last lines say why). */
  readonly pid: number;
  /** Where its output is written, with `logDir`. */
  readonly logPath: string | undefined;
  /** Resolves once it exited and its output was read (or `closeAfterExitMs` after its exit). */
  readonly exited: Promise<ProcessExit>;
  private readonly child: ChildProcess;
  private readonly listeners = new Set<(event: ProcessEvent) => void>();
  private readonly lastLines: LastLines;
  private readonly log: fs.WriteStream | undefined;
  /** Kept, so that waiting for it after it came still answers. */
  private readyEvent: ProcessEvent | undefined;
  private stopping: Promise<StopOutcome> | undefined;

  constructor(private readonly options: NodeProcessOptions) {
    const keptLines = options.keptLines ?? nodeProcessDefaults.keptLines;
    if (!namePattern.test(options.name))
      throw new ConfigError(`name: got ${JSON.stringify(options.name)}; use letters, digits, '.', '_' and '-' (it names the log file)`);
    if (!Number.isInteger(keptLines) || keptLines < 1 || keptLines > nodeProcessDefaults.maxKeptLines) {
      throw new ConfigError(`keptLines: got ${keptLines}; use a whole number from 1 to ${nodeProcessDefaults.maxKeptLines}`);
    }
    this.name = options.name;
    this.lastLines = new LastLines(keptLines, nodeProcessDefaults.shownLineChars);
    if (options.logDir !== undefined) {
      fs.mkdirSync(options.logDir, { recursive: true });
      this.logPath = path.join(options.logDir, `${options.name}.log`);
      this.log = fs.createWriteStream(this.logPath);
      this.log.on('error', (error) => this.lastLines.push(`(its log ${this.logPath} failed: ${error.message})`));
    }
    this.child = spawn(process.execPath, [...(options.nodeFlags ?? []), '--require', exitWithParent, options.script, ...(options.args ?? [])], {
      // exit-with-parent watches the 'ipc' channel: it closes when we go away.
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      detached: options.detached ?? false,
      env: options.env ?? process.env,
    });
    this.pid = this.child.pid ?? -1;
    this.exited = this.watchExit();
    readLines(this.child.stdout!, nodeProcessDefaults.maxLineChars, (line) => this.onStdout(line));
    readLines(this.child.stderr!, nodeProcessDefaults.maxLineChars, (line) => this.onText(line));
  }

  get running(): boolean {
    return this.pid > 0 && this.child.exitCode === null && this.child.signalCode === null;
  }

  /** Its exit code once it exited by itself; null while it runs or when a signal ended it. */
  get exitCode(): number | null {
    return this.child.exitCode;
  }

  /** Its last output lines (stdout apart from events, and stderr), oldest first. */
  recentOutput(): string[] {
    return this.lastLines.toArray();
  }

  /** Calls `listener` with every event it prints from now on; returns the unsubscribe. */
  onEvent(listener: (event: ProcessEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /**
   * The first event named `name` from now on (for "ready", also one that came before);
   * rejects with ProcessNotReadyError when it exits first or after `timeoutMs`.
   */
  waitForEvent(name: string, timeoutMs: number): Promise<ProcessEvent> {
    if (name === 'ready' && this.readyEvent) return Promise.resolve(this.readyEvent);
    return new Promise((resolve, reject) => {
      let settled = false;
      const finish = (error: Error | undefined, event?: ProcessEvent) => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        unsubscribe();
        if (error) reject(error);
        else resolve(event!);
      };
      const timer = setTimeout(() => finish(this.notReady(`printed no "${name}" event within ${timeoutMs} ms`, undefined)), timeoutMs);
      timer.unref();
      const unsubscribe = this.onEvent((event) => {
        if (event.event === name) finish(undefined, event);
      });
      void this.exited.then((exit) => finish(this.notReady(`exited (${describeExit(exit)}) before it printed a "${name}" event`, exit)));
    });
  }

  /** Its ready line, with `address` taken from the line's `address` or `url`. */
  async waitUntilReady(timeoutMs: number): Promise<ReadyLine> {
    const event = await this.waitForEvent('ready', timeoutMs);
    const address = typeof event.address === 'string' ? event.address : event.url;
    if (typeof address !== 'string')
      throw this.notReady(
        `printed a ready line with neither "address" nor "url": ${cutLine(JSON.stringify(event), nodeProcessDefaults.shownLineChars)}`,
        undefined,
      );
    return { ...event, event: 'ready', address };
  }

  /**
   * Sends `signal` and, when it is still running `graceMs` later, SIGKILL (to its group when
   * detached). Idempotent: later calls get the first call's outcome.
   */
  stop(graceMs: number = nodeProcessDefaults.stopGraceMs, signal: NodeJS.Signals = 'SIGTERM'): Promise<StopOutcome> {
    this.stopping ??= (async () => {
      if (!this.running) return { exit: await this.exited, forced: false };
      let forced = false;
      this.child.kill(signal);
      const timer = setTimeout(() => {
        forced = true;
        this.killNow();
      }, graceMs);
      const exit = await this.exited;
      clearTimeout(timer);
      return { exit, forced };
    })();
    return this.stopping;
  }

  /** Sends `signal` to it alone (never forces) and resolves once it exited. */
  async kill(signal: NodeJS.Signals): Promise<ProcessExit> {
    if (this.running) this.child.kill(signal);
    return this.exited;
  }

  /** SIGKILL now (to its group when detached), without waiting: for when the caller is exiting. */
  killNow(): void {
    if (!this.running) return;
    if (this.options.detached) {
      try {
        // Its group's id is its pid: it was started detached.
        process.kill(-this.pid, 'SIGKILL');
        return;
      } catch {
        // The group is gone already; the child itself below.
      }
    }
    this.child.kill('SIGKILL');
  }

  private watchExit(): Promise<ProcessExit> {
    return new Promise((resolve) => {
      let ended = false;
      const done = (exit: ProcessExit) => {
        if (ended) return;
        ended = true;
        clearTimeout(closeTimer);
        if (!this.log) return resolve(exit);
        // Once its log is complete on disk, so that a reader after exit sees every line.
        this.log.end();
        finished(this.log, () => resolve(exit));
      };
      let closeTimer: NodeJS.Timeout | undefined;
      // 'close' comes after its last output line was read (a load generator's final report).
      this.child.once('close', (code: number | null, signal: NodeJS.Signals | null) => done({ code, signal }));
      this.child.once('exit', (code, signal) => {
        closeTimer = setTimeout(() => done({ code, signal }), nodeProcessDefaults.closeAfterExitMs);
        closeTimer.unref();
      });
      this.child.once('error', (error) => {
        this.lastLines.push(`could not start ${this.options.script}: ${error.message}`);
        done({ code: null, signal: null });
      });
    });
  }

  private onStdout(line: string): void {
    this.writeLog(line);
    const output = classifyStdoutLine(line);
    if (output.kind === 'event') {
      if (output.event.event === 'ready') this.readyEvent ??= output.event;
      for (const listener of this.listeners) listener(output.event);
    } else if (output.kind === 'log') {
      this.keep(output.text, output.level >= pinoLevels.warn);
    } else {
      this.keep(output.text, true);
    }
  }

  private onText(line: string): void {
    this.writeLog(line);
    this.keep(line, true);
  }

  private writeLog(line: string): void {
    // Closed once it exited: a grandchild holding its pipes may still write.
    if (this.log && !this.log.writableEnded) this.log.write(`${line}\n`);
  }

  private keep(line: string, forward: boolean): void {
    if (line.trim() === '') return;
    this.lastLines.push(line);
    if (forward) this.options.forward?.(`[${this.name}] ${cutLine(line, nodeProcessDefaults.shownLineChars)}`);
  }

  private notReady(what: string, exit: ProcessExit | undefined): ProcessNotReadyError {
    const lines = this.lastLines.toArray();
    const log = this.logPath ? ` (its log: ${this.logPath})` : '';
    const shown =
      lines.length === 0
        ? '; it printed nothing'
        : `; its last ${lines.length === 1 ? 'line' : `${lines.length} lines`}:\n${lines.map((line) => `  ${line}`).join('\n')}`;
    return new ProcessNotReadyError(`${this.name} (pid ${this.pid}) ${what}${log}${shown}`, this.name, exit, lines);
  }
}

export interface StartedNodeProcess {
  process: NodeProcess;
  ready: ReadyLine;
}

/**
 * Starts it and waits for its ready line; when it does not come within `readyTimeoutMs`, stops
 * it and rejects with ProcessNotReadyError.
 */
export async function startNodeProcess(options: NodeProcessOptions & { readyTimeoutMs: number }): Promise<StartedNodeProcess> {
  const started = new NodeProcess(options);
  try {
    return { process: started, ready: await started.waitUntilReady(options.readyTimeoutMs) };
  } catch (error) {
    await started.stop(nodeProcessDefaults.failedStartGraceMs);
    throw error;
  }
}

/** Whether `pid` is a live process (a zombie, exited but not yet reaped by its new parent, is not). */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === 'EPERM';
  }
  try {
    // /proc/<pid>/stat: "pid (name) STATE ...".
    return !/\) Z /.test(fs.readFileSync(`/proc/${pid}/stat`, 'utf8'));
  } catch {
    return true;
  }
}
