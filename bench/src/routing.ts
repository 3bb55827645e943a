/**
 * routing: how well each slot policy places tasks on a fleet whose workers are not alike.
 * 8 workers (6 fast, 2 slow with a heavy tail), each its own process, serve 3 balancers per
 * policy (least-loaded = the ledger's choice, round-robin, random, power-of-two with each
 * balancer's own in-flight counts), all started once. One load generator process per policy
 * spreads open-loop load over that policy's 3 balancers. The policies alternate within each
 * utilisation, their order rotating from one repetition to the next; the ledger's view of every
 * worker's in-flight tasks is sampled through each window.
 */
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { sleep } from '@headroom/common';
import { Ledger } from '@headroom/fleet';
import { Cleanups } from './fleet/cleanups';
import { sampleCpu } from './fleet/cpu-usage';
import { benchPlace, startProcessFleet, type ProcessFleet, type WorkerEndpoint } from './fleet/headroom-fleet';
import { scrapeRuntime } from './fleet/runtime-metrics';
import { sleepHandlersEnv } from './fleet/sleep-handlers';
import { LoadGenerator, measureCarriedTasksPerSecond } from './load/generator';
import type { PhaseResult } from './load/protocol';
import type { Goal } from './report/goals';
import type { LatencySummary } from './report/histogram';
import { startRun, type BenchmarkOptions, type RunHeader } from './report/run-header';
import { failedCalls, figures, spread, type Figures, type Spread } from './report/stats';

export const policies = ['least-loaded', 'round-robin', 'random', 'power-of-two'] as const;
export type Policy = (typeof policies)[number];

/** How long a worker's tasks wait (log-normal, drawn in the worker: see fleet/sleep-handlers.ts). */
export interface SleepProfile {
  medianMs: number;
  sigma: number;
  maxMs: number;
}

export interface RoutingSettings {
  fastWorkers: { count: number; sleep: SleepProfile };
  slowWorkers: { count: number; sleep: SleepProfile };
  maxParallelismPerWorker: number;
  balancersPerPolicy: number;
  /** Shares of the fleet's measured capacity offered as load. */
  utilisations: readonly number[];
  /** The capacity is measured first (measureCarriedTasksPerSecond), through the least-loaded balancers, with this many times the fleet's slots in flight. */
  capacityProbe: { slotsMultiple: number; warmupMs: number; durationMs: number };
  repetitions: number;
  /** Load before each window: the previous policy's slow tasks end and the new one settles. */
  leadInMs: number;
  windowMs: number;
  /** How often the ledger's in-flight counts are read during a window. */
  inflightSampleIntervalMs: number;
  callTimeoutMs: number;
  maxOutstanding: number;
}

export const fullSettings: RoutingSettings = {
  fastWorkers: { count: 6, sleep: { medianMs: 100, sigma: 0.3, maxMs: 2_000 } },
  // Four times slower at the median, and a heavy tail: a worker on a degraded host or behind a slow upstream.
  slowWorkers: { count: 2, sleep: { medianMs: 400, sigma: 1.0, maxMs: 4_000 } },
  maxParallelismPerWorker: 4,
  balancersPerPolicy: 3,
  utilisations: [0.7, 0.9],
  repetitions: 3,
  capacityProbe: { slotsMultiple: 2, warmupMs: 1_000, durationMs: 3_000 },
  leadInMs: 1_000,
  windowMs: 3_500,
  inflightSampleIntervalMs: 100,
  callTimeoutMs: 20_000,
  maxOutstanding: 4_096,
};

/** Seconds in all: proves the benchmark still runs end to end, measures nothing worth reading. */
export const smokeSettings: RoutingSettings = {
  ...fullSettings,
  fastWorkers: { count: 2, sleep: { medianMs: 50, sigma: 0.3, maxMs: 500 } },
  slowWorkers: { count: 1, sleep: { medianMs: 200, sigma: 1.0, maxMs: 1_000 } },
  balancersPerPolicy: 1,
  utilisations: [0.7],
  repetitions: 1,
  capacityProbe: { slotsMultiple: 2, warmupMs: 200, durationMs: 600 },
  leadInMs: 200,
  windowMs: 600,
};

