/**
 * The CPU time of the benchmark's processes over a phase's measured window, read by the load
 * generator itself at the window's two edges, so that CPU time and the tasks it is divided by
 * cover the same stretch (the parent only knows when a whole phase, warm-up included, ran).
 */
import { performance } from 'node:perf_hooks';
import { processCpuMs } from '../fleet/cpu-usage';
import type { CpuWindowFigures } from './protocol';

type Reading = { atMs: number; cpuMs: Map<string, number | undefined> };

export class CpuWindow {
  private start: Reading | undefined;
  private end: Reading | undefined;
  private tasks = 0;

  constructor(private readonly pids: Readonly<Record<string, number>>) {}

  private read(): Reading {
    return { atMs: performance.now(), cpuMs: new Map(Object.entries(this.pids).map(([name, pid]) => [name, processCpuMs(pid)])) };
  }

  /** The window opens (once). */
  open(): void {
    this.start ??= this.read();
  }

  /** The window closes (once, and only after it opened). */
  close(): void {
    if (this.start) this.end ??= this.read();
  }

  /** A call answered with a result: counted while the window is open. */
  taskDone(): void {
    if (this.start && !this.end) this.tasks++;
  }

  figures(): CpuWindowFigures | undefined {
    const { start, end } = this;
    if (!start || !end || Object.keys(this.pids).length === 0) return undefined;
    const cpuMsByProcess: Record<string, number> = {};
    for (const [name, before] of start.cpuMs) {
      const after = end.cpuMs.get(name);
      if (before !== undefined && after !== undefined) cpuMsByProcess[name] = after - before;
    }
    return { windowMs: end.atMs - start.atMs, tasks: this.tasks, cpuMsByProcess };
  }
}
