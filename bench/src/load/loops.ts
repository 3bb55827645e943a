/**
 * A benchmark phase on the shared loops of @headroom/sim (ClosedLoop, OpenLoop), with the
 * benchmarks' own measure: a warm-up, a measured window, and the figures of PhaseResult.
 */
import { performance } from 'node:perf_hooks';
import { ClosedLoop, OpenLoop } from '@headroom/sim';
import { LatencyHistogram } from '../report/histogram';
import { CpuWindow } from './cpu-window';
import { PhaseFigures } from './phase-figures';
import {
  maxTaskRecords,
  spikeSequenceBase,
  type BackgroundSpikeSpec,
  type ClosedLoopSpec,
  type OpenLoopSpec,
  type PhaseResult,
  type TaskRecord,
} from './protocol';
import type { Call, CallMarks, CallOutcome, SlowdownMark } from './call-target';

/**
 * `concurrency` lanes, each sending its next call when the previous one is answered. Resolves when
 * the window ends: calls still out then are left to finish on their own, uncounted (a slow task's
 * tail would otherwise hold up the run).
 */
export async function closedLoop(call: Call, spec: ClosedLoopSpec): Promise<PhaseResult> {
  const measured = new PhaseFigures(spec.keepLatencies);
  const cpu = new CpuWindow(spec.cpuOf ?? {});
  const loop = new ClosedLoop({
    lanes: spec.concurrency,
    maxCalls: spec.maxCalls,
    maxDurationMs: spec.warmupMs + spec.durationMs,
    call: async (sequence, route) => {
      const sentAt = performance.now();
      const outcome = await call(sequence, route);
      const answeredAt = performance.now();
      if (outcome.ok) cpu.taskDone();
      if (answeredAt >= measureFrom && answeredAt < measureUntil) measured.record(outcome, answeredAt - sentAt);
    },
  });
  const measureFrom = loop.startedAtMs + spec.warmupMs;
  const measureUntil = measureFrom + spec.durationMs;
  const cpuOpens = setTimeout(() => cpu.open(), Math.max(0, measureFrom - performance.now()));
  let timer: NodeJS.Timeout | undefined;
  const windowEnds = new Promise<void>((resolve) => (timer = setTimeout(resolve, Math.max(0, measureUntil - performance.now()))));
  await Promise.race([loop.finished(), windowEnds]);
  cpu.close();
  clearTimeout(cpuOpens);
  clearTimeout(timer);
  loop.stop();
  const cpuFigures = cpu.figures();
  return {
    spec,
    ...measured.result(),
    dropped: 0,
    tasksPerSecond: measured.succeeded / (spec.durationMs / 1000),
    sendLag: new LatencyHistogram().summary(),
    calls: loop.sentCalls,
    elapsedMs: performance.now() - loop.startedAtMs,
    ...(cpuFigures ? { cpu: cpuFigures } : {}),
  };
}

/**
 * Sends call i at start + i / rate, whatever happened to earlier calls. Latency runs from
 * when the call was due, so the generator's own lateness and any stall count against the
 * target instead of silently lowering the load. `stop` ends it early: no more calls are sent,
 * and it resolves once the outstanding ones are answered.
 */