export const goals = { p99RatioRoundRobinOverLeastLoadedAt90: 2 } as const;

/** Tasks a second the fleet completes at most: each worker's slots over its tasks' mean time (a log-normal's mean is median x e^(sigma^2 / 2)). */
export function fleetCapacityTasksPerSecond(settings: RoutingSettings): number {
  const perWorker = (sleep: SleepProfile) => settings.maxParallelismPerWorker / ((sleep.medianMs * Math.exp((sleep.sigma * sleep.sigma) / 2)) / 1000);
  return settings.fastWorkers.count * perWorker(settings.fastWorkers.sleep) + settings.slowWorkers.count * perWorker(settings.slowWorkers.sleep);
}

/** The ledger's in-flight counts over a window. */
export interface InflightFigures {
  /** Time-averaged in-flight tasks per worker, by worker name. */
  meanByWorker: Record<string, number>;
  meanFast: number;
  meanSlow: number;
  /** Max minus min in-flight across the workers at the same moment, averaged over the samples. */
  meanSpread: number;
  samples: number;
}

export interface RoutingWindow {
  policy: Policy;
  utilisation: number;
  repetition: number;
  tasksPerSecond: number;
  latency: LatencySummary;
  errorsByCode: Record<string, number>;
  dropped: number;
  /** Share of the window's tasks that ran on the slow workers (their own task counts). */
  slowWorkerTaskShare: number;
  inflight: InflightFigures;
  /** Balancers of this policy, the generator, the workers, Redis (Linux /proc), in percent of one core. */
  cpuPercentOfCore: Record<string, number>;
}

export interface PolicySummary {
  policy: Policy;
  utilisation: number;
  offeredTasksPerSecond: number;
  /** Every repetition's tasks pooled (a window's p99 rests on a handful of tasks). */
  tasks: number;
  pooledP50Ms: number;
  pooledP99Ms: number;
  /** This policy's pooled p99 over least-loaded's. */
  pooledP99OverLeastLoaded: number;
  /** Per window, median and range over the repetitions. */
  p50Ms: Spread;
  p99Ms: Spread;
  /** This policy's p99 over least-loaded's, per repetition. */
  p99OverLeastLoaded: Spread;
  slowWorkerTaskShare: Spread;
  meanInflightFast: Spread;
  meanInflightSlow: Spread;
  inflightSpread: Spread;
  failedTasks: number;
}

export interface RoutingResult extends RunHeader<'routing', RoutingSettings> {
  /** Slots over tasks' mean time, on paper. */
  nominalCapacityTasksPerSecond: number;
  /** As measured, the load's reference. */
  capacityTasksPerSecond: number;
  windows: RoutingWindow[];
  summaries: PolicySummary[];
  goals: Goal[];
}

export type RoutingOptions = BenchmarkOptions;

const sleepHandlers = path.join(__dirname, 'fleet', 'sleep-handlers.js');
const cluster = 'baseline';

