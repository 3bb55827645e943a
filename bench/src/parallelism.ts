/**
 * parallelism: the published result. A worker running the bank handlers (sim/src/handlers/bank.ts)
 * against the simulated bank upstream (sim/src/bank), each its own process, at max parallelism
 * 1, 5, 10, 20, 30 and 50: one worker per level, all started once. A load generator per worker
 * keeps exactly N tasks in flight on it (closed loop, straight to Worker.Execute: the balancer is
 * not what is measured), with the demo's mix of banks; one level runs at a time, the levels
 * alternating run after run. Throughput is compared with N=1 of the same repetition, latency per
 * integration with N=1's tasks of all repetitions.
 */
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { freePort, sleep } from '@headroom/common';
import { bankHandlersPath, bankUrlEnv, startBankSimulator } from './fleet/bank-simulator';
import { Cleanups } from './fleet/cleanups';
import { sampleCpu, sampleMachineCpu } from './fleet/cpu-usage';
import { gcTotalsPortEnv, innerHandlersEnv } from './fleet/gc-totals';
import { benchPlace, startProcessFleet } from './fleet/headroom-fleet';
import { scrapeRuntime } from './fleet/runtime-metrics';
import { sampleWorkerWindow, workerFigures, type WorkerFigures } from './fleet/worker-window';
import { LoadGenerator } from './load/generator';
import type { IntegrationFigures, PhaseResult } from './load/protocol';
import type { Goal } from './report/goals';
import type { LatencySummary } from './report/histogram';
import { startRun, type BenchmarkOptions, type RunHeader } from './report/run-header';
import { failedCalls, figures, spread, type Spread } from './report/stats';

export interface ParallelismSettings {
  /** Max parallelism of the worker, one level per run; the first is the reference (1). */
  levels: readonly number[];
  /** Runs of each level; the levels alternate. */
  repetitions: number;
  /** Multiplies every latency of the simulated banks (see bankTimeScaleWhy). */
  bankTimeScale: number;
  bankSeed: number;
  /** The demo's banks and weights (demo/src/workload.ts): most tasks go to the fast banks. */
  integrationMix: readonly { name: string; weight: number }[];
  /** Load on a fresh worker before the window: JIT, connections and heap settle. */
  leadInMs: number;
  /** The measured window of a level above 1. */
  windowMs: number;
  /** The measured window at the reference level: it completes few tasks, and every ratio divides by its figures. */
  referenceWindowMs: number;
  callTimeoutMs: number;
  /** After a window, longest wait for the worker's last tasks to end. */
  drainTimeoutMs: number;
  scrapeIntervalMs: number;
  scrapeTimeoutMs: number;
}

/** Why the time scale: the figure of the settings a reader asks about first. */
export const bankTimeScaleWhy =
  'with this mix a task (one account: the account, its first page, then its other pages at once) waits about 1.3 s on the banks at time scale 1, ' +
  'and costs about 10 ms of worker CPU and as much again in the bank simulator; at 0.5 (about 0.65 s a task) N=30 stays within what this 2-core machine can serve, ' +
  'while N=1 still completes a few dozen tasks in its window';

export const fullSettings: ParallelismSettings = {
  levels: [1, 5, 10, 20, 30, 50],
  repetitions: 3,
  bankTimeScale: 0.5,
  bankSeed: 7,
  integrationMix: [
    { name: 'bank-a', weight: 3 },
    { name: 'bank-b', weight: 2 },
    { name: 'bank-c', weight: 1 },
    { name: 'bank-d', weight: 1 },
  ],
  leadInMs: 1_000,
  windowMs: 3_000,
  referenceWindowMs: 20_000,
  callTimeoutMs: 30_000,
  // The banks' slowest answers take seconds: a few tasks may outlive this, the rest have ended.
  drainTimeoutMs: 3_000,
  scrapeIntervalMs: 1_000,
  scrapeTimeoutMs: 5_000,
};

/** Seconds in all: proves the benchmark still runs end to end, measures nothing worth reading. */
export const smokeSettings: ParallelismSettings = {
  ...fullSettings,
  levels: [1, 5],
  repetitions: 1,
  bankTimeScale: 0.02,
  leadInMs: 500,
  windowMs: 1_500,
  referenceWindowMs: 1_500,
  scrapeIntervalMs: 500,
};

