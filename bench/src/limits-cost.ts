/**
 * limits-cost: what per-integration limits cost Redis per task. The fleet-scale harness (scale's
 * part 3: simulated workers and balancers calling the real ledger of @headroom/fleet on a private
 * redis-server; scale/fleet-scale.ts) runs the same loads twice per pair: once with reservations
 * that name no integration (the ledger reads no limit), once with each naming one of 20
 * integrations that each have a limit of their own. The two alternate, each run on a fresh
 * redis-server in a process of its own, the order swapped every pair; what is compared is each
 * pair's ratio, so that the machine's noise between pairs cancels out.
 */
import { Redis } from 'ioredis';
import { Ledger, type IntegrationLimit } from '@headroom/fleet';
import { findOnPath, startPrivateRedis } from '@headroom/testkit';
import { benchKeyPrefix } from './fleet/headroom-fleet';
import type { Goal } from './report/goals';
import { startRun, type BenchmarkOptions, type RunHeader } from './report/run-header';
import { spread, type Spread } from './report/stats';
import { fullSettings as scaleFull, runCalls, smokeSettings as scaleSmoke } from './scale';
import { readAccounting, spentBetween } from './scale/redis-accounting';
import type { FleetScaleSettings } from './scale/fleet-scale';
import { runFleetScale } from './scale/fleet-scale-runner';

export type LimitsVariant = FleetScaleSettings['sim']['integrationLimits'];

/**
 * Part 1's variants: no integration named; each task naming one of 20 integrations with an
 * in-flight limit; the same with a start rate too (1,000,000/s: the rate's bookkeeping on every
 * start, never a refusal).
 */
export const settleVariants = ['none', 'in-flight', 'in-flight-and-rate'] as const;
export type SettleVariant = (typeof settleVariants)[number];

const limitOf: Record<Exclude<SettleVariant, 'none'>, IntegrationLimit> = {
  'in-flight': { shareOfCapacity: 0.5 },
  'in-flight-and-rate': { shareOfCapacity: 0.5, maxStartsPerSecond: 1_000_000 },
};

/** Part 1: settle calls alone, the variants in turn on one private redis-server. */
export interface SettleCostSettings {
  workers: number;
  slotsPerWorker: number;
  integrations: number;
  /** Leases held while a phase runs (a busy fleet's records), reserved before it, untimed. */
  heldLeases: number;
  /** Tasks per phase: each releases a held lease and reserves a new one, as a busy balancer's calls do. */
  tasksPerPhase: number;
  /** Calls under way at once: the Ledger batches what comes together into one settle call, as a balancer's. */
  concurrency: number;
  /** Rounds of one phase of each variant, the order rotated every round. */
  rounds: number;
}

export interface LimitsCostSettings {
  settle: SettleCostSettings;
  /** Part 2: the harness's settings for each run (one repetition each); integrationLimits is set per run. */
  fleetScale: FleetScaleSettings;
  pairs: number;
  /** The goal: Redis's thread per task with limits over without, at most this. */
  maxCostRatio: number;
}

/** Only the loads: the idle states are measured too (the per-task figure is the load's beyond the idle fleet's), but not compared. */
const onlyLoads = { loadAtPlannedShare: false, othersAtHighestRate: false, repetitions: 1 } as const;

export const fullSettings: LimitsCostSettings = {
  settle: { workers: 1_000, slotsPerWorker: 30, integrations: 20, heldLeases: 5_000, tasksPerPhase: 4_000, concurrency: 32, rounds: 15 },
  // The target fleet of the scale benchmark (4,000 workers of 30 slots, 20 balancers), at two of its rates.
  // 20,000 tasks/s is beyond what the harness drives on this machine with other work on it.
  fleetScale: { ...scaleFull.fleetScale, ...onlyLoads, tasksPerSecond: [5_000, 10_000] },
  pairs: 2,
  maxCostRatio: 1.15,
};

