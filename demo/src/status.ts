/** The demo's periodic status: per cluster, what the ledger holds and what the load saw. */
import type { ClusterSnapshot } from '@headroom/fleet';
import { formatClusterLoad, formatLoadRates, type LoadFigures, type LoadReport } from '@headroom/sim';

export function formatLedger(snapshot: ClusterSnapshot): string {
  const inflight = snapshot.workers.reduce((sum, worker) => sum + worker.inflight, 0);
  return `${snapshot.workers.length} workers, capacity ${snapshot.totalCapacity}, in flight ${inflight}, free ${snapshot.totalFree}`;
}

/**
 * [  10s] load: sent 20.0/s (target 20), done 19.8/s, ...
 *         baseline   3 workers, capacity 3, in flight 1, free 2    | done 98  p50/p95/p99 ...
 */
export function formatStatus(elapsedS: number, clusters: readonly string[], ledger: readonly ClusterSnapshot[] | Error, report: LoadReport): string {
  const stamp = `[${Math.round(elapsedS).toString().padStart(4)}s]`;
  const indent = ' '.repeat(stamp.length + 1);
  const lines = [`${stamp} load: ${formatLoadRates(report.window, report)}`];
  const nameWidth = Math.max(...clusters.map((name) => name.length));
  const ledgerTexts = clusters.map((name) => {
    if (ledger instanceof Error) return `ledger unreadable (${ledger.message})`;
    const snapshot = ledger.find((s) => s.cluster === name);
    return snapshot ? formatLedger(snapshot) : 'not in the ledger';
  });
  const ledgerWidth = Math.max(...ledgerTexts.map((text) => text.length));
  clusters.forEach((name, i) => {
    lines.push(`${indent}${name.padEnd(nameWidth)}  ${ledgerTexts[i]!.padEnd(ledgerWidth)} | ${formatClusterLoad(report.window.clusters[name])}`);
  });
  return lines.join('\n');
}

/** What the load generator saw from start to stop. */
export function formatLoadTotals(clusters: readonly string[], report: LoadReport): string {
  const total: LoadFigures = report.total;
  const nameWidth = Math.max(...clusters.map((name) => name.length));
  const lines = [`load in total over ${total.seconds.toFixed(1)} s: ${total.sent} sent, ${total.completed} done; ${formatLoadRates(total, report)}`];
  const names = [...new Set([...clusters, ...Object.keys(total.clusters)])];
  for (const name of names) lines.push(`  ${name.padEnd(nameWidth)}  ${formatClusterLoad(total.clusters[name])}`);
  return lines.join('\n');
}
