/**
 * What a benchmark phase measures of its calls: in all, by integration, by priority, and where
 * the tasks waited (from the balancer's placements). Bounded: at most maxKeptLatencies latencies
 * kept one by one and maxTracedTasks traces; a task template names at most 64 groups of each kind.
 */
import { LatencyHistogram } from '../report/histogram';
import type { IntegrationFigures, PhaseResult, QueuedFigures, TaskTrace } from './protocol';
import type { CallOutcome } from './call-target';

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
      [...this.groups].map(([name, f]) => [
        name,
        { succeeded: f.succeeded, latency: f.latency.summary(), errorsByCode: f.errorsByCode, ...(this.keepLatencies ? { latenciesMs: f.latenciesMs } : {}) },
      ]),
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
      const trace: TaskTrace = {
        latencyMs,
        integration: outcome.integration,
        priority: outcome.priority,
        workerId,
        balancerQueueWaitMs,
        workerQueueWaitMs,
        runMs,
      };
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
      ...(this.keepLatencies
        ? { queuedMsList: this.queuedMsList, runMsList: this.runMsList, addedMsList: this.addedMsList, slowest: [...this.slowest].reverse() }
        : {}),
    };
  }
}

/** The measured calls of a phase: in all, by integration, by priority, and where they waited. */
export class PhaseFigures {
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
