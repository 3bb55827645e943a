import { performance } from 'node:perf_hooks';
import { LatencyHistogram } from '../report/histogram';
import type { ClosedLoopSpec, OpenLoopSpec, PhaseResult } from './protocol';
import type { Call, CallOutcome } from './targets';

/** Most lanes a closed loop runs, and most calls an open loop keeps in flight. */
export const maxConcurrency = 4096;

function countError(errorsByCode: Record<string, number>, outcome: CallOutcome): void {
  if (!outcome.ok) errorsByCode[outcome.code] = (errorsByCode[outcome.code] ?? 0) + 1;
}

/** `concurrency` lanes, each sending its next call when the previous one is answered. */
export async function closedLoop(call: Call, spec: ClosedLoopSpec): Promise<PhaseResult> {
  if (!(spec.concurrency >= 1 && spec.concurrency <= maxConcurrency)) throw new RangeError(`concurrency ${spec.concurrency}: expected 1..${maxConcurrency}`);
  const latency = new LatencyHistogram();
  const errorsByCode: Record<string, number> = {};
  const startedAt = performance.now();
  const measureFrom = startedAt + spec.warmupMs;
  const measureUntil = measureFrom + spec.durationMs;
  let calls = 0;
  let succeeded = 0;

  const lane = async (route: number) => {
    while (calls < spec.maxCalls) {
      const sentAt = performance.now();
      if (sentAt >= measureUntil) return;
      const outcome = await call(calls++, route);
      const answeredAt = performance.now();
      if (answeredAt < measureFrom || answeredAt >= measureUntil) continue;
      if (outcome.ok) {
        succeeded++;
        latency.record(answeredAt - sentAt);
      } else {
        countError(errorsByCode, outcome);
      }
    }
  };
  await Promise.all(Array.from({ length: spec.concurrency }, (_unused, route) => lane(route)));
  return {
    spec,
    succeeded,
    errorsByCode,
    dropped: 0,
    tasksPerSecond: succeeded / (spec.durationMs / 1000),
    latency: latency.summary(),
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
  if (!(spec.maxOutstanding >= 1 && spec.maxOutstanding <= maxConcurrency)) throw new RangeError(`maxOutstanding ${spec.maxOutstanding}: expected 1..${maxConcurrency}`);
  const intervalMs = 1000 / spec.tasksPerSecond;
  const warmupCalls = Math.round(spec.warmupMs / intervalMs);
  let totalCalls = warmupCalls + Math.max(1, Math.round(spec.durationMs / intervalMs));
  const latency = new LatencyHistogram();
  const sendLag = new LatencyHistogram();
  const errorsByCode: Record<string, number> = {};
  let succeeded = 0;
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
        succeeded,
        errorsByCode,
        dropped,
        tasksPerSecond: measuredMs > 0 ? succeeded / (measuredMs / 1000) : 0,
        latency: latency.summary(),
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
          if (outcome.ok) {
            succeeded++;
            latency.record(answeredAt - dueAt);
          } else {
            countError(errorsByCode, outcome);
          }
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