export const smokeSettings: LimitsCostSettings = {
  settle: { workers: 20, slotsPerWorker: 30, integrations: 20, heldLeases: 100, tasksPerPhase: 200, concurrency: 8, rounds: 2 },
  fleetScale: { ...scaleSmoke.fleetScale, ...onlyLoads, tasksPerSecond: [400] },
  pairs: 1,
  maxCostRatio: 1.15,
};

/** One run's loads: the median over its windows. */
export interface VariantRun {
  pair: number;
  variant: LimitsVariant;
  loads: {
    targetTasksPerSecond: number;
    tasksPerSecond: number;
    perTaskUs: number;
    scriptUsecPerTask: number;
    /** Redis commands per task beyond the idle fleet's, by name (a script's own commands counted too). */
    commandsPerTask: Record<string, number>;
    keptUp: boolean;
  }[];
  lastError: string | null;
}

export interface RateComparison {
  targetTasksPerSecond: number;
  /** Redis main-thread µs per task, each run's median, over the runs of each variant. */
  withoutUs: Spread;
  withUs: Spread;
  /** Each pair's with ÷ without. */
  ratioByPair: number[];
  ratio: Spread;
  /** Every run of this rate kept up (the harness sent what was asked, on time). */
  keptUp: boolean;
}

/** Part 1's figures of one variant: its spread over its phases, and each round's ratio to 'none' in that round. */
export interface SettleComparison {
  variant: SettleVariant;
  cpuUs: Spread;
  scriptUs: Spread;
  tasksPerCall: Spread;
  /** Each round's this ÷ none, of the main thread's CPU per task. */
  cpuRatioByRound: number[];
  cpuRatio: Spread;
  scriptRatio: Spread;
}

export interface LimitsCostResult extends RunHeader<'limits-cost', LimitsCostSettings> {
  settlePhases: SettlePhase[];
  settle: SettleComparison[];
  runs: VariantRun[];
  byRate: RateComparison[];
  goals: Goal[];
}

export async function runLimitsCost(options: BenchmarkOptions): Promise<LimitsCostResult> {
  const settings = options.smoke ? smokeSettings : fullSettings;
  const binary = findOnPath('redis-server');
  if (!binary) throw new Error('limits-cost needs redis-server on the PATH: each run measures a private Redis of its own (apt-get install redis-server)');
  const run = await startRun('limits-cost', options, settings);
  const settlePhases = await measureSettleCost(binary, settings.settle, options.progress);
  const settle = compareSettle(settlePhases);
  const runs: VariantRun[] = [];
  for (let pair = 1; pair <= settings.pairs; pair++) {
    const order: LimitsVariant[] = pair % 2 === 1 ? ['none', 'every'] : ['every', 'none'];
    for (const variant of order) {
      options.signal.throwIfAborted();
      options.progress(`pair ${pair} of ${settings.pairs}: integration limits ${variant}`);
      const fleetScale: FleetScaleSettings = { ...settings.fleetScale, sim: { ...settings.fleetScale.sim, integrationLimits: variant } };
      const result = await runFleetScale(binary, fleetScale, options.progress, options.signal);
      runs.push({
        pair,
        variant,
        loads: result.run.loads.map((load) => ({
          targetTasksPerSecond: load.targetTasksPerSecond,
          tasksPerSecond: load.tasksPerSecond.median,
          perTaskUs: load.perTaskUs.median,
          scriptUsecPerTask: load.scriptUsecPerTask,
          commandsPerTask: load.commandsPerTask,
          keptUp: load.keptUp,
        })),
        lastError: result.run.lastError,
      });
    }
  }
  const byRate = settings.fleetScale.tasksPerSecond.map((rate) => compareAt(rate, runs, settings.pairs));
  return { ...run.header(), settlePhases, settle, runs, byRate, goals: goalsOf(settle, byRate, settings) };
}