export async function runRouting(options: RoutingOptions): Promise<RoutingResult> {
  const settings = options.smoke ? smokeSettings : fullSettings;
  const run = await startRun('routing', options, settings);
  const { progress, signal } = options;
  const { keyPrefix, logDir } = benchPlace('routing');
  const cleanups = new Cleanups();
  const nominalCapacity = fleetCapacityTasksPerSecond(settings);
  try {
    progress(`starting ${settings.fastWorkers.count} fast and ${settings.slowWorkers.count} slow workers, ${settings.balancersPerPolicy} balancers per policy (key prefix ${keyPrefix}, logs in ${logDir})`);
    const group = (count: number, sleep: SleepProfile) => ({ cluster, count, maxParallelismPerWorker: settings.maxParallelismPerWorker, env: sleepHandlersEnv(sleep) });
    const workerFleet = await startProcessFleet(
      keyPrefix,
      {
        redisUrl: options.redisUrl,
        workers: [group(settings.fastWorkers.count, settings.fastWorkers.sleep), group(settings.slowWorkers.count, settings.slowWorkers.sleep)],
        balancerCount: 0,
        handlersPath: sleepHandlers,
        workerArgs: ['--metrics-port', '0'],
        logDir,
      },
      cleanups.register,
    );
    // Workers are named worker-1.. in the order of the groups: the fast ones first.
    const slowNames = new Set(workerFleet.workers.slice(settings.fastWorkers.count).map((w) => w.name));
    const balancerFleets = new Map<Policy, ProcessFleet>();
    const generators = new Map<Policy, LoadGenerator>();
    const startPolicy = async (policy: Policy) => {
      const fleet = await startProcessFleet(
        keyPrefix,
        { redisUrl: options.redisUrl, workers: [], balancerCount: settings.balancersPerPolicy, balancerNamePrefix: policy, balancerArgs: ['--policy', policy], logDir },
        cleanups.register,
      );
      balancerFleets.set(policy, fleet);
      const generator = await LoadGenerator.start({ balancerAddresses: fleet.balancers.map((b) => b.address), workers: [], task: { integration: 'bank-a', payload: '' }, callTimeoutMs: settings.callTimeoutMs });
      cleanups.register(() => generator.close());
      generators.set(policy, generator);
    };
    // All at once, but every start settles before a failure is thrown, so that whatever did start is registered for clean-up.
    const failed = (await Promise.allSettled(policies.map(startPolicy))).find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
    if (failed) throw failed.reason;
    signal.throwIfAborted();
    const redis = new Redis(options.redisUrl, { maxRetriesPerRequest: 1 });
    cleanups.register(async () => void redis.disconnect());
    const ledger = new Ledger(redis, { keyPrefix });
    const workerNameById = new Map(workerFleet.workers.map((w) => [w.workerId, w.name]));

    const latenciesByWindow = new Map<string, number[]>();
    const measure = async (policy: Policy, utilisation: number, repetition: number): Promise<RoutingWindow> => {
      const generator = generators.get(policy)!;
      const pids = new Map([...workerFleet.pids, ...balancerFleets.get(policy)!.pids, ['generator', generator.pid]]);
      if (run.redisPid !== undefined) pids.set('redis', run.redisPid);
      const phase = generator.run(
        { kind: 'open', target: 'balancer', tasksPerSecond: utilisation * capacity, warmupMs: settings.leadInMs, durationMs: settings.windowMs, maxOutstanding: settings.maxOutstanding, keepLatencies: true },
        signal,
      );
      // Its failure is reported where it is awaited, below.
      phase.catch(() => undefined);
      await sleep(settings.leadInMs, signal);
      const cpu = sampleCpu(pids);
      const tasksBefore = await taskCounts(workerFleet.workers, signal);
      const inflight = await sampleInflight(ledger, workerNameById, slowNames, settings, signal);
      const tasksAfter = await taskCounts(workerFleet.workers, signal);
      const cpuPercentOfCore = cpu();
      const result: PhaseResult = await phase;
      // Kept apart from the record: the JSON holds the summaries, not every task.
      latenciesByWindow.set(`${policy} ${utilisation} ${repetition}`, Object.values(result.byIntegration).flatMap((figures) => figures.latenciesMs ?? []));
      const ran = (names: (name: string) => boolean) => workerFleet.workers.filter((w) => names(w.name)).reduce((sum, w) => sum + tasksAfter.get(w.name)! - tasksBefore.get(w.name)!, 0);
      const allTasks = ran(() => true);
      return {
        policy,
        utilisation,
        repetition,
        tasksPerSecond: result.tasksPerSecond,
        latency: result.latency,
        errorsByCode: result.errorsByCode,
        dropped: result.dropped,
        slowWorkerTaskShare: allTasks > 0 ? ran((name) => slowNames.has(name)) / allTasks : Number.NaN,
        inflight,
        cpuPercentOfCore,
      };
    };

    // What the fleet carries when every slot is taken: the reference of the utilisations.
    const slots = (settings.fastWorkers.count + settings.slowWorkers.count) * settings.maxParallelismPerWorker;
    const { slotsMultiple, warmupMs, durationMs } = settings.capacityProbe;
    const capacity = await measureCarriedTasksPerSecond(generators.get('least-loaded')!, { concurrency: slotsMultiple * slots, warmupMs, durationMs }, signal);
    progress(`fleet capacity ${capacity.toFixed(0)} tasks/s measured (${nominalCapacity.toFixed(0)} on paper); utilisations ${settings.utilisations.join(', ')}; ${settings.repetitions} repetitions, policies alternating`);
    const windows: RoutingWindow[] = [];
    for (let repetition = 1; repetition <= settings.repetitions; repetition++) {
      for (const utilisation of settings.utilisations) {
        // Rotate the order so that no policy always runs first (or after the same one).
        const order = policies.map((_unused, i) => policies[(i + repetition - 1) % policies.length]!);
        for (const policy of order) {
          const w = await measure(policy, utilisation, repetition);
          windows.push(w);
          progress(
            `#${repetition} ${Math.round(utilisation * 100)}% ${policy.padEnd(12)}: p50 ${w.latency.p50Ms.toFixed(0)} ms, p99 ${w.latency.p99Ms.toFixed(0)} ms, ` +
              `slow workers ran ${(w.slowWorkerTaskShare * 100).toFixed(1)}%, in flight fast ${w.inflight.meanFast.toFixed(2)} / slow ${w.inflight.meanSlow.toFixed(2)}, failed ${failedCalls(w)}`,
          );
        }
      }
    }
    const pooled = (policy: Policy, utilisation: number) =>
      figures(Array.from({ length: settings.repetitions }, (_unused, i) => latenciesByWindow.get(`${policy} ${utilisation} ${i + 1}`) ?? []).flat());
    const summaries = settings.utilisations.flatMap((utilisation) => policies.map((policy) => summarise(policy, utilisation, utilisation * capacity, windows, pooled)));
    return { ...run.header(), nominalCapacityTasksPerSecond: nominalCapacity, capacityTasksPerSecond: capacity, windows, summaries, goals: judge(summaries) };
  } finally {
    await cleanups.runAll();
  }
}

