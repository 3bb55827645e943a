import { performance } from 'node:perf_hooks';
import { LatencyHistogram } from '../report/histogram';
import type { ClosedLoopSpec, IntegrationFigures, OpenLoopSpec, PhaseResult, QueuedFigures, TaskTrace } from './protocol';
import type { Call, CallOutcome } from './targets';

/** Most lanes a closed loop runs. */
export const maxConcurrency = 4096;
/** Most calls an open loop keeps in flight: the memory benchmark holds 100,000 tasks in a balancer's queue. */
export const maxOutstandingCalls = 200_000;

const countError = (errorsByCode: Record<string, number>, code: string) => (errorsByCode[code] = (errorsByCode[code] ?? 0) + 1);

/** Most latencies a phase keeps one by one (keepLatencies): about 8 MB. */
export const maxKeptLatencies = 1_000_000;

/** Slowest tasks a phase traces one by one (keepLatencies): where their time went. */
export const maxTracedTasks = 20;

type GroupFiguresState = { succeeded: number; latency: LatencyHistogram; errorsByCode: Record<string, number>; latenciesMs: number[] };

/** A phase's calls by one of their attributes (integration, priority); bounded: a task template names at most 64 of each. */
class GroupedFigures {
  private readonly groups = new Map<string, GroupFiguresState>();

  constructor(private readonly keepLatencies: boolean) {}

  record(group: string, outcome: CallOutcome, latencyMs: number, keepThisOne: boolean): void {
    let figures = this.groups.get(group);
    if (!figures) this.groups.set(group, (figures = { succeeded: 0, latency: new LatencyHistogram(), errorsByCode: {}, latenciesMs: [] }));
    if (outcome.ok) {
      figures.succeeded++;
      figures.latency.record(latencyMs);
      if (this.keepLatencies && keepThisOne) figures.latenciesMs.push(latencyMs);
    } else {
      countError(figures.errorsByCode, outcome.code);
    }
  }

  result(): Record<string, IntegrationFigures> {
    return Object.fromEntries(
      [...this.groups].map(([name, f]) => [name, { succeeded: f.succeeded, latency: f.latency.summary(), errorsByCode: f.errorsByCode, ...(this.keepLatencies ? { latenciesMs: f.latenciesMs } : {}) }]),
    );
  }
}

/** The time successful balancer calls waited for a slot, from the placements in their answers. */
class QueuedTracker {
  private tasks = 0;
  private waitedInWorker = 0;
  private readonly queued = new LatencyHistogram();
  private readonly queuedMsList: number[] = [];
  private readonly runMsList: number[] = [];
  private readonly addedMsList: number[] = [];
  // Kept sorted, fastest first; at most maxTracedTasks.
  private readonly slowest: TaskTrace[] = [];

  constructor(private readonly keepLatencies: boolean) {}

  record(outcome: CallOutcome, latencyMs: number, keepThisOne: boolean): void {
    if (!outcome.ok || !outcome.placement) return;
    const { workerId, balancerQueueWaitMs, workerQueueWaitMs, runMs } = outcome.placement;
    this.tasks++;
    if (workerQueueWaitMs > 0) this.waitedInWorker++;
    const queuedMs = balancerQueueWaitMs + workerQueueWaitMs;
    this.queued.record(queuedMs);
    if (!this.keepLatencies) return;
    if (keepThisOne) {
      this.queuedMsList.push(queuedMs);
      this.runMsList.push(runMs);
      this.addedMsList.push(latencyMs - runMs);
    }
    if (this.slowest.length < maxTracedTasks || latencyMs > this.slowest[0]!.latencyMs) {
      const trace: TaskTrace = { latencyMs, integration: outcome.integration, priority: outcome.priority, workerId, balancerQueueWaitMs, workerQueueWaitMs, runMs };
      const at = this.slowest.findIndex((t) => t.latencyMs > latencyMs);
      this.slowest.splice(at < 0 ? this.slowest.length : at, 0, trace);
      if (this.slowest.length > maxTracedTasks) this.slowest.shift();
    }
  }

  result(): QueuedFigures {
    return {
      tasks: this.tasks,
      waitedInWorker: this.waitedInWorker,
      queuedMs: this.queued.summary(),
      ...(this.keepLatencies ? { queuedMsList: this.queuedMsList, runMsList: this.runMsList, addedMsList: this.addedMsList, slowest: [...this.slowest].reverse() } : {}),
    };
  }
}

/** The measured calls of a phase: in all, by integration, by priority, and where they waited. */
class PhaseFigures {
  readonly latency = new LatencyHistogram();
  readonly errorsByCode: Record<string, number> = {};
  succeeded = 0;
  private readonly byIntegration: GroupedFigures;
  private readonly byPriority: GroupedFigures;
  private readonly queued: QueuedTracker;

  constructor(keepLatencies = false) {
    this.byIntegration = new GroupedFigures(keepLatencies);
    this.byPriority = new GroupedFigures(keepLatencies);
    this.queued = new QueuedTracker(keepLatencies);
  }

  record(outcome: CallOutcome, latencyMs: number): void {
    if (outcome.ok) {
      this.succeeded++;
      this.latency.record(latencyMs);
    } else {
      countError(this.errorsByCode, outcome.code);
    }
    const keepThisOne = this.succeeded <= maxKeptLatencies;
    this.byIntegration.record(outcome.integration, outcome, latencyMs, keepThisOne);
    this.byPriority.record(outcome.priority, outcome, latencyMs, keepThisOne);
    this.queued.record(outcome, latencyMs, keepThisOne);
  }

