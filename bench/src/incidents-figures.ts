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
  queueWaitP99Ms: number;
  /** The handler's own time, p99: the floor no placement goes below. */
  runP99Ms: number;
  /** Answered with an error, or later than the task's deadline. */
  missed: number;
  byCode: Record<string, number>;
  /** Failed answers whose code is not one of Headroom's (HR_ERR_*): a bare gRPC status. */
  uncoded: number;
}

export interface IncidentSummary {
  alternative: string;
  repetition: number;
  othersBefore: PartFigures;
  othersDuring: PartFigures;
  /** The other integrations' p99 during the incident over before it. */
  othersP99Ratio: number;
  othersQueueWaitP99Ratio: number;
  slowBefore: PartFigures;
  slowDuring: PartFigures;
  /** Tasks sent (the whole phase) minus answers received: must be 0. */
  lostTasks: number;
  /** Calls due while maxOutstanding were out, never sent (measured part only). */
  dropped: number;
  machineCpuPercentOfCore: number | undefined;
}

export interface IncidentInput {
  alternative: string;
  repetition: number;
  records: readonly TaskRecord[];
  sentCalls: number;
  answeredCalls: number;
  dropped: number;
  before: { fromMs: number; untilMs: number };
  during: { fromMs: number; untilMs: number };
  slowIntegration: string;
  taskDeadlineMs: number;
  machineCpuPercentOfCore: number | undefined;
}

export function partFigures(records: readonly TaskRecord[], taskDeadlineMs: number): PartFigures {
  const latency = figures(records.map((r) => r.latencyMs));
  const ran = records.filter((r) => r.runMs !== undefined);
  const byCode: Record<string, number> = {};
  for (const r of records) if (r.code !== '') byCode[r.code] = (byCode[r.code] ?? 0) + 1;
  return {
    tasks: records.length,
    p50Ms: latency.medianMs,
    p99Ms: latency.p99Ms,
    queueWaitP99Ms: figures(ran.map((r) => r.latencyMs - r.runMs!)).p99Ms,
    runP99Ms: figures(ran.map((r) => r.runMs!)).p99Ms,
    missed: records.filter((r) => r.code !== '' || r.latencyMs > taskDeadlineMs).length,
    byCode,
    uncoded: records.filter((r) => r.code !== '' && !r.code.startsWith('HR_ERR_')).length,
  };
}

export function summariseIncident(input: IncidentInput): IncidentSummary {
  const within = (part: { fromMs: number; untilMs: number }) => (r: TaskRecord) => r.dueMs >= part.fromMs && r.dueMs < part.untilMs;
  const isSlow = (r: TaskRecord) => r.integration === input.slowIntegration;
  const of = (part: { fromMs: number; untilMs: number }, slow: boolean) =>
    partFigures(
      input.records.filter((r) => within(part)(r) && isSlow(r) === slow),
      input.taskDeadlineMs,
    );
  const othersBefore = of(input.before, false);
  const othersDuring = of(input.during, false);
  return {
    alternative: input.alternative,
    repetition: input.repetition,
    othersBefore,
    othersDuring,
    othersP99Ratio: othersDuring.p99Ms / othersBefore.p99Ms,
    othersQueueWaitP99Ratio: othersDuring.queueWaitP99Ms / othersBefore.queueWaitP99Ms,
    slowBefore: of(input.before, true),
    slowDuring: of(input.during, true),
    lostTasks: input.sentCalls - input.answeredCalls,
    dropped: input.dropped,
    machineCpuPercentOfCore: input.machineCpuPercentOfCore,
  };
}
