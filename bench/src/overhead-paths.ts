/**
 * The paths the overhead benchmark compares in one run, and what each costs in CPU per task.
 * A path is one entry in `overheadPaths`; its generator side (how a call is made) is the
 * entry of the same name in targetFactories (load/targets.ts).
 */
import type { CpuWindowFigures } from './load/protocol';
import type { TargetName } from './load/targets';

export interface OverheadPath {
  target: TargetName;
  label: string;
  /**
   * The generator pins each lane to one worker (the route picks it), so more lanes than the
   * workers' slots would only be refused: the ceiling caps its lanes there.
   */
  pinnedToWorkers: boolean;
}

/**
 * In the order each repetition runs them; "direct" first, the baseline the others are read against.
 *
 * The proxyless path (issue 15: the generator reserves a slot in the Redis ledger itself and calls
 * the worker) joins when `createProxylessClient` is exported by `@headroom/client/proxyless`:
 * a `proxyless` factory in targetFactories (load/targets.ts) that makes the client from the run's
 * Redis URL and key prefix (two more fields of Targets, filled in overhead.ts where the
 * generator starts) and submits each call through it, and here
 * `{ target: 'proxyless', label: 'proxyless client', pinnedToWorkers: false }`.
 * Its ceiling, latency and CPU rows then appear by themselves, and so do its goals (overhead.ts,
 * `proxylessGoals`): added latency at most HAProxy's, ceiling at least 0.9x direct.
 */
export const overheadPaths: readonly OverheadPath[] = [
  { target: 'direct', label: 'direct to workers', pinnedToWorkers: true },
  { target: 'haproxy', label: 'through HAProxy', pinnedToWorkers: true },
  { target: 'balancer', label: 'through balancer', pinnedToWorkers: false },
];

/** The processes CPU time is reported for, each a group of the benchmark's named processes. */
export const cpuGroups = ['balancer', 'workers', 'generator', 'redis', 'haproxy'] as const;
export type CpuGroup = (typeof cpuGroups)[number];

/** Process names are balancer (balancer-1..), worker-1.., generator, redis, haproxy. */
function groupOf(processName: string): CpuGroup | undefined {
  if (processName === 'balancer' || processName.startsWith('balancer-')) return 'balancer';
  if (processName.startsWith('worker-')) return 'workers';
  return (cpuGroups as readonly string[]).includes(processName) ? (processName as CpuGroup) : undefined;
}

/** A window's CPU time per task and share of a core, by group (workers summed). */
export interface CpuPerTask {
  /** Successful tasks answered within the window. */
  tasks: number;
  windowMs: number;
  /** CPU microseconds per successful task; a group whose processes could not be read is missing. */
  microsPerTask: Partial<Record<CpuGroup, number>>;
  /** Percent of one core over the window (workers summed). */
  percentOfCore: Partial<Record<CpuGroup, number>>;
}

export function cpuPerTask(window: CpuWindowFigures): CpuPerTask {
  const cpuMs: Partial<Record<CpuGroup, number>> = {};
  for (const [name, ms] of Object.entries(window.cpuMsByProcess)) {
    const group = groupOf(name);
    if (group) cpuMs[group] = (cpuMs[group] ?? 0) + ms;
  }
  const microsPerTask: Partial<Record<CpuGroup, number>> = {};
  const percentOfCore: Partial<Record<CpuGroup, number>> = {};
  for (const group of cpuGroups) {
    const ms = cpuMs[group];
    if (ms === undefined) continue;
    if (window.tasks > 0) microsPerTask[group] = (ms * 1000) / window.tasks;
    if (window.windowMs > 0) percentOfCore[group] = (ms / window.windowMs) * 100;
  }
  return { tasks: window.tasks, windowMs: window.windowMs, microsPerTask, percentOfCore };
}