function compareSettle(phases: readonly SettlePhase[]): SettleComparison[] {
  const rounds = [...new Set(phases.map((p) => p.round))];
  return settleVariants.map((variant) => {
    const of = phases.filter((p) => p.variant === variant);
    const ratios = (figure: 'mainThreadCpuUsPerTask' | 'scriptUsPerTask') =>
      rounds.map((round) => {
        const inRound = phases.filter((p) => p.round === round);
        return inRound.find((p) => p.variant === variant)![figure] / inRound.find((p) => p.variant === 'none')![figure];
      });
    const cpuRatioByRound = ratios('mainThreadCpuUsPerTask');
    return {
      variant,
      cpuUs: spread(of.map((p) => p.mainThreadCpuUsPerTask)),
      scriptUs: spread(of.map((p) => p.scriptUsPerTask)),
      tasksPerCall: spread(of.map((p) => p.tasksPerCall)),
      cpuRatioByRound,
      cpuRatio: spread(cpuRatioByRound),
      scriptRatio: spread(ratios('scriptUsPerTask')),
    };
  });
}

function compareAt(rate: number, runs: readonly VariantRun[], pairs: number): RateComparison {
  const loadOf = (pair: number, variant: LimitsVariant) =>
    runs.find((r) => r.pair === pair && r.variant === variant)?.loads.find((l) => l.targetTasksPerSecond === rate);
  const ratioByPair: number[] = [];
  const withoutUs: number[] = [];
  const withUs: number[] = [];
  let keptUp = true;
  for (let pair = 1; pair <= pairs; pair++) {
    const without = loadOf(pair, 'none');
    const withLimits = loadOf(pair, 'every');
    if (!without || !withLimits) continue;
    withoutUs.push(without.perTaskUs);
    withUs.push(withLimits.perTaskUs);
    ratioByPair.push(withLimits.perTaskUs / without.perTaskUs);
    keptUp &&= without.keptUp && withLimits.keptUp;
  }
  return { targetTasksPerSecond: rate, withoutUs: spread(withoutUs), withUs: spread(withUs), ratioByPair, ratio: spread(ratioByPair), keptUp };
}

function goalsOf(settle: readonly SettleComparison[], byRate: readonly RateComparison[], settings: LimitsCostSettings): Goal[] {
  const target = `<= ${settings.maxCostRatio}x`;
  const none = settle.find((c) => c.variant === 'none')!;
  const limited = settle.find((c) => c.variant === 'in-flight')!;
  const withRate = settle.find((c) => c.variant === 'in-flight-and-rate')!;
  return [
    {
      name: `Redis's main thread per task (a release and a reservation, batched as a balancer's), an in-flight limit on every integration over none (${limited.cpuUs.median.toFixed(1)} over ${none.cpuUs.median.toFixed(1)} µs; median of ${limited.cpuRatioByRound.length} rounds)`,
      target,
      measured: limited.cpuRatio.median,
      digits: 2,
      met: limited.cpuRatio.median <= settings.maxCostRatio,
    },
    {
      name: `The same with a start rate on every integration too (${withRate.cpuUs.median.toFixed(1)} µs)`,
      target: 'state it (no target)',
      measured: withRate.cpuRatio.median,
      digits: 2,
      met: 'stated',
    },
    // The whole fleet's figure is judged only where the harness sent what was asked, on time, in every run.
    ...byRate.map((r) => ({
      name: `Redis's thread per task in the fleet-scale harness at ${r.targetTasksPerSecond.toLocaleString('en-US')} tasks/s, a limit on every integration over none (${r.withUs.median.toFixed(1)} over ${r.withoutUs.median.toFixed(1)} µs; median of ${r.ratioByPair.length} pairs)${r.keptUp ? '' : '; the harness did not keep up in every run: not judged'}`,
      target,
      measured: r.ratio.median,
      digits: 2,
      met: r.keptUp ? r.ratio.median <= settings.maxCostRatio : ('stated' as const),
    })),
  ];
}

