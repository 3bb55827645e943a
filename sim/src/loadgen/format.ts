/** One-line renderings of load figures, shared by the load generator CLI and the demo. */
import type { ClusterFigures, LoadFigures, PriorityFigures, TaskPriority } from './figures';
import type { LatencySummary } from './histogram';
import type { LoadReport } from './load-generator';
import { loadPhases, priorities } from './schedule';

const ms = (value: number) => (value < 10 ? value.toFixed(1) : Math.round(value).toString());

export function formatLatency(summary: LatencySummary): string {
  if (summary.count === 0) return '-';
  return `${ms(summary.p50Ms)}/${ms(summary.p95Ms)}/${ms(summary.p99Ms)} ms`;
}

export function formatCounts(counts: Record<string, number>): string {
  const entries = Object.entries(counts).sort((a, b) => b[1] - a[1]);
  return entries.length === 0 ? 'none' : entries.map(([code, n]) => `${code} x${n}`).join(', ');
}

/** "sent 20.0/s (target 20), done 19.8/s, awaiting answers 2, dropped 0, rejected 0" */
export function formatLoadRates(figures: LoadFigures, report: Pick<LoadReport, 'targetRatePerS' | 'outstandingCalls'>): string {
  return rates(figures, report.targetRatePerS, `awaiting answers ${report.outstandingCalls}, `);
}

function rates(figures: LoadFigures, targetRatePerS: number, awaiting: string): string {
  const dropped = figures.droppedOutstandingLimit + figures.droppedBehindSchedule;
  return (
    `sent ${figures.sentPerS.toFixed(1)}/s (target ${targetRatePerS}), done ${figures.completedPerS.toFixed(1)}/s, ` +
    `${awaiting}dropped ${dropped}` +
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

/** "sent 5.0/s, done 5.0/s, p50/p95/p99 45/120/130 ms, failed 0, rejected 2 (HR_ERR_SHED x2)" */
export function formatPriorityLoad(figures: PriorityFigures): string {
  return (
    `sent ${figures.sentPerS.toFixed(1)}/s, done ${figures.completedPerS.toFixed(1)}/s, p50/p95/p99 ${formatLatency(figures.latencyMs)}, ` +
    `failed ${figures.failed}, rejected ${figures.rejected}` +
    (figures.rejected > 0 ? ` (${formatCounts(figures.rejectedByCode)})` : '')
  );
}

const priorityNames: Record<TaskPriority, string> = { USER_PRESENT: 'user-present', BACKGROUND: 'background' };

/** One line a cluster, then one a priority. */
function figureLines(figures: LoadFigures, indent: string): string[] {
  const width = Math.max(12, ...Object.keys(figures.clusters).map((name) => name.length));
  return [
    ...Object.entries(figures.clusters)
      .sort(([a], [b]) => a.localeCompare(b))
      .map(([cluster, clusterFigures]) => `${indent}${cluster.padEnd(width)}  ${formatClusterLoad(clusterFigures)}`),
    ...priorities.map((priority) => `${indent}${priorityNames[priority].padEnd(width)}  ${formatPriorityLoad(figures.priorities[priority])}`),
  ];
}

/**
 * The window's (or the whole run's) figures by cluster and by priority; for the whole run,
 * once a spike has begun, the steady and spike phases apart.
 */
export function formatLoadReport(report: LoadReport, which: 'window' | 'total' = 'window'): string {
  const figures = report[which];
  const phaseNote = which === 'window' && report.phase === 'spike' ? ' (spiking now)' : '';
  const lines = [`load over ${figures.seconds.toFixed(1)} s${phaseNote}: ${formatLoadRates(figures, report)}`, ...figureLines(figures, '  ')];
  if (which === 'total' && report.phases.spike.seconds > 0) {
    for (const phase of loadPhases) {
      const phaseFigures = report.phases[phase];
      lines.push(
        `  ${phase} phase, ${phaseFigures.seconds.toFixed(1)} s: ${rates(phaseFigures, Math.round(phaseFigures.targetRatePerS * 10) / 10, '')}` +
          `; shed ${phaseFigures.shed}, queue full ${phaseFigures.queueFull}`,
        ...figureLines(phaseFigures, '    '),
      );
    }
  }
  return lines.join('\n');
}
