import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';

/** CPU time (user + system) a process has used so far, from /proc; undefined where /proc is missing. */
export function processCpuMs(pid: number): number | undefined {
  let stat: string;
  try {
    stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return undefined;
  }
  // Fields after the command name, which is in parentheses and may hold spaces: state is field 3,
  // utime field 14, stime field 15 (man 5 proc).
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  const userTicks = Number(fields[11]);
  const systemTicks = Number(fields[12]);
  if (!Number.isFinite(userTicks) || !Number.isFinite(systemTicks)) return undefined;
  return ((userTicks + systemTicks) * 1000) / clockTicksPerSecond();
}

let ticksPerSecond: number | undefined;

function clockTicksPerSecond(): number {
  if (ticksPerSecond === undefined) {
    try {
      ticksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
    } catch {
      ticksPerSecond = 100;
    }
  }
  return ticksPerSecond;
}

/** Share of one core each named process used between start() and the returned stop(), in percent. */
export function sampleCpu(processes: ReadonlyMap<string, number>): () => Record<string, number> {
  const startedAt = performance.now();
  const before = new Map([...processes].map(([name, pid]) => [name, processCpuMs(pid)]));
  return () => {
    const elapsedMs = performance.now() - startedAt;
    const percentOfCore: Record<string, number> = {};
    for (const [name, pid] of processes) {
      const start = before.get(name);
      const end = processCpuMs(pid);
      if (start !== undefined && end !== undefined && elapsedMs > 0) percentOfCore[name] = Math.round(((end - start) / elapsedMs) * 100);
    }
    return percentOfCore;
  };
}

/** Busy and total CPU time of the whole machine so far, in clock ticks, from /proc/stat; undefined where it is missing. */
function machineCpuTicks(): { busy: number; total: number } | undefined {
  let stat: string;
  try {
    stat = fs.readFileSync('/proc/stat', 'utf8');
  } catch {
    return undefined;
  }
  // "cpu  user nice system idle iowait irq softirq steal ...": idle and iowait are the idle time (man 5 proc).
  const ticks = (/^cpu\s+(.*)$/m.exec(stat)?.[1] ?? '').trim().split(/\s+/).slice(0, 8).map(Number);
  if (ticks.length < 8 || !ticks.every(Number.isFinite)) return undefined;
  const total = ticks.reduce((sum, n) => sum + n, 0);
  return { busy: total - ticks[3]! - ticks[4]!, total };
}

/**
 * Share of all the machine's cores that was busy between start() and the returned stop(), in
 * percent of one core (200 = two cores busy): with sampleCpu, shows what other work took.
 */
export function sampleMachineCpu(cores: number): () => number | undefined {
  const before = machineCpuTicks();
  return () => {
    const after = machineCpuTicks();
    if (!before || !after || after.total <= before.total) return undefined;
    return Math.round(((after.busy - before.busy) / (after.total - before.total)) * cores * 100);
  };
}
