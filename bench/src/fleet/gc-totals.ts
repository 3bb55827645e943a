/**
 * Every GC pause of a worker process, counted from perf_hooks in the worker and served as JSON
 * on 127.0.0.1 (the port named by HEADROOM_BENCH_GC_TOTALS_PORT) by gc-observing-handlers.ts.
 *
 * Why not only `nodejs_gc_duration_seconds`: prom-client's observer records the first entry of
 * each batch perf_hooks delivers (`list.getEntries()[0]`, prom-client 15.1), and when several
 * collections run in one turn of the event loop, as scavenges do in a young generation that
 * fills quickly, the others are lost. These totals count them all, so a benchmark can show both.
 */
import { constants, PerformanceObserver } from 'node:perf_hooks';
import { serveMetrics } from '@headroom/common';
import { getText } from './http-get';

export const gcTotalsPortEnv = 'HEADROOM_BENCH_GC_TOTALS_PORT';
/** For gc-observing-handlers.ts: a handlers module to count the GC of (a path `require` takes), instead of the demo handlers. */
export const innerHandlersEnv = 'HEADROOM_BENCH_INNER_HANDLERS';
/** What makes a process that preloads gc-on-signal.ts run a full GC. */
export const gcSignal = 'SIGUSR2';

/** GC kinds as prom-client labels them: minor = scavenge, major = mark-sweep-compact. */
export const gcKinds = ['minor', 'major', 'incremental', 'weakcb'] as const;
export type GcKind = (typeof gcKinds)[number];

export interface GcTotals {
  /** Main-thread pause time since the observer started, by kind. */
  secondsByKind: Record<GcKind, number>;
  countByKind: Record<GcKind, number>;
}

const kindOf: Readonly<Record<number, GcKind>> = {
  [constants.NODE_PERFORMANCE_GC_MINOR]: 'minor',
  [constants.NODE_PERFORMANCE_GC_MAJOR]: 'major',
  [constants.NODE_PERFORMANCE_GC_INCREMENTAL]: 'incremental',
  [constants.NODE_PERFORMANCE_GC_WEAKCB]: 'weakcb',
};

export const byGcKind = <T>(value: (kind: GcKind) => T) => Object.fromEntries(gcKinds.map((kind) => [kind, value(kind)])) as Record<GcKind, T>;

/** Starts counting this process's GC pauses and serves the totals at http://127.0.0.1:`port`/metrics. */
export async function serveGcTotals(port: number): Promise<void> {
  const totals: GcTotals = { secondsByKind: byGcKind(() => 0), countByKind: byGcKind(() => 0) };
  new PerformanceObserver((list) => {
    for (const entry of list.getEntries()) {
      // A 'gc' entry carries its kind in `detail` (Node >= 16).
      const kind = kindOf[(entry as { detail?: { kind?: number } }).detail?.kind ?? -1];
      if (!kind) continue;
      totals.secondsByKind[kind] += entry.duration / 1000;
      totals.countByKind[kind] += 1;
    }
  }).observe({ entryTypes: ['gc'] });
  await serveMetrics({ metrics: async () => JSON.stringify(totals), contentType: 'application/json' }, '127.0.0.1', port);
}

export async function readGcTotals(port: number, timeoutMs: number, signal: AbortSignal): Promise<GcTotals> {
  return JSON.parse(await getText(`http://127.0.0.1:${port}/metrics`, timeoutMs, signal)) as GcTotals;
}
