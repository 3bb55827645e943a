/** The paths the overhead benchmark compares in one run, and what each costs in CPU per task. */
import type { CpuWindowFigures, TargetName } from './load/protocol';

export interface OverheadPath {
  target: TargetName;
  label: string;
  /**
   * The generator spreads each lane's calls over the workers itself and nothing queues them, so
   * more lanes than the workers' slots would only be refused: the ceiling caps its lanes there.
   * The other paths queue what finds no slot (the balancer and the proxyless client in their
   * queue, HAProxy under each server's maxconn).
   */
  lanesCappedAtSlots: boolean;
}

/**
 * In the order each repetition runs them; "direct" first, the baseline the others are read against.
 * A path's generator side (how a call is made) is the entry of the same name in targetFactories
 * (load/targets.ts); its ceiling, latency and CPU rows then appear by themselves. Its goals are
 * judged in overhead.ts (`goals`, `proxylessGoals`).
 *
 * On the proxyless path the routing work runs in the generator (load/proxyless-target.ts): its
 * "generator" CPU per task is the caller's, the client's ledger work included.
 */
export const overheadPaths: readonly OverheadPath[] = [
  { target: 'direct', label: 'direct to workers', lanesCappedAtSlots: true },
  { target: 'haproxy', label: 'through HAProxy (leastconn)', lanesCappedAtSlots: false },
  { target: 'balancer', label: 'through balancer', lanesCappedAtSlots: false },
  { target: 'proxyless', label: 'proxyless client', lanesCappedAtSlots: false },
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
