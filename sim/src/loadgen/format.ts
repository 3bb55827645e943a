/** One-line renderings of load figures, shared by the load generator CLI and the demo. */
import type { ClusterFigures, LoadFigures } from './figures';
import type { LatencySummary } from './histogram';
import type { LoadReport } from './load-generator';

const ms = (value: number) => (value < 10 ? value.toFixed(1) : Math.round(value).toString());

export function formatLatency(summary: LatencySummary): string {
  if (summary.count === 0) return '-';
  return `${ms(summary.p50Ms)}/${ms(summary.p95Ms)}/${ms(summary.p99Ms)} ms`;
}

export function formatCounts(counts: Record<string, number>): string {
  const entries = Object.entries(counts).sort((a, b) => b[1] - a[1]);
  return entries.length === 0 ? 'none' : entries.map(([code, n]) => `${code} x${n}`).join(', ');
}

/** "sent 20.0/s (target 20), done 19.8/s, waiting 2, dropped 0, rejected 0" */
export function formatLoadRates(figures: LoadFigures, report: Pick<LoadReport, 'targetRatePerS' | 'outstandingCalls'>): string {
  const dropped = figures.droppedOutstandingLimit + figures.droppedBehindSchedule;
  return (
    `sent ${figures.sentPerS.toFixed(1)}/s (target ${report.targetRatePerS}), done ${figures.completedPerS.toFixed(1)}/s, ` +
    `awaiting answers ${report.outstandingCalls}, dropped ${dropped}` +
    (dropped > 0 ? ` (${figures.droppedOutstandingLimit} over the outstanding limit, ${figures.droppedBehindSchedule} behind schedule)` : '') +
    `, rejected ${figures.rejected}` +
    (figures.rejected > 0 ? ` (${formatCounts(figures.rejectedByCode)})` : '')
  );
}

/** "done 50  p50/p95/p99 user-present 45/120/130 ms  background 40/180/400 ms  failed 0" */
export function formatClusterLoad(figures: ClusterFigures | undefined): string {
  if (!figures) return 'done 0';
  return (
    `done ${figures.completed}  p50/p95/p99 user-present ${formatLatency(figures.latencyMs.USER_PRESENT)}` +
    `  background ${formatLatency(figures.latencyMs.BACKGROUND)}  failed ${figures.failed}` +
    (figures.failed > 0 ? ` (${formatCounts(figures.errorsByCode)})` : '')
  );
}

export function formatLoadReport(report: LoadReport, which: 'window' | 'total' = 'window'): string {
  const figures = report[which];
  const width = Math.max(9, ...Object.keys(figures.clusters).map((name) => name.length));
  const lines = [`load over ${figures.seconds.toFixed(1)} s: ${formatLoadRates(figures, report)}`];
  for (const [cluster, clusterFigures] of Object.entries(figures.clusters).sort(([a], [b]) => a.localeCompare(b))) {
    lines.push(`  ${cluster.padEnd(width)}  ${formatClusterLoad(clusterFigures)}`);
  }
  return lines.join('\n');
}
