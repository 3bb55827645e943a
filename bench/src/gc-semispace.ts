/**
 * gc-semispace: how much of a parallel worker's time goes to garbage collection at two V8
 * semi-space sizes (--max-semi-space-size-mb). One worker (the candidate cluster, max parallelism
 * 30) behind one balancer, each its own process, started afresh for every run; a load generator
 * in another process sends allocation-heavy demo tasks at a fixed rate (open loop). The sizes
 * alternate, run after run; each run reads the worker's /metrics at the start and end of a fixed
 * window (and in between, for heap use and event-loop utilisation), and the totals of every GC
 * pause, which that metric undercounts (see fleet/gc-totals.ts).
 */
import * as os from 'node:os';
import * as path from 'node:path';
import * as v8 from 'node:v8';
import { freePort, sleep } from '@headroom/common';
import { Cleanups } from './fleet/cleanups';
import { sampleCpu, sampleMachineCpu } from './fleet/cpu-usage';
import { gcTotalsPortEnv } from './fleet/gc-totals';
import { benchPlace, startProcessFleet } from './fleet/headroom-fleet';
import { sampleWorkerWindow, workerFigures, type WorkerFigures } from './fleet/worker-window';
import { LoadGenerator } from './load/generator';
import type { PhaseResult } from './load/protocol';
import { startRun, type BenchmarkOptions, type RunHeader } from './report/run-header';
import { failedCalls, spread, type Spread } from './report/stats';

export interface GcSemiSpaceSettings {
  /** The sizes compared, in MiB; the ratios are the first's figures over the second's. Node 20's default is 16 on 64-bit. */
  semiSpaceSizesMb: readonly [number, number];
  maxParallelism: number;
  /** Runs of each size, alternating. */
  repetitions: number;
  load: {
    tasksPerSecond: number;
    integration: string;
    /** Each task builds, parses, reshapes and serialises an upstream answer this large, and holds it while it sleeps. */
    allocateKb: number;
    taskSleepMs: number;
    maxOutstanding: number;
    callTimeoutMs: number;
  };
  /** Load on a fresh worker before the window: JIT and heap settle. */
  leadInMs: number;
  windowMs: number;
  /** Time between scrapes of /metrics within the window. */
  scrapeIntervalMs: number;
  scrapeTimeoutMs: number;
}

export const fullSettings: GcSemiSpaceSettings = {
  // Node 20's default, and four times that.
  semiSpaceSizesMb: [16, 64],
  maxParallelism: 30,
  repetitions: 3,
  // About 60-70% of a core for the worker on this 2-core machine: busy, not saturated.
  load: { tasksPerSecond: 200, integration: 'bank-a', allocateKb: 100, taskSleepMs: 50, maxOutstanding: 1024, callTimeoutMs: 10_000 },
  // Sized so that all of `npm run bench` fits in 15 minutes on this machine: 30 scavenges a window at the larger size.
  leadInMs: 2_000,
  windowMs: 5_000,
  scrapeIntervalMs: 1_000,
  scrapeTimeoutMs: 5_000,
};

/** Seconds in all: proves the benchmark still runs end to end, measures nothing worth reading. */
export const smokeSettings: GcSemiSpaceSettings = {
  ...fullSettings,
  repetitions: 1,
  load: { ...fullSettings.load, tasksPerSecond: 40, allocateKb: 32 },
  leadInMs: 500,
  windowMs: 1_500,
  scrapeIntervalMs: 500,
};

/** One run of one size: the worker's figures over the window, and the load's. */
export interface SemiSpaceRun extends WorkerFigures {
  semiSpaceSizeMb: number;
  repetition: number;
  /** The other processes (Linux /proc), in percent of one core. */
  cpuPercentOfCore: Record<string, number>;
  /** The whole machine, every process (/proc/stat), in percent of one core: the rest is work not ours. */
  machineCpuPercentOfCore: number | null;
  /** From the load generator: latency from when each task was due, through the balancer. */
  load: Pick<PhaseResult, 'calls' | 'succeeded' | 'errorsByCode' | 'dropped' | 'tasksPerSecond' | 'latency' | 'sendLag'>;
}

