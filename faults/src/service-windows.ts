/**
 * Service as the clients saw it, by time of submission: of the tasks sent in a span, the share
 * answered with a result, and how long their answers took. Windows that slide over a case tell
 * when service came back after a fault, not only that it did.
 */
import type { Submission, TaskLog } from './load';
import { latencyMs, percentile } from './report';

export interface ServiceFigures {
  /** Tasks submitted in the span. */
  arrivals: number;
  /** Of them, the share (0..1) answered with a result (no error of any kind). */
  okShare: number;
  /** 99th percentile of their latency, whatever the answer: a failure's is when its error came (unanswered: infinite). */
  p99LatencyMs: number;
}

export interface ServiceWindow extends ServiceFigures {
  /** performance.now() ms: submitted in [fromMs, toMs). */
  fromMs: number;
  toMs: number;
}

const isResult = (s: Submission) => s.answer?.ok === true && !s.answer.response.error;

function figuresOf(submissions: readonly Submission[]): ServiceFigures {
  const arrivals = submissions.length;
  const ok = submissions.filter(isResult).length;
  const latencies = submissions.map((s) => (s.answeredAtMs === undefined ? Number.POSITIVE_INFINITY : latencyMs(s)));
  return { arrivals, okShare: arrivals === 0 ? Number.NaN : ok / arrivals, p99LatencyMs: percentile(latencies, 99) };
}

/** The figures of the tasks submitted in [fromMs, toMs) (those `include` accepts). */
export function serviceBetween(log: TaskLog, fromMs: number, toMs: number, include: (s: Submission) => boolean = () => true): ServiceFigures {
  return figuresOf(log.submissions.filter((s) => s.submittedAtMs >= fromMs && s.submittedAtMs < toMs && include(s)));
}

/** Windows of `windowMs`, one starting every `stepMs` from `fromMs`, the last ending at or before `toMs`. */
export function serviceWindows(log: TaskLog, fromMs: number, toMs: number, windowMs: number, stepMs: number): ServiceWindow[] {
  const windows: ServiceWindow[] = [];
  for (let startMs = fromMs; startMs + windowMs <= toMs; startMs += stepMs) {
    windows.push({ fromMs: startMs, toMs: startMs + windowMs, ...serviceBetween(log, startMs, startMs + windowMs) });
  }
  return windows;
}

/**
 * The start of the first window from which every window is healthy, or undefined when the last
 * one is not (service never came back within the windows).
 */
export function healthyFromMs(windows: readonly ServiceWindow[], isHealthy: (w: ServiceWindow) => boolean): number | undefined {
  let from: number | undefined;
  for (const w of windows) {
    if (!isHealthy(w)) from = undefined;
    else from ??= w.fromMs;
  }
  return from;
}