export const goals = { parallelism: 30, throughputRatio: 25, p50Ratio: 1.1 } as const;
/**
 * An integration's p50 ratio is judged only when the reference level completed at least this
 * many of its tasks: with fewer, sampling alone moves a median by more than the 10% tested
 * (for these banks' spreads, about 1.25 x sigma / sqrt(n)).
 */
export const minReferenceTasksToJudge = 30;

/** One run: one level on a fresh worker. */
export interface ParallelismRun extends WorkerFigures {
  maxParallelism: number;
  repetition: number;
  tasksPerSecond: number;
  latency: LatencySummary;
  byIntegration: Record<string, IntegrationFigures>;
  errorsByCode: Record<string, number>;
  /** The bank simulator, the generator and Redis (Linux /proc), in percent of one core. */
  cpuPercentOfCore: Record<string, number>;
  /** Every process of the machine (/proc/stat), in percent of one core. */
  machineCpuPercentOfCore: number | null;
}

/** Latency of a level's successful tasks, all repetitions pooled, and against the reference level's, pooled too. */
export interface PooledLatency {
  tasks: number;
  p50Ms: number;
  p99Ms: number;
  p50Ratio: number;
  p99Ratio: number;
  /** The same ratio taken within each repetition: how much it moves from run to run. */
  p50RatioByRepetition: Spread;
}

export interface LevelSummary {
  maxParallelism: number;
  /** Median and range over the repetitions; each ratio taken against the reference level of the same repetition. */
  tasksPerSecond: Spread;
  throughputRatio: Spread;
  /** All integrations together (the same fixed mix at every level). */
  all: PooledLatency;
  byIntegration: Record<string, PooledLatency & { judged: boolean }>;
  gcPercentOfWall: Spread;
  eventLoopUtilizationPercent: Spread;
  workerCpuPercentOfCore: Spread;
  heapUsedMaxMiB: Spread;
  /** Tasks that failed (mostly the banks' own error rates), all repetitions. */
  failedTasks: number;
}

export interface ParallelismResult extends RunHeader<'parallelism', ParallelismSettings> {
  bankTimeScaleWhy: string;
  runs: ParallelismRun[];
  levels: LevelSummary[];
  goals: Goal[];
}

export type ParallelismOptions = BenchmarkOptions;

const gcObservingHandlers = path.join(__dirname, 'fleet', 'gc-observing-handlers.js');

