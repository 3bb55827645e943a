/**
 * The incidents benchmark's figures, from every task's record (TaskRecord): the phase split by
 * when each task was due (before the incident, during it), and by integration (the slow one, the others).
 */
import type { TaskRecord } from './load/protocol';
import { figures } from './report/stats';

/** Tasks of one kind in one part of the phase. */
export interface PartFigures {
  tasks: number;
  /** Every answer's latency, failed ones too (a refusal or a missed deadline must not vanish from the tail). */
  p50Ms: number;
  p99Ms: number;
  /** Latency minus the handler's time, for the tasks that ran: time queued (balancer and worker), travel, waiting for a CPU. */
  queueWaitP50Ms: number;
  queueWaitP99Ms: number;
  /** Waiting for a slot, at the front or in a worker's queue (TaskRecord.slotWaitMs), of the tasks that ran. */
  slotWaitP50Ms: number;
  slotWaitP99Ms: number;
  /** The handler's own time, p99: the floor no placement goes below. */
  runP99Ms: number;
  /** Answered with an error, or later than the task's deadline. */
  missed: number;
  byCode: Record<string, number>;
  /** Failed answers whose code is not one of Headroom's (HR_ERR_*): a bare gRPC status. */
  uncoded: number;
}

export interface IncidentSummary extends PhaseCounts {
  othersBefore: PartFigures;
  othersDuring: PartFigures;
  /** The other integrations' p99 during the incident over before it. */
  othersP99Ratio: number;
  othersQueueWaitP99Ratio: number;
  slowBefore: PartFigures;
  slowDuring: PartFigures;
}

export interface IncidentInput extends PhaseCounts {
  records: readonly TaskRecord[];
  before: Window;
  during: Window;
  slowIntegration: string;
  taskDeadlineMs: number;
}

/** Tasks answered with an error (any code): refused, shed, past their deadline, or failed in the handler. */
export const failedCount = (part: PartFigures): number => Object.values(part.byCode).reduce((sum, n) => sum + n, 0);

export function partFigures(records: readonly TaskRecord[], taskDeadlineMs: number): PartFigures {
  const latency = figures(records.map((r) => r.latencyMs));
  const ran = records.filter((r) => r.runMs !== undefined);
  const queueWait = figures(ran.map((r) => r.latencyMs - r.runMs!));
  const slotWait = figures(ran.map((r) => r.slotWaitMs ?? 0));
  const byCode: Record<string, number> = {};
  for (const r of records) if (r.code !== '') byCode[r.code] = (byCode[r.code] ?? 0) + 1;
  return {
    tasks: records.length,
    p50Ms: latency.medianMs,
    p99Ms: latency.p99Ms,
    queueWaitP50Ms: queueWait.medianMs,
    queueWaitP99Ms: queueWait.p99Ms,
    slotWaitP50Ms: slotWait.medianMs,
    slotWaitP99Ms: slotWait.p99Ms,
    runP99Ms: figures(ran.map((r) => r.runMs!)).p99Ms,
    missed: records.filter((r) => r.code !== '' || r.latencyMs > taskDeadlineMs).length,
    byCode,
    uncoded: records.filter((r) => r.code !== '' && !r.code.startsWith('HR_ERR_')).length,
  };
}

export function summariseIncident(input: IncidentInput): IncidentSummary {
  const { records, before, during, slowIntegration, taskDeadlineMs, ...counts } = input;
  const of = (part: Window, slow: boolean) =>
    partFigures(
      records.filter((r) => dueWithin(part)(r) && (r.integration === slowIntegration) === slow),
      taskDeadlineMs,
    );
  const othersBefore = of(before, false);
  const othersDuring = of(during, false);
  return {
    ...counts,
    othersBefore,
    othersDuring,
    othersP99Ratio: othersDuring.p99Ms / othersBefore.p99Ms,
    othersQueueWaitP99Ratio: othersDuring.queueWaitP99Ms / othersBefore.queueWaitP99Ms,
    slowBefore: of(before, true),
    slowDuring: of(during, true),
  };
}

/** A window of the phase, by when tasks fell due, from its start. */
export interface Window {
  fromMs: number;
  untilMs: number;
}

export const dueWithin =
  ({ fromMs, untilMs }: Window) =>
  (r: TaskRecord): boolean =>
    r.dueMs >= fromMs && r.dueMs < untilMs;

/** What every scenario's phase gives besides its figures. */
export interface PhaseCounts {
  alternative: string;
  repetition: number;
  /** Tasks sent (the whole phase) minus answers received: must be 0. */
  lostTasks: number;
  /** Calls due while maxOutstanding were out, never sent (measured part only). */
  dropped: number;
  machineCpuPercentOfCore: number | undefined;
  /**
   * How late the generator sent the measured tasks, p99: latency counts from when a task was due,
   * so a generator that falls behind (a busy machine) adds this to every queue wait.
   */
  sendLagP99Ms?: number;
}

/** Background spike: user-present tasks before and during the spike, background ones during it. */
export interface SpikeSummary extends PhaseCounts {
  userBefore: PartFigures;
  userDuring: PartFigures;
  backgroundBefore: PartFigures;
  backgroundDuring: PartFigures;
}

export function summariseSpike(
  counts: PhaseCounts,
  records: readonly TaskRecord[],
  parts: { before: Window; during: Window },
  taskDeadlineMs: number,
): SpikeSummary {
  const of = (part: Window, priority: TaskRecord['priority']) =>
    partFigures(
      records.filter((r) => dueWithin(part)(r) && r.priority === priority),
      taskDeadlineMs,
    );
  return {
    ...counts,
    userBefore: of(parts.before, 'USER_PRESENT'),
    userDuring: of(parts.during, 'USER_PRESENT'),
    backgroundBefore: of(parts.before, 'BACKGROUND'),
    backgroundDuring: of(parts.during, 'BACKGROUND'),
  };
}

/** High load: every task of the measured window, and its user-present ones. */
export interface HighLoadSummary extends PhaseCounts {
  all: PartFigures;
  user: PartFigures;
  /** Queueing time p99 (all tasks) over the best non-Headroom alternative's in the same repetition; set once all are measured. */
  queueWaitP99OverBest?: number;
}

export function summariseHighLoad(counts: PhaseCounts, records: readonly TaskRecord[], measured: Window, taskDeadlineMs: number): HighLoadSummary {
  const within = records.filter(dueWithin(measured));
  return {
    ...counts,
    all: partFigures(within, taskDeadlineMs),
    user: partFigures(
      within.filter((r) => r.priority === 'USER_PRESENT'),
      taskDeadlineMs,
    ),
  };
}

/**
 * Each high-load summary's queueing time p99 over the lowest of the comparison alternatives'
 * (`comparedWith`) in its repetition.
 */
export function withRatioToBest(summaries: readonly HighLoadSummary[], comparedWith: ReadonlySet<string>): HighLoadSummary[] {
  return summaries.map((s) => {
    const best = Math.min(...summaries.filter((o) => o.repetition === s.repetition && comparedWith.has(o.alternative)).map((o) => o.all.queueWaitP99Ms));
    return Number.isFinite(best) && best > 0 ? { ...s, queueWaitP99OverBest: s.all.queueWaitP99Ms / best } : s;
  });
}
