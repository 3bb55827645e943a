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
