/**
 * One process the demo launcher runs (Unleash, control plane, balancer, worker, load
 * generator): started in a process group of its own (Ctrl-C reaches the launcher only, which
 * stops children in order) with exit-with-parent preloaded (none outlives the launcher); a
 * SIGKILL goes to the whole group, so it also reaches what the child started (the embedded
 * PostgreSQL). Stdout lines that
 * are JSON events go to listeners; pino log lines of level warn and above, and anything
 * on stderr, are forwarded.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';

export interface ChildExit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

export type ChildEvent = Record<string, unknown> & { event: string };

export interface ChildOptions {
  /** Shown before forwarded lines, e.g. "baseline-2". */
  label: string;
  /** Node script to run. */
  script: string;
  args: readonly string[];
  env: NodeJS.ProcessEnv;
  /** Receives forwarded lines (already labelled). */
  forward: (line: string) => void;
}

const guardModule = require.resolve('@headroom/testkit/exit-with-parent');
const pinoWarnLevel = 40;
const levelNames: Record<number, string> = { 40: 'WARN', 50: 'ERROR', 60: 'FATAL' };
const maxForwardedChars = 2000;
const pinoBookkeeping = new Set(['level', 'time', 'pid', 'hostname', 'name', 'msg']);

export class ManagedChild {
  readonly label: string;
  readonly pid: number;
  readonly exited: Promise<ChildExit>;
  private readonly child: ChildProcess;
  private readonly listeners = new Set<(event: ChildEvent) => void>();
  private stopping: Promise<{ exit: ChildExit; forced: boolean }> | undefined;

  constructor(private readonly options: ChildOptions) {
    this.label = options.label;
    this.child = spawn(process.execPath, ['--require', guardModule, options.script, ...options.args], {
      stdio: ['ignore', 'pipe', 'pipe', 'ipc'],
      detached: true,
      env: options.env,
    });
    this.pid = this.child.pid ?? -1;
    this.exited = new Promise((resolve) => {
      // 'close' rather than 'exit': it comes after the last stdout line was read.
      this.child.once('close', (code: number | null, signal: NodeJS.Signals | null) => resolve({ code, signal }));
      this.child.once('error', () => resolve({ code: null, signal: null }));
    });
    createInterface({ input: this.child.stdout!, crlfDelay: Infinity }).on('line', (line) => this.onStdout(line));
    createInterface({ input: this.child.stderr!, crlfDelay: Infinity }).on('line', (line) => this.forward(line));
  }

  get running(): boolean {
    return this.child.exitCode === null && this.child.signalCode === null && this.pid > 0;
  }

  onEvent(listener: (event: ChildEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** The first event named `name`; rejects when the child exits first or after `timeoutMs`. */
  waitForEvent(name: string, timeoutMs: number): Promise<ChildEvent> {
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => finish(new Error(`${this.label} did not report "${name}" within ${timeoutMs} ms`)), timeoutMs);
      const unsubscribe = this.onEvent((event) => {
        if (event.event === name) finish(undefined, event);
      });
      const finish = (error?: Error, event?: ChildEvent) => {
        clearTimeout(timer);
        unsubscribe();
        if (error) reject(error);
        else resolve(event!);
      };
      void this.exited.then((exit) => finish(new Error(`${this.label} exited (${describeExit(exit)}) before it was ready`)));
    });
  }

  /** Sends `signal`, then SIGKILL after `graceMs`. Idempotent. */
  stop(graceMs: number, signal: NodeJS.Signals = 'SIGTERM'): Promise<{ exit: ChildExit; forced: boolean }> {
    this.stopping ??= (async () => {
      let forced = false;
      if (this.running) {
        this.child.kill(signal);
        const timer = setTimeout(() => {
          forced = true;
          this.killGroup();
        }, graceMs);
        const exit = await this.exited;
        clearTimeout(timer);
        return { exit, forced };
      }
      return { exit: await this.exited, forced };
    })();
    return this.stopping;
  }

  killNow(): void {
    if (this.running) this.killGroup();
  }

  /** SIGKILL to the child's process group (its id is the child's pid: it was started detached). */
  private killGroup(): void {
    try {
      process.kill(-this.pid, 'SIGKILL');
    } catch {
      this.child.kill('SIGKILL');
    }
  }

  private onStdout(line: string): void {
    let parsed: unknown;
    try {
      parsed = JSON.parse(line);
    } catch {
      this.forward(line);
      return;
    }
    if (parsed === null || typeof parsed !== 'object') return this.forward(line);
    const record = parsed as Record<string, unknown>;
    if (typeof record.level === 'number') {
      if (record.level >= pinoWarnLevel) this.forward(formatLogLine(record));
      return;
    }
    if (typeof record.event === 'string') {
      for (const listener of this.listeners) listener(record as ChildEvent);
      return;
    }
    this.forward(line);
  }

  private forward(line: string): void {
    if (line.trim() === '') return;
    const text = line.length > maxForwardedChars ? `${line.slice(0, maxForwardedChars)}...` : line;
    this.options.forward(`[${this.label}] ${text}`);
  }
}

export function describeExit(exit: ChildExit): string {
  return exit.signal ? `signal ${exit.signal}` : `code ${exit.code}`;
}

function formatLogLine(record: Record<string, unknown>): string {
  const level = levelNames[record.level as number] ?? `LEVEL ${String(record.level)}`;
  const rest = Object.fromEntries(Object.entries(record).filter(([key]) => !pinoBookkeeping.has(key)));
  const details = Object.keys(rest).length > 0 ? ` ${JSON.stringify(rest)}` : '';
  return `${level} ${typeof record.msg === 'string' ? record.msg : ''}${details}`;
}
