/**
 * Load for the fault suite: every task submitted is recorded with its one answer, so that after
 * a fault the suite can check that each got exactly one final answer, and measure from the
 * answers how long service degraded. Times are performance.now() milliseconds.
 */
import type { TestContext } from 'node:test';
import { performance } from 'node:perf_hooks';
import type { Task } from '@headroom/proto';
import { ClosedLoop, OpenLoop, submitTask, type SubmitAnswer } from '@headroom/sim';
import { json, task } from '@headroom/testkit';
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
  answer: SubmitAnswer | undefined;
  /** How many answers came: 1 for every submission once the load stopped. */
  answers: number;
}

export type Priority = 'USER_PRESENT' | 'BACKGROUND';

/** Every submission of one case, in order. */
export class TaskLog {
  readonly submissions: Submission[] = [];

  async submit(balancer: BalancerProcess, t: Task): Promise<Submission> {
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
    let answer: SubmitAnswer;
    try {
      answer = await submitTask(balancer.client, t, { deadlineMarginMs: answerGraceMs });
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
  /** Default: bank-a to bank-d in turn, as one integration may hold only half of a cluster's slots (the ledger's default limit). */
  integration?: string;
  sleepMs?: number;
  cpuMs?: number;
  idempotent?: boolean;
  deadlineMs?: number;
}

const demoIntegrations = ['bank-a', 'bank-b', 'bank-c', 'bank-d'];
let demoTasksMade = 0;

/** A task for the demo handlers (sim/src/handlers/demo.ts). */
export function demoTask(options: DemoTaskOptions = {}): Task {
  const {
    priority = 'BACKGROUND',
    integration = demoIntegrations[demoTasksMade++ % demoIntegrations.length]!,
    sleepMs = 50,
    cpuMs,
    idempotent = false,
    deadlineMs = 10_000,
  } = options;
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
  const loop = new ClosedLoop({
    lanes: options.lanes,
    maxCalls: maxTasks,
    maxDurationMs,
    call: (seq, lane) => log.submit(options.balancerFor(lane, seq), options.taskFor(lane, seq)),
    // A client backs off a little after a failed call rather than spin on a dead balancer.
    pauseAfterMs: ({ answer }) => (answer?.ok ? 0 : failedCallBackoffMs),
  });
  const running = {
    async stop() {
      loop.stop();
      await loop.finished();
    },
  };
  t.after(() => running.stop());
  return running;
}

export interface OpenLoadOptions {
  /** Tasks sent per second whether or not earlier ones were answered (as users arrive). */
  ratePerSecond: number;
  /** Answers awaited at once at most; a task due while this many are outstanding is skipped. */
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
  let sent = 0;
  let skipped = 0;
  const loop = new OpenLoop({
    // Timers fire late on a busy machine: catch up on the schedule, at most a few per tick.
    schedules: [{ dueBy: (elapsedMs) => Math.floor(elapsedMs / intervalMs) + 1, maxBurst: { calls: 5, pastDue: 'defer' } }],
    maxOutstandingCalls: options.maxOutstanding,
    tickMs: intervalMs,
    maxCalls: maxTasks,
    maxDurationMs,
    onDropped: ({ calls }) => (skipped += calls),
    send: () => {
      const seq = sent++;
      return log.submit(options.balancerFor(seq), options.taskFor(seq));
    },
  });
  const running = {
    skippedTicks: () => skipped,
    async stop() {
      loop.stop();
      await loop.finished();
    },
  };
  t.after(() => running.stop());
  return running;
}