export async function openLoop(call: Call, spec: OpenLoopSpec, stop?: AbortSignal): Promise<PhaseResult> {
  if (!(spec.tasksPerSecond > 0)) throw new RangeError(`tasksPerSecond ${spec.tasksPerSecond}: expected > 0`);
  const intervalMs = 1000 / spec.tasksPerSecond;
  const warmupCalls = Math.round(spec.warmupMs / intervalMs);
  const measuredCalls = new PhaseFigures(spec.keepLatencies);
  const sendLag = new LatencyHistogram();
  const cpu = new CpuWindow(spec.cpuOf ?? {});
  let dropped = 0;
  let lastAnsweredAt = Number.NaN;
  let sentCalls = 0;
  let answeredCalls = 0;
  const taskRecords: TaskRecord[] | undefined = spec.keepTaskRecords ? [] : undefined;
  const incident = spec.incident;
  const slowdown: SlowdownMark | undefined = incident ? { integration: incident.integration, sleepFactor: incident.sleepFactor } : undefined;
  const spike = spec.backgroundSpike ? spikeSchedule(spec.backgroundSpike) : undefined;
  const loop = new OpenLoop({
    schedules: [
      {
        dueBy: (elapsedMs) => Math.floor(elapsedMs / intervalMs) + 1,
        dueAtMs: (sequence) => sequence * intervalMs,
        totalCalls: warmupCalls + Math.max(1, Math.round(spec.durationMs / intervalMs)),
      },
      ...(spike ? [spike] : []),
    ],
    maxOutstandingCalls: spec.maxOutstanding,
    tickMs: 'when-due',
    onDropped: ({ schedule, firstSequence, calls }) => {
      // The spike's tasks all fall in the measured part.
      if (schedule === 1 || firstSequence >= warmupCalls) dropped += calls;
    },
    send: async ({ schedule, sequence: inSchedule }) => {
      const isSpike = schedule === 1;
      const dueMs = isSpike ? spike!.dueAtMs(inSchedule) : inSchedule * intervalMs;
      const sequence = isSpike ? spikeSequenceBase + inSchedule : inSchedule;
      const dueAt = loop.startedAtMs + dueMs;
      const measured = isSpike || sequence >= warmupCalls;
      if (measured) sendLag.record(performance.now() - dueAt);
      const inIncident = incident !== undefined && dueMs >= incident.fromMs && dueMs < incident.untilMs;
      const marks: CallMarks = { ...(inIncident ? { slowdown } : {}), ...(isSpike ? { priority: 'BACKGROUND' as const } : {}) };
      sentCalls++;
      const outcome = await call(sequence, sequence, marks);
      const answeredAt = performance.now();
      answeredCalls++;
      if (outcome.ok) cpu.taskDone();
      if (taskRecords && taskRecords.length < maxTaskRecords) taskRecords.push(taskRecord(outcome, dueMs, answeredAt - dueAt));
      if (!measured) return;
      lastAnsweredAt = Number.isNaN(lastAnsweredAt) ? answeredAt : Math.max(lastAnsweredAt, answeredAt);
      measuredCalls.record(outcome, answeredAt - dueAt);
    },
  });
  const stopEarly = () => loop.stop();
  if (stop?.aborted) stopEarly();
  else stop?.addEventListener('abort', stopEarly, { once: true });
  // From when the first measured call is due until the last call is answered.
  const cpuOpens = setTimeout(() => cpu.open(), Math.max(0, loop.startedAtMs + warmupCalls * intervalMs - performance.now()));
  await loop.finished();
  cpu.close();
  clearTimeout(cpuOpens);
  stop?.removeEventListener('abort', stopEarly);
  const cpuFigures = cpu.figures();
  const calls = loop.dueCalls(0);
  const firstMeasuredDueAt = calls > warmupCalls ? loop.startedAtMs + warmupCalls * intervalMs : Number.NaN;
  const measuredMs = lastAnsweredAt - firstMeasuredDueAt;
  return {
    spec,
    ...measuredCalls.result(),
    dropped,
    tasksPerSecond: measuredMs > 0 ? measuredCalls.succeeded / (measuredMs / 1000) : 0,
    sendLag: sendLag.summary(),
    calls,
    elapsedMs: performance.now() - loop.startedAtMs,
    ...(cpuFigures ? { cpu: cpuFigures } : {}),
    ...(taskRecords ? { taskRecords, sentCalls, answeredCalls } : {}),
  };
}

/**
 * The spike's extra tasks, evenly from fromMs to untilMs. Once they are all due, the next is due
 * never (not at untilMs, already past: the loop would wake at once, again and again).
 */
function spikeSchedule({ extraTasksPerSecond, fromMs, untilMs }: BackgroundSpikeSpec) {
  if (!(extraTasksPerSecond > 0) || !(untilMs > fromMs))
    throw new RangeError(`background spike ${extraTasksPerSecond}/s from ${fromMs} to ${untilMs} ms: expected a rate > 0 and untilMs > fromMs`);
  const intervalMs = 1000 / extraTasksPerSecond;
  const totalCalls = Math.max(1, Math.round((untilMs - fromMs) / intervalMs));
  return {
    totalCalls,
    dueBy: (elapsedMs: number) => (elapsedMs < fromMs ? 0 : Math.min(totalCalls, Math.floor((elapsedMs - fromMs) / intervalMs) + 1)),
    dueAtMs: (sequence: number) => (sequence < totalCalls ? fromMs + sequence * intervalMs : Number.POSITIVE_INFINITY),
  };
}

function taskRecord(outcome: CallOutcome, dueMs: number, latencyMs: number): TaskRecord {
  const placement = outcome.ok ? outcome.placement : undefined;
  return {
    dueMs,
    integration: outcome.integration,
    priority: outcome.priority,
    code: outcome.ok ? '' : outcome.code,
    latencyMs,
    ...(placement ? { runMs: placement.runMs, slotWaitMs: placement.balancerQueueWaitMs + placement.workerQueueWaitMs } : {}),
  };
}