/** One phase of part 1: Redis's cost per task (a release and a reservation) of one variant. */
export interface SettlePhase {
  round: number;
  variant: SettleVariant;
  /** Redis's main thread (INFO cpu) per task. */
  mainThreadCpuUsPerTask: number;
  /** Inside the scripts (commandstats, EVALSHA) per task. */
  scriptUsPerTask: number;
  /** Tasks per settle call: how the Ledger batched them. */
  tasksPerCall: number;
}

const cluster = 'baseline';
const phaseTimeoutMs = 60_000;

/** Part 1: alternating phases of each variant on a ledger of `workers` workers, on a private redis-server. */
export async function measureSettleCost(binary: string, s: SettleCostSettings, progress: (line: string) => void): Promise<SettlePhase[]> {
  const server = await startPrivateRedis({ binary });
  const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
  try {
    const ledger = new Ledger(redis, { keyPrefix: benchKeyPrefix('limits-cost') });
    for (let i = 0; i < s.workers; i++) {
      await ledger.heartbeat(cluster, {
        workerId: `w${i}`,
        address: `10.0.0.${i % 250}:${10_000 + i}`,
        capacity: s.slotsPerWorker,
        draining: false,
        heldLeaseIds: [],
      });
    }
    const phases: SettlePhase[] = [];
    for (let round = 1; round <= s.rounds; round++) {
      const order = settleVariants.map((_unused, i) => settleVariants[(i + round) % settleVariants.length]!);
      for (const variant of order) {
        if (variant !== 'none') for (let i = 0; i < s.integrations; i++) await ledger.setIntegrationLimit(cluster, integrationName(i), limitOf[variant]);
        phases.push({ round, variant, ...(await settlePhase(ledger, redis, variant, s)) });
      }
      const inRound = phases.slice(-order.length);
      progress(`settle round ${round}: ${inRound.map((p) => `${p.variant} ${p.mainThreadCpuUsPerTask.toFixed(1)} µs`).join(', ')} per task`);
    }
    return phases;
  } finally {
    redis.disconnect();
    await server.stop();
  }
}

const integrationName = (i: number) => `bank-${String(i + 1).padStart(2, '0')}`;

async function settlePhase(ledger: Ledger, redis: Redis, variant: SettleVariant, s: SettleCostSettings): Promise<Omit<SettlePhase, 'round' | 'variant'>> {
  let sequence = 0;
  const reserve = async (): Promise<string> => {
    const integration = variant === 'none' ? undefined : integrationName(sequence++ % s.integrations);
    const reservation = await ledger.reserve(cluster, {
      priority: 'background',
      balancerId: 'bench',
      waitIfNone: false,
      ...(integration ? { integration } : {}),
    });
    if (!reservation.ok)
      throw new Error(`limits-cost: a reservation found no slot (${reservation.reason}); the ledger has ${s.workers * s.slotsPerWorker} slots`);
    return reservation.leaseId;
  };
  const held: string[] = [];
  await runCalls(s.heldLeases, s.concurrency, phaseTimeoutMs, async () => held.push(await reserve()));
  const before = await readAccounting(redis);
  await runCalls(s.tasksPerPhase, s.concurrency, phaseTimeoutMs, async () => {
    // The lane's own lease: never empty, as every lane puts back what it took.
    const leaseId = held.shift()!;
    const [, next] = await Promise.all([ledger.release(cluster, leaseId), reserve()]);
    held.push(next);
  });
  const spent = spentBetween(before, await readAccounting(redis));
  await runCalls(held.length, s.concurrency, phaseTimeoutMs, (i) => ledger.release(cluster, held[i]!));
  const calls = spent.commands.evalsha?.calls ?? 0;
  return {
    mainThreadCpuUsPerTask: spent.mainThreadCpuUs / s.tasksPerPhase,
    scriptUsPerTask: (spent.commands.evalsha?.usec ?? 0) / s.tasksPerPhase,
    tasksPerCall: calls === 0 ? 0 : s.tasksPerPhase / calls,
  };
}
