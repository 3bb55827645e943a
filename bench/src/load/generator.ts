import { fork, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { asFromGenerator, type PhaseResult, type PhaseSpec, type Targets, type ToGenerator } from './protocol';

const generatorScript = path.join(__dirname, 'generator-process.js');
const startTimeoutMs = 20_000;
/** Slack beyond a phase's own length before we call the generator stuck. */
const phaseSlackMs = 30_000;

/**
 * What a fleet carries when every slot is taken: a closed loop through `generator`'s balancers
 * keeping `concurrency` calls in flight (a multiple of the fleet's slots, so a task always waits
 * for each slot that frees). On paper a fleet carries its slots over its tasks' time; on a busy
 * machine a slot is also held while the task travels to its worker and the lease comes back, so less.
 */
export async function measureCarriedTasksPerSecond(
  generator: LoadGenerator,
  probe: { concurrency: number; warmupMs: number; durationMs: number },
  signal: AbortSignal,
): Promise<number> {
  const result = await generator.run(
    { kind: 'closed', target: 'balancer', concurrency: probe.concurrency, warmupMs: probe.warmupMs, durationMs: probe.durationMs, maxCalls: 1_000_000 },
    signal,
  );
  if (!(result.tasksPerSecond > 0)) throw new Error(`the fleet carried no task while its capacity was measured: ${JSON.stringify(result.errorsByCode)}`);
  return result.tasksPerSecond;
}

/** The parent's handle on the load-generator process. */
export class LoadGenerator {
  private nextId = 1;
  private readonly pending = new Map<number, { resolve(result: PhaseResult): void; reject(error: Error): void }>();
  private exited = false;
  private readonly exit: Promise<void>;

  private constructor(
    private readonly child: ChildProcess,
    readonly pid: number,
  ) {
    this.exit = new Promise((resolve) => child.once('exit', () => resolve()));
    child.once('exit', (code, signal) => {
      this.exited = true;
      for (const { reject } of this.pending.values()) reject(new Error(`the load generator exited (code ${code}, signal ${signal}) during a phase`));
      this.pending.clear();
    });
    child.on('message', (raw: unknown) => {
      const message = asFromGenerator(raw);
      if (!message || message.type === 'ready') return;
      const waiter = this.pending.get(message.id);
      if (!waiter) return;
      this.pending.delete(message.id);
      if (message.type === 'result') waiter.resolve(message.result);
      else waiter.reject(new Error(`load generator: ${message.message}`));
    });
  }

  /** Forks the generator and waits until it has connected to every target. */
  static async start(targets: Targets): Promise<LoadGenerator> {
    const child = fork(generatorScript, [JSON.stringify(targets)], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'], execArgv: [] });
    if (child.pid === undefined) throw new Error('could not fork the load generator');
    const generator = new LoadGenerator(child, child.pid);
    try {
      await new Promise<void>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`the load generator was not ready within ${startTimeoutMs} ms`)), startTimeoutMs);
        child.on('message', (raw: unknown) => {
          if (asFromGenerator(raw)?.type !== 'ready') return;
          clearTimeout(timer);
          resolve();
        });
        child.once('exit', (code) => {
          clearTimeout(timer);
          reject(new Error(`the load generator exited (code ${code}) before it was ready`));
        });
      });
    } catch (error) {
      await generator.close();
      throw error;
    }
    return generator;
  }

  /**
   * Runs one phase; rejects when `signal` aborts (the generator is then stopped). When `stop`
   * aborts, an open-loop phase sends no more calls and resolves once the outstanding ones are answered.
   * After `limitMs` (by default the phase's own length and 30 s) the generator counts as stuck and is stopped.
   */
  run(spec: PhaseSpec, signal: AbortSignal, stop?: AbortSignal, limitMs = spec.warmupMs + spec.durationMs + phaseSlackMs): Promise<PhaseResult> {
    if (this.exited) return Promise.reject(new Error('the load generator is not running'));
    const id = this.nextId++;
    return new Promise<PhaseResult>((resolve, reject) => {
      const timer = setTimeout(() => fail(new Error(`phase ${JSON.stringify(spec)} took longer than ${limitMs} ms`)), limitMs);
      const onAbort = () => fail(signal.reason instanceof Error ? signal.reason : new Error('aborted'));
      const onStop = () => {
        if (this.child.connected) this.child.send({ type: 'stop', id } satisfies ToGenerator);
      };
      const done = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', onAbort);
        stop?.removeEventListener('abort', onStop);
        this.pending.delete(id);
      };
      const fail = (error: Error) => {
        done();
        reject(error);
        void this.close();
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      this.pending.set(id, {
        resolve: (result) => {
          done();
          resolve(result);
        },
        reject: (error) => {
          done();
          reject(error);
        },
      });
      this.child.send({ type: 'run', id, spec } satisfies ToGenerator);
      if (stop?.aborted) onStop();
      else stop?.addEventListener('abort', onStop, { once: true });
    });
  }

  /** Disconnects (the generator exits on its own), SIGKILL after 5 s. Idempotent. */
  async close(): Promise<void> {
    if (this.exited) return;
    if (this.child.connected) this.child.disconnect();
    const timer = setTimeout(() => this.child.kill('SIGKILL'), 5_000);
    await this.exit;
    clearTimeout(timer);
  }
}