/** Tasks each worker has run so far, by its own metrics. */
async function taskCounts(workers: readonly WorkerEndpoint[], signal: AbortSignal): Promise<Map<string, number>> {
  const counts = await Promise.all(workers.map(async (w) => [w.name, (await scrapeRuntime(w.metricsUrl!, 5_000, signal)).taskCount || 0] as const));
  return new Map(counts);
}

/** Reads the ledger's in-flight count of every worker each interval until the window ends. */
async function sampleInflight(ledger: Ledger, nameById: ReadonlyMap<string, string>, slowNames: ReadonlySet<string>, settings: RoutingSettings, signal: AbortSignal): Promise<InflightFigures> {
  const sums = new Map<string, number>([...nameById.values()].map((name) => [name, 0]));
  let spreadSum = 0;
  let samples = 0;
  const endsAt = performance.now() + settings.windowMs;
  // Bounded by the window and the interval.
  while (performance.now() < endsAt) {
    const snapshot = await ledger.snapshot(cluster);
    const counts = snapshot.workers.filter((w) => nameById.has(w.workerId)).map((w) => [nameById.get(w.workerId)!, w.inflight] as const);
    if (counts.length > 0) {
      for (const [name, inflight] of counts) sums.set(name, sums.get(name)! + inflight);
      const values = counts.map(([, inflight]) => inflight);
      spreadSum += Math.max(...values) - Math.min(...values);
      samples++;
    }
    await sleep(Math.max(0, Math.min(settings.inflightSampleIntervalMs, endsAt - performance.now())), signal);
  }
  const meanByWorker = Object.fromEntries([...sums].map(([name, sum]) => [name, samples > 0 ? sum / samples : Number.NaN]));
  const meanOf = (slow: boolean) => {
    const values = Object.entries(meanByWorker).filter(([name]) => slowNames.has(name) === slow).map(([, mean]) => mean);
    return values.reduce((sum, v) => sum + v, 0) / values.length;
  };
  return { meanByWorker, meanFast: meanOf(false), meanSlow: meanOf(true), meanSpread: samples > 0 ? spreadSum / samples : Number.NaN, samples };
}