  /** What PhaseResult carries of these figures. */
  result(): Pick<PhaseResult, 'succeeded' | 'errorsByCode' | 'latency' | 'byIntegration' | 'byPriority' | 'queued'> {
    return {
      succeeded: this.succeeded,
      errorsByCode: this.errorsByCode,
      latency: this.latency.summary(),
      byIntegration: this.byIntegration.result(),
      byPriority: this.byPriority.result(),
      queued: this.queued.result(),
    };
  }
}

/**
 * `concurrency` lanes, each sending its next call when the previous one is answered. Resolves when
 * the window ends: calls still out then are left to finish on their own, uncounted (a slow task's
 * tail would otherwise hold up the run).
 */
export async function closedLoop(call: Call, spec: ClosedLoopSpec): Promise<PhaseResult> {
  if (!(spec.concurrency >= 1 && spec.concurrency <= maxConcurrency)) throw new RangeError(`concurrency ${spec.concurrency}: expected 1..${maxConcurrency}`);
  const measured = new PhaseFigures(spec.keepLatencies);
  const startedAt = performance.now();
  const measureFrom = startedAt + spec.warmupMs;
  const measureUntil = measureFrom + spec.durationMs;
  let calls = 0;

  const lane = async (route: number) => {
    while (calls < spec.maxCalls) {
      const sentAt = performance.now();
      if (sentAt >= measureUntil) return;
      const outcome = await call(calls++, route);
      const answeredAt = performance.now();
      if (answeredAt < measureFrom || answeredAt >= measureUntil) continue;
      measured.record(outcome, answeredAt - sentAt);
    }
  };
  const lanes = Promise.all(Array.from({ length: spec.concurrency }, (_unused, route) => lane(route)));
  let timer: NodeJS.Timeout | undefined;
  const windowEnds = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, measureUntil - performance.now()))));
  await Promise.race([lanes, windowEnds]);
  clearTimeout(timer);
  return {
    spec,
    ...measured.result(),
    dropped: 0,
    tasksPerSecond: measured.succeeded / (spec.durationMs / 1000),
    sendLag: new LatencyHistogram().summary(),
    calls,
    elapsedMs: performance.now() - startedAt,
  };
}

/**
 * Sends call i at start + i / rate, whatever happened to earlier calls. Latency runs from
 * when the call was due, so the generator's own lateness and any stall count against the
 * target instead of silently lowering the load. `stop` ends it early: no more calls are sent,
 * and it resolves once the outstanding ones are answered.
 */
export function openLoop(call: Call, spec: OpenLoopSpec, stop?: AbortSignal): Promise<PhaseResult> {
  if (!(spec.tasksPerSecond > 0)) throw new RangeError(`tasksPerSecond ${spec.tasksPerSecond}: expected > 0`);
  if (!(spec.maxOutstanding >= 1 && spec.maxOutstanding <= maxOutstandingCalls)) throw new RangeError(`maxOutstanding ${spec.maxOutstanding}: expected 1..${maxOutstandingCalls}`);
  const intervalMs = 1000 / spec.tasksPerSecond;
  const warmupCalls = Math.round(spec.warmupMs / intervalMs);
  let totalCalls = warmupCalls + Math.max(1, Math.round(spec.durationMs / intervalMs));
  const measuredCalls = new PhaseFigures(spec.keepLatencies);
  const sendLag = new LatencyHistogram();
  let dropped = 0;
  let next = 0;
  let outstanding = 0;
  let firstMeasuredDueAt = Number.NaN;
  let lastAnsweredAt = Number.NaN;
  const startedAt = performance.now() + 1;

  return new Promise((resolve) => {
    const finishIfDone = () => {
      if (next < totalCalls || outstanding > 0) return;
      const measuredMs = lastAnsweredAt - firstMeasuredDueAt;
      resolve({
        spec,
        ...measuredCalls.result(),
        dropped,
        tasksPerSecond: measuredMs > 0 ? measuredCalls.succeeded / (measuredMs / 1000) : 0,
        sendLag: sendLag.summary(),
        calls: next,
        elapsedMs: performance.now() - startedAt,
      });
    };
    const send = (sequence: number, dueAt: number) => {
      const measured = sequence >= warmupCalls;
      if (sequence === warmupCalls) firstMeasuredDueAt = dueAt;
      if (outstanding >= spec.maxOutstanding) {
        if (measured) dropped++;
        return;
      }
      outstanding++;
      const sentAt = performance.now();
      if (measured) sendLag.record(sentAt - dueAt);
      void call(sequence, sequence).then((outcome) => {
        outstanding--;
        const answeredAt = performance.now();
        if (measured) {
          lastAnsweredAt = Number.isNaN(lastAnsweredAt) ? answeredAt : Math.max(lastAnsweredAt, answeredAt);
          measuredCalls.record(outcome, answeredAt - dueAt);
        }
        finishIfDone();
      });
    };
    let timer: NodeJS.Timeout | undefined;
    const stopEarly = () => {
      clearTimeout(timer);
      totalCalls = next;
      finishIfDone();
    };
    if (stop?.aborted) return stopEarly();
    stop?.addEventListener('abort', stopEarly, { once: true });
    const tick = () => {
      const now = performance.now();
      while (next < totalCalls && startedAt + next * intervalMs <= now) {
        const sequence = next++;
        send(sequence, startedAt + sequence * intervalMs);
      }
      if (next < totalCalls) timer = setTimeout(tick, Math.max(0, startedAt + next * intervalMs - performance.now()));
      else finishIfDone();
    };
    timer = setTimeout(tick, 1);
  });
}
