/**
 * The gates of a rollout step, read once: per integration, candidate against baseline on the
 * same work over the same window (latency ratios, error rates); for the candidate's workers,
 * their runtime as they last reported it (GC, event loop, heap), the worst worker counting.
 */
import type { LatencyByCluster, LatencyHistogram, WorkerReport } from '@headroom/fleet';
import { closeToLineShare, type GateName, type Gates } from './plan';

/** `not-enough-data`: fewer samples than the plan's minSamples (or no worker report); nothing is decided on it. */
export type GateStatus = 'ok' | 'close' | 'breached' | 'not-enough-data';

export interface GateReading {
  gate: GateName;
  /** null when there is not enough data to tell. */
  value: number | null;
  line: number;
  status: GateStatus;
}

export interface IntegrationReading {
  integration: string;
  /** Tasks each cluster ran of it in the window (succeeded and failed). */
  samples: { baseline: number; candidate: number };
  gates: GateReading[];
  status: GateStatus;
}

export interface GatesReading {
  atUnixMs: number;
  windowSeconds: number;
  integrations: IntegrationReading[];
  /** The candidate cluster's workers (their latest reports). */
  workers: { reporting: number; gates: GateReading[]; status: GateStatus };
}

const severity: Record<GateStatus, number> = { ok: 0, 'not-enough-data': 1, close: 2, breached: 3 };

/** The worst of several statuses: breached, then close, then not enough data, then ok. */
export function worstStatus(statuses: readonly GateStatus[]): GateStatus {
  return statuses.reduce<GateStatus>((worst, status) => (severity[status] > severity[worst] ? status : worst), 'ok');
}

/**
 * `neutral`: the value of a candidate that is no different: 1 for a ratio, 0 for the rest. A
 * gate is close past 90% of the way from there to its line (a p50 ratio of 1.095 against 1.1).
 */
function reading(gate: GateName, value: number | null, line: number, neutral = 0): GateReading {
  if (value === null || !Number.isFinite(value)) return { gate, value: null, line, status: 'not-enough-data' };
  const rounded = Math.round(value * 10_000) / 10_000;
  const close = neutral + (line - neutral) * closeToLineShare;
  return { gate, value: rounded, line, status: value > line ? 'breached' : value > close ? 'close' : 'ok' };
}

function errorRate(histogram: LatencyHistogram | undefined): number {
  if (!histogram) return 0;
  const tasks = histogram.total + histogram.failed;
  return tasks === 0 ? 0 : histogram.failed / tasks;
}

/** One-sided z of a 99% test: a difference of error rates this many standard errors above 0 is not chance. */
export const errorRateSignificanceZ = 2.33;

/**
 * The candidate's error rate minus the baseline's. Above its line it breaks only when the
 * difference is also significant (a two-proportion z-test at 99%): with 13 tasks on the
 * candidate, one failure is 7.7%, which a bank that fails 2% of calls does by chance a quarter
 * of the time. Above the line but not significant is "not enough data", with the figure.
 */
function errorRateReading(candidate: LatencyHistogram | undefined, baseline: LatencyHistogram | undefined, line: number): GateReading {
  const increase = errorRate(candidate) - errorRate(baseline);
  const judged = reading('errorRateIncrease', increase, line);
  if (judged.status !== 'breached') return judged;
  const n1 = candidate ? candidate.total + candidate.failed : 0;
  const n0 = baseline ? baseline.total + baseline.failed : 0;
  const pooled = ((candidate?.failed ?? 0) + (baseline?.failed ?? 0)) / (n1 + n0);
  const standardError = Math.sqrt(pooled * (1 - pooled) * (1 / n1 + 1 / n0));
  return standardError > 0 && increase / standardError > errorRateSignificanceZ ? judged : { ...judged, status: 'not-enough-data' };
}

function ratio(candidate: number | undefined, baseline: number | undefined): number | null {
  if (candidate === undefined || baseline === undefined || baseline <= 0) return null;
  return candidate / baseline;
}

export interface GateInputs {
  gates: Gates;
  integrations: readonly string[];
  windowSeconds: number;
  minSamples: number;
  clusters: { baseline: string; candidate: string };
  /** Latency over the window (fleet's readLatency). */
  latency: LatencyByCluster;
  /** The candidate cluster's workers' latest reports. */
  candidateReports: readonly WorkerReport[];
  nowUnixMs: number;
}

export function readGates(inputs: GateInputs): GatesReading {
  const { gates, clusters, latency } = inputs;
  const integrations = inputs.integrations.map((integration): IntegrationReading => {
    const baseline = latency.get(clusters.baseline)?.get(integration);
    const candidate = latency.get(clusters.candidate)?.get(integration);
    const samples = { baseline: baseline ? baseline.total + baseline.failed : 0, candidate: candidate ? candidate.total + candidate.failed : 0 };
    const enough = samples.baseline >= inputs.minSamples && samples.candidate >= inputs.minSamples;
    const readings = enough
      ? [
          reading('p50Ratio', ratio(candidate?.quantileMs(0.5), baseline?.quantileMs(0.5)), gates.p50Ratio, 1),
          reading('p95Ratio', ratio(candidate?.quantileMs(0.95), baseline?.quantileMs(0.95)), gates.p95Ratio, 1),
          errorRateReading(candidate, baseline, gates.errorRateIncrease),
        ]
      : (['p50Ratio', 'p95Ratio', 'errorRateIncrease'] as const).map((gate) => reading(gate, null, gates[gate]));
    return { integration, samples, gates: readings, status: worstStatus(readings.map((r) => r.status)) };
  });
  const reports = inputs.candidateReports;
  const worst = (of: (report: WorkerReport) => number) => (reports.length === 0 ? null : Math.max(...reports.map(of)));
  const workerGates = [
    reading(
      'gcShare',
      worst((r) => r.gcTimeRatio),
      gates.gcShare,
    ),
    reading(
      'eventLoopUtilization',
      worst((r) => r.eventLoopUtilization),
      gates.eventLoopUtilization,
    ),
    reading(
      'eventLoopDelayP99Ms',
      worst((r) => r.eventLoopDelayP99Ms),
      gates.eventLoopDelayP99Ms,
    ),
    reading(
      'heapShare',
      worst((r) => (r.heapLimitBytes > 0 ? r.heapUsedBytes / r.heapLimitBytes : 0)),
      gates.heapShare,
    ),
  ];
  return {
    atUnixMs: inputs.nowUnixMs,
    windowSeconds: inputs.windowSeconds,
    integrations,
    workers: { reporting: reports.length, gates: workerGates, status: worstStatus(workerGates.map((r) => r.status)) },
  };
}

/** "p95Ratio 1.41 > 1.25" for every gate of `status` in a reading: what a decision says. */
export function describeGates(readings: readonly GateReading[], status: GateStatus): string {
  return readings
    .filter((r) => r.status === status)
    .map((r) => (r.value === null ? `${r.gate}: not enough data` : `${r.gate} ${r.value} ${status === 'breached' ? '>' : 'near'} ${r.line}`))
    .join(', ');
}