/** What the summary compares across sizes: one figure of a run each. */
const comparedFigures = {
  gcPercentOfWall: (r: SemiSpaceRun) => r.gcPercentOfWall,
  gcPercentOfWallByMetric: (r: SemiSpaceRun) => r.gcPercentOfWallByMetric,
  scavengePercentOfWall: (r: SemiSpaceRun) => r.gcPercentOfWallByKind.minor,
  /** Mark-sweep-compact pauses and the incremental marking steps that lead up to them. */
  markSweepPercentOfWall: (r: SemiSpaceRun) => r.gcPercentOfWallByKind.major + r.gcPercentOfWallByKind.incremental,
  scavengesPerSecond: (r: SemiSpaceRun) => r.scavengesPerSecond,
  markSweepsPerSecond: (r: SemiSpaceRun) => r.markSweepsPerSecond,
  gcPausesMissedByMetricPercent: (r: SemiSpaceRun) => r.gcPausesMissedByMetricPercent,
  eventLoopUtilizationPercent: (r: SemiSpaceRun) => r.eventLoopUtilizationPercent,
  workerCpuPercentOfCore: (r: SemiSpaceRun) => r.workerCpuPercentOfCore,
  handlerMeanMs: (r: SemiSpaceRun) => r.handlerMeanMs,
  p50Ms: (r: SemiSpaceRun) => r.load.latency.p50Ms,
  p99Ms: (r: SemiSpaceRun) => r.load.latency.p99Ms,
  tasksPerSecond: (r: SemiSpaceRun) => r.load.tasksPerSecond,
  heapUsedMeanMiB: (r: SemiSpaceRun) => r.heapUsedMeanMiB,
  heapUsedMaxMiB: (r: SemiSpaceRun) => r.heapUsedMaxMiB,
};
export type ComparedFigure = keyof typeof comparedFigures;

export interface SemiSpaceSummary {
  semiSpaceSizeMb: number;
  /** Median and range over the repetitions. */
  figures: Record<ComparedFigure, Spread>;
  heapLimitMiB: number;
  newSpaceMaxMiB: number;
  /** Failed and dropped tasks, all repetitions. */
  failedTasks: number;
}

export interface GcSemiSpaceResult extends RunHeader<'gc-semispace', GcSemiSpaceSettings> {
  /** V8's heap limit in this process, started without heap flags: a worker at Node's default semi-space has the same. */
  nodeDefaultHeapLimitMiB: number;
  /** In the order they ran. */
  runs: SemiSpaceRun[];
  summaries: [SemiSpaceSummary, SemiSpaceSummary];
  /** The first size's median over the second's, per figure; null where the second's is 0. */
  ratios: Record<ComparedFigure, number | null>;
}

export type GcSemiSpaceOptions = BenchmarkOptions;

const gcObservingHandlers = path.join(__dirname, 'fleet', 'gc-observing-handlers.js');
const mib = (bytes: number) => bytes / 1024 / 1024;
export const failedTasks = (load: SemiSpaceRun['load']) => failedCalls(load);

function summarise(semiSpaceSizeMb: number, runs: readonly SemiSpaceRun[]): SemiSpaceSummary {
  const figures = Object.fromEntries(Object.entries(comparedFigures).map(([name, pick]) => [name, spread(runs.map(pick))])) as Record<ComparedFigure, Spread>;
  return {
    semiSpaceSizeMb,
    figures,
    heapLimitMiB: spread(runs.map((r) => r.heapLimitMiB)).median,
    newSpaceMaxMiB: Math.max(...runs.map((r) => r.newSpaceMaxMiB)),
    failedTasks: runs.reduce((sum, r) => sum + failedTasks(r.load), 0),
  };
}

