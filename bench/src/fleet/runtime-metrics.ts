/**
 * A worker's Node runtime as its /metrics shows it (prom-client's defaults and Headroom's
 * process metrics, see common/src/process-metrics.ts), read from outside the process: the
 * worker may have started itself again with V8 flags, so its pid is not the one we spawned.
 */
import { byGcKind, type GcTotals } from './gc-totals';
import { getText } from './http-get';

export interface RuntimeSnapshot {
  /** nodejs_gc_duration_seconds: totals since the process started (see gc-totals.ts for what they miss). */
  gc: GcTotals;
  cpuSeconds: number;
  taskDurationSecondsSum: number;
  taskCount: number;
  /** Share of time the event loop was busy since the previous scrape (0..1). */
  eventLoopUtilizationSinceLastScrape: number;
  heapUsedBytes: number;
  heapLimitBytes: number;
  /** V8's young generation as allocated now (grows up to the semi-space limit). */
  newSpaceBytes: number;
  /** Tasks the worker runs now (headroom_worker_tasks_in_flight). */
  tasksInFlight: number;
}

interface Sample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Prometheus text format, the lines that carry a value (comments and blank lines left out). */
export function parsePrometheusText(text: string): Sample[] {
  const samples: Sample[] = [];
  for (const line of text.split('\n')) {
    const match = /^([A-Za-z_:][\w:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!match) continue;
    const labels: Record<string, string> = {};
    for (const label of (match[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)) labels[label[1]!] = label[2]!;
    samples.push({ name: match[1]!, labels, value: Number(match[3]) });
  }
  return samples;
}

export function runtimeSnapshot(text: string): RuntimeSnapshot {
  const samples = parsePrometheusText(text);
  /** The sum over every series of `name` whose labels include `labels`; NaN when there is none. */
  const sum = (name: string, labels: Record<string, string> = {}) => {
    const matching = samples.filter((s) => s.name === name && Object.entries(labels).every(([key, value]) => s.labels[key] === value));
    return matching.length === 0 ? Number.NaN : matching.reduce((total, s) => total + s.value, 0);
  };
  // A kind that has not happened yet has no series.
  const byKind = (name: string) => byGcKind((kind) => sum(name, { kind }) || 0);
  return {
    gc: { secondsByKind: byKind('nodejs_gc_duration_seconds_sum'), countByKind: byKind('nodejs_gc_duration_seconds_count') },
    cpuSeconds: sum('process_cpu_seconds_total'),
    taskDurationSecondsSum: sum('headroom_worker_task_duration_seconds_sum'),
    taskCount: sum('headroom_worker_task_duration_seconds_count'),
    eventLoopUtilizationSinceLastScrape: sum('headroom_eventloop_utilization_ratio'),
    heapUsedBytes: sum('nodejs_heap_size_used_bytes'),
    heapLimitBytes: sum('headroom_heap_limit_bytes'),
    newSpaceBytes: sum('nodejs_heap_space_size_total_bytes', { space: 'new' }),
    tasksInFlight: sum('headroom_worker_tasks_in_flight'),
  };
}

export async function scrapeRuntime(metricsUrl: string, timeoutMs: number, signal: AbortSignal): Promise<RuntimeSnapshot> {
  return runtimeSnapshot(await getText(metricsUrl, timeoutMs, signal));
}