function summarise(policy: Policy, utilisation: number, offeredTasksPerSecond: number, windows: readonly RoutingWindow[], pooled: (policy: Policy, utilisation: number) => Figures): PolicySummary {
  const mine = windows.filter((w) => w.policy === policy && w.utilisation === utilisation);
  const leastLoadedP99 = (repetition: number) => windows.find((w) => w.policy === 'least-loaded' && w.utilisation === utilisation && w.repetition === repetition)?.latency.p99Ms ?? Number.NaN;
  const of = (pick: (w: RoutingWindow) => number) => spread(mine.map(pick).filter(Number.isFinite));
  const mineAll = pooled(policy, utilisation);
  return {
    policy,
    utilisation,
    offeredTasksPerSecond,
    tasks: mineAll.count,
    pooledP50Ms: mineAll.medianMs,
    pooledP99Ms: mineAll.p99Ms,
    pooledP99OverLeastLoaded: mineAll.p99Ms / pooled('least-loaded', utilisation).p99Ms,
    p50Ms: of((w) => w.latency.p50Ms),
    p99Ms: of((w) => w.latency.p99Ms),
    p99OverLeastLoaded: of((w) => w.latency.p99Ms / leastLoadedP99(w.repetition)),
    slowWorkerTaskShare: of((w) => w.slowWorkerTaskShare * 100),
    meanInflightFast: of((w) => w.inflight.meanFast),
    meanInflightSlow: of((w) => w.inflight.meanSlow),
    inflightSpread: of((w) => w.inflight.meanSpread),
    failedTasks: mine.reduce((sum, w) => sum + failedCalls(w), 0),
  };
}

function judge(summaries: readonly PolicySummary[]): Goal[] {
  const goalsFound: Goal[] = [];
  for (const utilisation of new Set(summaries.map((s) => s.utilisation))) {
    const atLevel = summaries.filter((s) => s.utilisation === utilisation);
    const leastLoaded = atLevel.find((s) => s.policy === 'least-loaded')!;
    const bestOther = atLevel.filter((s) => s.policy !== 'least-loaded').reduce((best, s) => (s.pooledP99Ms < best.pooledP99Ms ? s : best));
    goalsFound.push({
      name: `least-loaded p99 at ${Math.round(utilisation * 100)}%, all repetitions' tasks, vs the best other policy (${bestOther.policy}, ${bestOther.pooledP99Ms.toFixed(0)} ms)`,
      target: 'lowest of the four (ms)',
      measured: leastLoaded.pooledP99Ms,
      digits: 0,
      met: leastLoaded.pooledP99Ms <= bestOther.pooledP99Ms,
    });
  }
  const roundRobinAt90 = summaries.find((s) => s.policy === 'round-robin' && s.utilisation === 0.9);
  if (roundRobinAt90) {
    goalsFound.push({
      name: "round-robin p99 over least-loaded p99 at 90%, all repetitions' tasks",
      target: `>= ${goals.p99RatioRoundRobinOverLeastLoadedAt90}x`,
      measured: roundRobinAt90.pooledP99OverLeastLoaded,
      digits: 2,
      met: roundRobinAt90.pooledP99OverLeastLoaded >= goals.p99RatioRoundRobinOverLeastLoadedAt90,
    });
  }
  return goalsFound;
}