export async function runGcSemiSpace(options: GcSemiSpaceOptions): Promise<GcSemiSpaceResult> {
  const settings = options.smoke ? smokeSettings : fullSettings;
  const run = await startRun('gc-semispace', options, settings);
  const { progress, signal } = options;
  const { load } = settings;

  /** One run: a fresh balancer and worker at `semiSpaceSizeMb`, the load, the window, and everything stopped again. */
  const measure = async (semiSpaceSizeMb: number, repetition: number): Promise<SemiSpaceRun> => {
    const { keyPrefix, logDir } = benchPlace('gc-semispace');
    const cleanups = new Cleanups();
    try {
      const gcTotalsPort = await freePort();
      const fleet = await startProcessFleet(
        keyPrefix,
        {
          redisUrl: options.redisUrl,
          workers: [{ cluster: 'candidate', count: 1, maxParallelismPerWorker: settings.maxParallelism }],
          handlersPath: gcObservingHandlers,
          workerEnv: { [gcTotalsPortEnv]: String(gcTotalsPort) },
          workerArgs: ['--metrics-port', '0', '--max-semi-space-size-mb', String(semiSpaceSizeMb)],
          balancerArgs: ['--candidate-percent', '100'],
          logDir,
        },
        cleanups.register,
      );
      const metricsUrl = fleet.workers[0]?.metricsUrl;
      if (!metricsUrl) throw new Error(`the worker did not say where it serves /metrics (logs in ${logDir})`);
      signal.throwIfAborted();
      const generator = await LoadGenerator.start({
        balancerAddresses: fleet.balancers.map((b) => b.address),
        workers: [],
        task: { integration: load.integration, payload: JSON.stringify({ sleepMs: load.taskSleepMs, allocateKb: load.allocateKb }) },
        callTimeoutMs: load.callTimeoutMs,
      });
      cleanups.register(() => generator.close());
      const pids = new Map([...fleet.pids].filter(([name]) => !name.startsWith('worker-')));
      pids.set('generator', generator.pid);
      if (run.redisPid !== undefined) pids.set('redis', run.redisPid);

      const phase = generator.run(
        {
          kind: 'open',
          target: 'balancer',
          tasksPerSecond: load.tasksPerSecond,
          warmupMs: settings.leadInMs,
          durationMs: settings.windowMs,
          maxOutstanding: load.maxOutstanding,
        },
        signal,
      );
      // Its failure is reported where it is awaited, below.
      phase.catch(() => undefined);
      await sleep(settings.leadInMs, signal);
      const cpu = sampleCpu(pids);
      const machineCpu = sampleMachineCpu(run.header().machine.nproc);
      const samples = await sampleWorkerWindow({
        metricsUrl,
        gcTotalsPort,
        windowMs: settings.windowMs,
        scrapeIntervalMs: settings.scrapeIntervalMs,
        scrapeTimeoutMs: settings.scrapeTimeoutMs,
        signal,
      });
      const cpuPercentOfCore = cpu();
      const machineCpuPercentOfCore = machineCpu() ?? null;
      const result = await phase;
      return {
        semiSpaceSizeMb,
        repetition,
        ...workerFigures(samples),
        cpuPercentOfCore,
        machineCpuPercentOfCore,
        load: {
          calls: result.calls,
          succeeded: result.succeeded,
          errorsByCode: result.errorsByCode,
          dropped: result.dropped,
          tasksPerSecond: result.tasksPerSecond,
          latency: result.latency,
          sendLag: result.sendLag,
        },
      };
    } finally {
      await cleanups.runAll();
    }
  };

  progress(
    `${settings.repetitions} runs each of semi-space ${settings.semiSpaceSizesMb.join(' and ')} MiB, alternating; ${load.tasksPerSecond} tasks/s of ${load.allocateKb} KiB and ${load.taskSleepMs} ms each, ` +
      `${settings.leadInMs} ms lead-in, ${settings.windowMs} ms window (logs in ${path.join(os.tmpdir(), 'headroom-bench')})`,
  );
  const runs: SemiSpaceRun[] = [];
  for (let repetition = 1; repetition <= settings.repetitions; repetition++) {
    for (const semiSpaceSizeMb of settings.semiSpaceSizesMb) {
      const r = await measure(semiSpaceSizeMb, repetition);
      runs.push(r);
      progress(
        `#${repetition} semi-space ${String(semiSpaceSizeMb).padStart(3)} MiB: GC ${r.gcPercentOfWall.toFixed(1)}% of wall (scavenge ${r.gcPercentOfWallByKind.minor.toFixed(1)}%, ` +
          `${r.scavengesPerSecond.toFixed(0)}/s), ELU ${r.eventLoopUtilizationPercent.toFixed(0)}%, worker CPU ${r.workerCpuPercentOfCore.toFixed(0)}%, ` +
          `p50 ${r.load.latency.p50Ms.toFixed(1)} ms, p99 ${r.load.latency.p99Ms.toFixed(1)} ms, ${r.load.tasksPerSecond.toFixed(0)} tasks/s, failed ${failedTasks(r.load)}`,
      );
    }
  }

  const [first, second] = settings.semiSpaceSizesMb.map((size) =>
    summarise(
      size,
      runs.filter((r) => r.semiSpaceSizeMb === size),
    ),
  ) as [SemiSpaceSummary, SemiSpaceSummary];
  const ratio = (name: ComparedFigure) => (second.figures[name].median === 0 ? null : first.figures[name].median / second.figures[name].median);
  const ratios = Object.fromEntries((Object.keys(comparedFigures) as ComparedFigure[]).map((name) => [name, ratio(name)])) as Record<
    ComparedFigure,
    number | null
  >;
  return { ...run.header(), nodeDefaultHeapLimitMiB: mib(v8.getHeapStatistics().heap_size_limit), runs, summaries: [first, second], ratios };
}