export async function runParallelism(options: ParallelismOptions): Promise<ParallelismResult> {
  const settings = options.smoke ? smokeSettings : fullSettings;
  const run = await startRun('parallelism', options, settings);
  const { progress, signal } = options;
  const cleanups = new Cleanups();
  try {
    const bank = await startBankSimulator({ timeScale: settings.bankTimeScale, seed: settings.bankSeed, logDir: benchPlace('bank-sim').logDir });
    cleanups.register(() => bank.stop());
    const latenciesByRun = new Map<string, number[]>();
    progress(
      `bank simulator at ${bank.url} (time scale ${settings.bankTimeScale}); levels ${settings.levels.join(', ')}, ${settings.repetitions} repetitions, alternating`,
    );

    // One worker per level, each its own process with its own GC counter, and one load generator
    // for each: started once, so that a run costs only its own load (the levels alternate between them).
    const { keyPrefix, logDir } = benchPlace('parallelism');
    const gcTotalsPorts = await Promise.all(settings.levels.map(() => freePort()));
    const fleet = await startProcessFleet(
      keyPrefix,
      {
        redisUrl: options.redisUrl,
        workers: settings.levels.map((level, i) => ({
          cluster: 'candidate',
          count: 1,
          maxParallelismPerWorker: level,
          env: { [gcTotalsPortEnv]: String(gcTotalsPorts[i]), [innerHandlersEnv]: bankHandlersPath, [bankUrlEnv]: bank.url },
        })),
        balancerCount: 0,
        handlersPath: gcObservingHandlers,
        workerArgs: ['--metrics-port', '0'],
        logDir,
      },
      cleanups.register,
    );
    const generators: LoadGenerator[] = [];
    for (const worker of fleet.workers) {
      const generator = await LoadGenerator.start({
        balancerAddresses: [],
        workers: [{ address: worker.address, cluster: worker.cluster, workerId: worker.workerId }],
        task: { integration: settings.integrationMix[0]!.name, payload: '', integrationMix: settings.integrationMix },
        callTimeoutMs: settings.callTimeoutMs,
      });
      cleanups.register(() => generator.close());
      generators.push(generator);
      signal.throwIfAborted();
    }
    progress(`${fleet.workers.length} workers and load generators started (key prefix ${keyPrefix}, logs in ${logDir})`);

    /** One run: N tasks kept in flight on the worker of level N, the window read from its metrics. */
    const measure = async (level: number, repetition: number): Promise<ParallelismRun> => {
      const index = settings.levels.indexOf(level);
      const worker = fleet.workers[index]!;
      const generator = generators[index]!;
      if (!worker.metricsUrl) throw new Error(`the worker did not say where it serves /metrics (logs in ${logDir})`);
      const gcTotalsPort = gcTotalsPorts[index]!;
      const pids = new Map([
        ['bank-sim', bank.pid],
        ['generator', generator.pid],
      ]);
      if (run.redisPid !== undefined) pids.set('redis', run.redisPid);

      const windowMs = level === settings.levels[0] ? settings.referenceWindowMs : settings.windowMs;
      // A bound on calls whatever the time: far more than N lanes can make of tasks of 10+ ms.
      const maxCalls = Math.ceil(((settings.leadInMs + windowMs) / 1000) * 20_000);
      const phase = generator.run(
        { kind: 'closed', target: 'direct', concurrency: level, warmupMs: settings.leadInMs, durationMs: windowMs, maxCalls, keepLatencies: true },
        signal,
      );
      // Its failure is reported where it is awaited, below.
      phase.catch(() => undefined);
      await sleep(settings.leadInMs, signal);
      const cpu = sampleCpu(pids);
      const machineCpu = sampleMachineCpu(run.header().machine.nproc);
      const samples = await sampleWorkerWindow({
        metricsUrl: worker.metricsUrl,
        gcTotalsPort,
        windowMs,
        scrapeIntervalMs: settings.scrapeIntervalMs,
        scrapeTimeoutMs: settings.scrapeTimeoutMs,
        signal,
      });
      const cpuPercentOfCore = cpu();
      const machineCpuPercentOfCore = machineCpu() ?? null;
      const result: PhaseResult = await phase;
      // The window's last tasks are still running: let them end before the next level starts, so
      // that they do not load the machine under its measurement (bounded: the banks' slowest answers).
      const drainUntil = performance.now() + settings.drainTimeoutMs;
      while ((await scrapeRuntime(worker.metricsUrl, settings.scrapeTimeoutMs, signal)).tasksInFlight > 0 && performance.now() < drainUntil)
        await sleep(100, signal);
      // Kept apart from the record: the JSON holds the summaries, not every task.
      const byIntegration: Record<string, IntegrationFigures> = {};
      for (const [name, { latenciesMs = [], ...figures }] of Object.entries(result.byIntegration)) {
        byIntegration[name] = figures;
        latenciesByRun.set(`${repetition} ${level} ${name}`, latenciesMs);
      }
      return {
        maxParallelism: level,
        repetition,
        ...workerFigures(samples),
        tasksPerSecond: result.tasksPerSecond,
        latency: result.latency,
        byIntegration,
        errorsByCode: result.errorsByCode,
        cpuPercentOfCore,
        machineCpuPercentOfCore,
      };
    };

    const runs: ParallelismRun[] = [];
    for (let repetition = 1; repetition <= settings.repetitions; repetition++) {
      for (const level of settings.levels) {
        const r = await measure(level, repetition);
        runs.push(r);
        progress(
          `#${repetition} N=${String(level).padStart(2)}: ${r.tasksPerSecond.toFixed(1)} tasks/s, p50 ${r.latency.p50Ms.toFixed(0)} ms, p99 ${r.latency.p99Ms.toFixed(0)} ms, ` +
            `GC ${r.gcPercentOfWall.toFixed(1)}%, ELU ${r.eventLoopUtilizationPercent.toFixed(0)}%, worker CPU ${r.workerCpuPercentOfCore.toFixed(0)}%, failed ${failedCalls(r)}`,
        );
      }
    }
    const latencies = (level: number, repetitions: readonly number[], integrations: readonly string[]) =>
      repetitions.flatMap((repetition) => integrations.flatMap((name) => latenciesByRun.get(`${repetition} ${level} ${name}`) ?? []));
    const levels = settings.levels.map((level) => summariseLevel(level, runs, settings, latencies));
    return { ...run.header(), bankTimeScaleWhy, runs, levels, goals: judge(levels) };
  } finally {
    await cleanups.runAll();
  }
}

