/**
 * Load for the fault suite: every task submitted is recorded with its one answer, so that after
 * a fault the suite can check that each got exactly one final answer, and measure from the
 * answers how long service degraded. Times are performance.now() milliseconds.
 */
import type { TestContext } from 'node:test';
import { performance } from 'node:perf_hooks';
import type { Task } from '@headroom/proto';
import { json, submit, task, type SubmitResult } from '@headroom/testkit';
import type { BalancerProcess } from './stack';

/** How long a client waits for an answer beyond the task's own deadline before it calls it a hang. */
const answerGraceMs = 3000;
const failedCallBackoffMs = 25;

export interface Submission {
  readonly seq: number;
  readonly task: Task;
  readonly balancerId: string;
  readonly submittedAtMs: number;
  answeredAtMs: number | undefined;
  answer: SubmitResult | undefined;
  /** How many answers came: 1 for every submission once the load stopped. */
  answers: number;
}

export type Priority = 'USER_PRESENT' | 'BACKGROUND';

/** Every submission of one case, in order. */
export class TaskLog {
  readonly submissions: Submission[] = [];

  async submit(balancer: BalancerProcess, t: Task): Promise<Submission> {
    const deadlineUnixMs = Number(t.deadlineUnixMs ?? Date.now() + 10_000);
    const submission: Submission = {
      seq: this.submissions.length,
      task: t,
      balancerId: balancer.id,
      submittedAtMs: performance.now(),
      answeredAtMs: undefined,
      answer: undefined,
      answers: 0,
    };
    this.submissions.push(submission);
    let answer: SubmitResult;
    try {
      answer = await submit(balancer.client, t, deadlineUnixMs - Date.now() + answerGraceMs);
    } catch {
      // The client was closed (a case that failed is being cleaned up): no answer, counted as lost.
      return submission;
    }
    submission.answers++;
    submission.answer = answer;
    submission.answeredAtMs = performance.now();
    return submission;
  }

  /** Submissions answered at or after `fromMs` and (optionally) before `toMs`. */
  answeredBetween(fromMs: number, toMs = Number.POSITIVE_INFINITY): Submission[] {
    return this.submissions.filter((s) => s.answeredAtMs !== undefined && s.answeredAtMs >= fromMs && s.answeredAtMs < toMs);
  }
}

export interface DemoTaskOptions {
  priority?: Priority;
  integration?: string;
  sleepMs?: number;
  cpuMs?: number;
  idempotent?: boolean;
  deadlineMs?: number;
}

/** A task for the demo handlers (sim/src/handlers/demo.ts). */
export function demoTask(options: DemoTaskOptions = {}): Task {
  const { priority = 'BACKGROUND', integration = 'bank-a', sleepMs = 50, cpuMs, idempotent = false, deadlineMs = 10_000 } = options;
  return task({ priority, integration, idempotent, payload: json({ sleepMs, ...(cpuMs ? { cpuMs } : {}) }), deadlineUnixMs: Date.now() + deadlineMs });
}

export interface RunningLoad {
  /** Stops sending and resolves once every task sent has its answer. */
  stop(): Promise<void>;
}

export interface ClosedLoadOptions {
  /** Tasks kept in flight at once: each lane sends its next task when the last is answered. */
  lanes: number;
  balancerFor(lane: number, seq: number): BalancerProcess;
  taskFor(lane: number, seq: number): Task;
  /** Bounds, whatever happens: the load stops by itself at either. */
  maxTasks?: number;
  maxDurationMs?: number;
}

/** Closed-loop load: `lanes` clients, each waiting for its answer before it sends again. Stopped at the latest when the test ends. */
export function startClosedLoad(t: TestContext, log: TaskLog, options: ClosedLoadOptions): RunningLoad {
  const { maxTasks = 5000, maxDurationMs = 60_000 } = options;
  const endsAtMs = performance.now() + maxDurationMs;
  let stopped = false;
  let sent = 0;
  const lanes = Promise.all(
    Array.from({ length: options.lanes }, async (_, lane) => {
      while (!stopped && sent < maxTasks && performance.now() < endsAtMs) {
        const seq = sent++;
        const { answer } = await log.submit(options.balancerFor(lane, seq), options.taskFor(lane, seq));
        // A client backs off a little after a failed call rather than spin on a dead balancer.
        if (!answer?.ok) await new Promise((resolve) => setTimeout(resolve, failedCallBackoffMs));
      }
    }),
  );
  const running = {
    async stop() {
      stopped = true;
      await lanes;
    },
  };
  t.after(() => running.stop());
  return running;
}

export interface OpenLoadOptions {
  /** Tasks sent per second whether or not earlier ones were answered (as users arrive). */
  ratePerSecond: number;
  /** Answers awaited at once at most; a tick with this many outstanding sends nothing. */
  maxOutstanding: number;
  balancerFor(seq: number): BalancerProcess;
  taskFor(seq: number): Task;
  maxTasks?: number;
  maxDurationMs?: number;
}

/** Open-loop load: arrivals at a fixed rate, so that a slow fleet makes queues grow. Stopped at the latest when the test ends. */
export function startOpenLoad(t: TestContext, log: TaskLog, options: OpenLoadOptions): RunningLoad & { skippedTicks(): number } {
  const { maxTasks = 5000, maxDurationMs = 60_000 } = options;
  const intervalMs = 1000 / options.ratePerSecond;
  const startedAtMs = performance.now();
  const outstanding = new Set<Promise<Submission>>();
  let sent = 0;
  let skipped = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;
  let finished!: () => void;
  const ticking = new Promise<void>((resolve) => (finished = resolve));
  const tick = () => {
    const elapsedMs = performance.now() - startedAtMs;
    if (stopped || sent >= maxTasks || elapsedMs >= maxDurationMs) return finished();
    // Catch up on the schedule (timers fire late on a busy machine), at most a few per tick.
    const due = Math.min(Math.floor(elapsedMs / intervalMs) + 1 - sent - skipped, 5);
    for (let i = 0; i < due && sent < maxTasks; i++) {
      if (outstanding.size >= options.maxOutstanding) {
        skipped++;
        continue;
      }
      const seq = sent++;
      const pending = log.submit(options.balancerFor(seq), options.taskFor(seq));
      outstanding.add(pending);
      void pending.finally(() => outstanding.delete(pending));
    }
    timer = setTimeout(tick, intervalMs);
  };
  tick();
  const running = {
    skippedTicks: () => skipped,
    async stop() {
      stopped = true;
      clearTimeout(timer);
      finished();
      await ticking;
      await Promise.all([...outstanding]);
    },
  };
  t.after(() => running.stop());
  return running;
}
