import type { GateName, GateStatus, PlanStep, RolloutStatus } from '../../api/types';
import { formatMs, formatRatio, formatShare } from '../../format';

/** How each gate reads: its name, what it measures, and its figures in their unit. */
export const gateDisplay: Record<GateName, { label: string; explains: string; format(value: number | null): string }> = {
  p50Ratio: { label: 'p50 ratio', explains: 'candidate p50 ÷ baseline p50, same integration, same window', format: formatRatio },
  p95Ratio: { label: 'p95 ratio', explains: 'candidate p95 ÷ baseline p95, same integration, same window', format: formatRatio },
  errorRateIncrease: { label: 'Error rate increase', explains: 'candidate error rate minus baseline error rate', format: (value) => formatShare(value, 2) },
  gcShare: { label: 'GC share', explains: "share of time the candidate's busiest worker spent in GC pauses", format: formatShare },
  eventLoopUtilization: { label: 'Event-loop utilisation', explains: "of the candidate's busiest worker", format: formatShare },
  eventLoopDelayP99Ms: { label: 'Event-loop delay p99', explains: "of the candidate's worst worker", format: formatMs },
  heapShare: { label: 'Heap used ÷ limit', explains: "of the candidate's fullest worker", format: formatShare },
};

/** A gate status as text with a mark of its own (never colour alone). */
const statusText: Record<GateStatus, { mark: string; text: string; explains: string; tone: string }> = {
  ok: { mark: '✓', text: 'ok', explains: 'within its line', tone: 'tag-ok' },
  close: { mark: '▲', text: 'close', explains: 'above 90% of its line: the autopilot holds', tone: 'tag-warning' },
  breached: { mark: '✕', text: 'breached', explains: 'over its line: the autopilot rolls back (or backs a search off)', tone: 'gate-breached' },
  'not-enough-data': {
    mark: '…',
    text: 'not enough data',
    explains: 'too few tasks (or no worker report) in the window: nothing is decided on it',
    tone: 'gate-not-enough-data',
  },
};

export function GateStatusTag({ status }: { status: GateStatus }) {
  const { mark, text, explains, tone } = statusText[status];
  return (
    <span className={`tag gate-status ${tone}`} title={explains}>
      <span aria-hidden="true">{mark}</span> {text}
    </span>
  );
}

const rolloutStatusText: Record<RolloutStatus, string> = {
  running: 'running',
  paused: 'paused',
  completed: 'completed',
  'rolled-back': 'rolled back',
  aborted: 'aborted',
};

export function RolloutStatusTag({ status }: { status: RolloutStatus }) {
  return <span className={`rollout-status rollout-${status}`}>{rolloutStatusText[status]}</span>;
}

/** "max parallelism 4", or "search 4 → 16, ×1.5 a raise". */
export function describeParallelism(step: PlanStep): string {
  if (step.search) return `search max parallelism ${step.search.from} → ${step.search.max}, ×${step.search.factor} a raise`;
  return `max parallelism ${step.maxParallelism ?? '—'}`;
}