type LatenciesOf = (level: number, repetitions: readonly number[], integrations: readonly string[]) => number[];

/** A level's figures over the repetitions: ratios of rates within a repetition, latencies pooled over all of them. */
function summariseLevel(level: number, runs: readonly ParallelismRun[], settings: ParallelismSettings, latenciesOf: LatenciesOf): LevelSummary {
  const reference = settings.levels[0]!;
  const pairs = runs
    .filter((r) => r.maxParallelism === level)
    .map((r) => ({ r, ref: runs.find((candidate) => candidate.maxParallelism === reference && candidate.repetition === r.repetition)! }));
  const of = (pick: (r: ParallelismRun, ref: ParallelismRun) => number) => spread(pairs.map(({ r, ref }) => pick(r, ref)).filter(Number.isFinite));
  const repetitions = pairs.map(({ r }) => r.repetition);
  const pooled = (integrations: readonly string[]): PooledLatency => {
    const mine = figures(latenciesOf(level, repetitions, integrations));
    const theirs = figures(latenciesOf(reference, repetitions, integrations));
    const p50ByRepetition = repetitions.map(
      (repetition) => figures(latenciesOf(level, [repetition], integrations)).medianMs / figures(latenciesOf(reference, [repetition], integrations)).medianMs,
    );
    return {
      tasks: mine.count,
      p50Ms: mine.medianMs,
      p99Ms: mine.p99Ms,
      p50Ratio: mine.medianMs / theirs.medianMs,
      p99Ratio: mine.p99Ms / theirs.p99Ms,
      p50RatioByRepetition: spread(p50ByRepetition.filter(Number.isFinite)),
    };
  };
  const names = settings.integrationMix.map((entry) => entry.name);
  const referenceTasks = (name: string) => latenciesOf(reference, repetitions, [name]).length;
  return {
    maxParallelism: level,
    tasksPerSecond: of((r) => r.tasksPerSecond),
    throughputRatio: of((r, ref) => r.tasksPerSecond / ref.tasksPerSecond),
    all: pooled(names),
    byIntegration: Object.fromEntries(names.map((name) => [name, { ...pooled([name]), judged: referenceTasks(name) >= minReferenceTasksToJudge }])),
    gcPercentOfWall: of((r) => r.gcPercentOfWall),
    eventLoopUtilizationPercent: of((r) => r.eventLoopUtilizationPercent),
    workerCpuPercentOfCore: of((r) => r.workerCpuPercentOfCore),
    heapUsedMaxMiB: of((r) => r.heapUsedMaxMiB),
    failedTasks: pairs.reduce((sum, { r }) => sum + failedCalls(r), 0),
  };
}

function judge(levels: readonly LevelSummary[]): Goal[] {
  const level = levels.find((l) => l.maxParallelism === goals.parallelism);
  if (!level) return [];
  // Every integration judged must hold: the worst one is the figure.
  const judged = Object.entries(level.byIntegration).filter(([, latency]) => latency.judged);
  const worst = judged.reduce<[string, PooledLatency] | undefined>(
    (found, entry) => (found === undefined || entry[1].p50Ratio > found[1].p50Ratio ? entry : found),
    undefined,
  );
  return [
    {
      name: `throughput at N=${goals.parallelism} over N=1`,
      target: `>= ${goals.throughputRatio}x`,
      measured: level.throughputRatio.median,
      digits: 1,
      met: level.throughputRatio.median >= goals.throughputRatio,
    },
    {
      name: `p50 latency N=${goals.parallelism} over N=1, worst of ${judged.map(([name]) => name).join(', ') || 'none'} (integrations with >= ${minReferenceTasksToJudge} tasks at N=1): ${worst?.[0] ?? '?'}`,
      target: `<= ${goals.p50Ratio}x`,
      measured: worst?.[1].p50Ratio ?? Number.NaN,
      digits: 2,
      met: worst !== undefined && worst[1].p50Ratio <= goals.p50Ratio,
    },
  ];
}
