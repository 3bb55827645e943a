/**
 * incidents: one bad integration must not take the fleet (per-integration limits in the ledger).
 * Slow bank: one integration of four turns 10x slower for a minute at some two thirds of the
 * fleet's capacity. Its tasks sent during the incident carry the slowdown in their payload
 * (IncidentSpec), so the slowdown is per task and in time, and every alternative gets the same one.
 * The alternatives, each behind the same number of balancers of its own, one at a time (its balancers
 * up only for its own phase: idle balancers cost CPU), in an order rotated every repetition:
 *   headroom-limits:    least-loaded on the ledger, workers `--overflow refuse`, each integration
 *                       at most `limitedShareOfCapacity` of the cluster in flight;
 *   headroom-no-limits: the same with `--default-integration-limit '{"off":true}'`;
 *   least-request, least-request-p2c, plain-round-robin: no shared view, workers `--overflow queue`
 *                       (as in the routing benchmark).
 * Measured from every task's record: the other integrations' p99 and queue wait during the
 * incident against before it, their deadline misses, and the slow integration's answers.
 */
import * as os from 'node:os';
import * as path from 'node:path';
import { Cleanups } from './fleet/cleanups';
import { sampleMachineCpu } from './fleet/cpu-usage';
import { benchPlace, startProcessFleet, type BalancerEndpoint, type ProcessFleet } from './fleet/headroom-fleet';
import type { SleepFleetSettings } from './fleet/sleep-fleet-settings';
import { sleepHandlersEnv } from './fleet/sleep-handlers';
import { summariseIncident, type IncidentSummary } from './incidents-figures';
import { LoadGenerator, measureCarriedTasksPerSecond } from './load/generator';
import type { Goal } from './report/goals';
import { startRun, type BenchmarkOptions, type RunHeader } from './report/run-header';

export type { IncidentSummary } from './incidents-figures';

export interface Alternative {
  name: string;
  policy: 'least-loaded' | 'plain-round-robin' | 'least-request' | 'least-request-p2c';
  /** Headroom's only: the balancers' --default-integration-limit. */
  defaultIntegrationLimit?: { shareOfCapacity: number; minInFlight: number } | { off: true };
}

export interface IncidentsSettings extends SleepFleetSettings {
  /** Balancers of each alternative (the fronts): coprime with both mixes' cycles so that each balancer sees every integration and priority. */
  frontsPerAlternative: number;
  slowIntegration: string;
  slowdownFactor: number;
  /** Share of the measured capacity offered as load. */
  utilisation: number;
  /** headroom-limits' share of a cluster's capacity any one integration may hold. */
  limitedShareOfCapacity: number;
  /** Measured before the incident. */
  beforeMs: number;
  incidentMs: number;
  /** Each task's own deadline, from when it is sent. */
  taskDeadlineMs: number;
}

export const fullSettings: IncidentsSettings = {
  workersPerCluster: 10,
  maxParallelismPerWorker: 4,
  maxLocalQueuedTasksPerWorker: 1000,
  // Tasks of half a second (p99 about 3.2x the median, at most 5 s; the slow bank's 10x the same).
  // Not 200 ms: at 200 ms the 90 tasks/s of 65% went through 11 balancers, a generator, Redis and
  // 20 workers on 2 shared cores, the machine ran at 188% and CPU queueing, not slots, set the
  // tail (run of 2026-11-28 23:43: others' p99 1.3 s before the incident for tasks of 0.64 s p99).
  sleep: { medianMs: 500, sigma: 0.5, maxMs: 5_000, byTask: true },
  integrationMix: [
    { name: 'bank-a', weight: 1 },
    { name: 'bank-b', weight: 1 },
    { name: 'bank-c', weight: 1 },
    { name: 'bank-d', weight: 1 },
  ],
  // One task in five user-present; cycles of 4 and 5 and 11 fronts: pairwise coprime.
  priorityMix: [
    { priority: 'USER_PRESENT', weight: 1 },
    { priority: 'BACKGROUND', weight: 4 },
  ],
  frontsPerAlternative: 11,
  slowIntegration: 'bank-d',
  slowdownFactor: 10,
  utilisation: 0.65,
  // Why 0.3 and not the default half: the other three carry 0.75 x 65% = 49% of capacity. With the
  // slow bank at half, they would have 50% left (98% busy: long queues); at 0.3 they have 70% (as
  // busy as the whole fleet was before), and each one's own share (16%) is about half its limit.
  limitedShareOfCapacity: 0.3,
  capacityProbe: { slotsMultiple: 2, warmupMs: 3_000, durationMs: 8_000 },
  repetitions: 2,
  leadInMs: 10_000,
  // Some 900 tasks of the other integrations: their p99 rests on the slowest 9.
  beforeMs: 30_000,
  incidentMs: 60_000,
  // Well above the others' slowest task (5 s) and their queueing before the incident.
  taskDeadlineMs: 15_000,
  maxOutstanding: 8_192,
};

/** Seconds in all: proves the benchmark still runs end to end, measures nothing worth reading. */
export const smokeSettings: IncidentsSettings = {
  ...fullSettings,
  repetitions: 1,
  sleep: { ...fullSettings.sleep, medianMs: 20, maxMs: 200 },
  workersPerCluster: 2,
  frontsPerAlternative: 1,
  capacityProbe: { slotsMultiple: 2, warmupMs: 200, durationMs: 600 },
  leadInMs: 300,
  beforeMs: 1_000,
  incidentMs: 1_500,
  taskDeadlineMs: 2_000,
};

export function alternativesOf(settings: IncidentsSettings): Alternative[] {
  return [
    { name: 'headroom-limits', policy: 'least-loaded', defaultIntegrationLimit: { shareOfCapacity: settings.limitedShareOfCapacity, minInFlight: 8 } },
    { name: 'headroom-no-limits', policy: 'least-loaded', defaultIntegrationLimit: { off: true } },
    { name: 'least-request', policy: 'least-request' },
    { name: 'least-request-p2c', policy: 'least-request-p2c' },
    { name: 'round-robin', policy: 'plain-round-robin' },
  ];
}

const isHeadroom = (a: Alternative) => a.policy === 'least-loaded';
const clusterOf = (a: Alternative) => (isHeadroom(a) ? 'baseline' : 'candidate');
export const headroomWithLimits = 'headroom-limits';

export const goals = {
  /** headroom-limits: the other integrations' p99 during the incident over before it. */
  othersP99DuringOverBefore: 1.2,
} as const;

export interface IncidentsResult extends RunHeader<'incidents', IncidentsSettings> {
  capacityTasksPerSecond: number;
  offeredTasksPerSecond: number;
  summaries: IncidentSummary[];
  goals: Goal[];
}

const sleepHandlers = path.join(__dirname, 'fleet', 'sleep-handlers.js');
const balancersStartedAtOnce = 3;
// 20 workers starting at once beside other engineers' tests missed the 20 s default (run of 2026-11-28 23:46).
const startTimeoutMs = 60_000;

export async function runIncidents(options: BenchmarkOptions): Promise<IncidentsResult> {
  const settings = options.smoke ? smokeSettings : fullSettings;
  const run = await startRun('incidents', options, settings);
  const { progress, signal } = options;
  const { keyPrefix, logDir } = benchPlace('incidents');
  const cleanups = new Cleanups();
  const alternatives = alternativesOf(settings);
  try {
    progress(
      `starting ${settings.workersPerCluster} workers per cluster, ${settings.frontsPerAlternative} balancers per alternative (key prefix ${keyPrefix}, logs in ${logDir})`,
    );
    await startProcessFleet(
      keyPrefix,
      {
        redisUrl: options.redisUrl,
        workers: (['baseline', 'candidate'] as const).map((cluster) => ({
          cluster,
          count: settings.workersPerCluster,
          maxParallelismPerWorker: settings.maxParallelismPerWorker,
          env: {
            ...sleepHandlersEnv(settings.sleep),
            HEADROOM_OVERFLOW: cluster === 'baseline' ? 'refuse' : 'queue',
            HEADROOM_MAX_QUEUED_TASKS: String(settings.maxLocalQueuedTasksPerWorker),
          },
        })),
        balancerCount: 0,
        handlersPath: sleepHandlers,
        logDir,
        readyTimeoutMs: startTimeoutMs,
      },
      cleanups.register,
    );
    // Only one alternative's balancers up at a time: 66 idle balancers took both cores (run of 2026-11-28 23:39).
    const withAlternative = async <T>(alternative: Alternative, use: (generator: LoadGenerator) => Promise<T>): Promise<T> => {
      const scoped = new Cleanups();
      try {
        return await use(await startAlternative(alternative, settings, keyPrefix, logDir, options.redisUrl, scoped));
      } finally {
        await scoped.runAll();
      }
    };
    const slots = settings.workersPerCluster * settings.maxParallelismPerWorker;
    const { slotsMultiple, warmupMs, durationMs } = settings.capacityProbe;
    // Through Headroom without limits: the fleet's capacity with every slot usable by any integration.
    const noLimits = alternatives.find((a) => a.name === 'headroom-no-limits')!;
    const capacity = await withAlternative(noLimits, (generator) =>
      measureCarriedTasksPerSecond(generator, { concurrency: slotsMultiple * slots, warmupMs, durationMs }, signal),
    );
    const offered = capacity * settings.utilisation;
    progress(
      `capacity ${capacity.toFixed(0)} tasks/s through headroom-no-limits; offering ${offered.toFixed(0)} tasks/s; ${settings.repetitions} repetition(s)`,
    );
    const summaries: IncidentSummary[] = [];
    for (let repetition = 1; repetition <= settings.repetitions; repetition++) {
      const order = alternatives.map((_unused, i) => alternatives[(i + repetition - 1) % alternatives.length]!);
      for (const alternative of order) {
        signal.throwIfAborted();
        const summary = await withAlternative(alternative, (generator) => measureIncident(alternative, generator, settings, offered, repetition, signal));
        summaries.push(summary);
        progress(
          `#${repetition} ${alternative.name.padEnd(18)}: others p99 ${summary.othersBefore.p99Ms.toFixed(0)} -> ${summary.othersDuring.p99Ms.toFixed(0)} ms (${summary.othersP99Ratio.toFixed(2)}x), ` +
            `others' misses ${summary.othersDuring.missed}, slow answers ${JSON.stringify(summary.slowDuring.byCode)}, lost ${summary.lostTasks}, machine CPU ${summary.machineCpuPercentOfCore ?? '?'}%`,
        );
      }
    }
    return { ...run.header(), capacityTasksPerSecond: capacity, offeredTasksPerSecond: offered, summaries, goals: judge(summaries, settings) };
  } finally {
    await cleanups.runAll();
  }
}

async function startAlternative(
  alternative: Alternative,
  settings: IncidentsSettings,
  keyPrefix: string,
  logDir: string,
  redisUrl: string,
  cleanups: Cleanups,
): Promise<LoadGenerator> {
  const limitArgs = alternative.defaultIntegrationLimit ? ['--default-integration-limit', JSON.stringify(alternative.defaultIntegrationLimit)] : [];
  const startOne = (index: number): Promise<ProcessFleet> =>
    startProcessFleet(
      keyPrefix,
      {
        redisUrl,
        workers: [],
        balancerCount: 1,
        balancerNamePrefix: `${alternative.name}-${index + 1}`,
        balancerArgs: ['--policy', alternative.policy, '--candidate-percent', clusterOf(alternative) === 'candidate' ? '100' : '0', ...limitArgs],
        logDir,
        keepKeysOnClose: true,
        readyTimeoutMs: startTimeoutMs,
      },
      cleanups.register,
    );
  // A few at a time: eleven Node processes starting at once on this shared 2-core machine missed
  // the 20 s ready timeout (run of 2026-11-28 23:36).
  const balancers: BalancerEndpoint[] = [];
  for (let first = 0; first < settings.frontsPerAlternative; first += balancersStartedAtOnce) {
    const batch = Array.from({ length: Math.min(balancersStartedAtOnce, settings.frontsPerAlternative - first) }, (_unused, i) => startOne(first + i));
    const settled = await Promise.allSettled(batch);
    const failed = settled.find((outcome): outcome is PromiseRejectedResult => outcome.status === 'rejected');
    if (failed) throw failed.reason;
    for (const outcome of settled) if (outcome.status === 'fulfilled') balancers.push(...outcome.value.balancers);
  }
  const generator = await LoadGenerator.start({
    balancerAddresses: balancers.map((b) => b.address),
    workers: [],
    task: { integration: settings.integrationMix[0]!.name, integrationMix: settings.integrationMix, priorityMix: settings.priorityMix, payload: '' },
    callTimeoutMs: settings.taskDeadlineMs,
  });
  cleanups.register(() => generator.close());
  return generator;
}

/** One alternative's phase: lead-in, before, the incident; every task recorded, then split by when it was due. */
async function measureIncident(
  alternative: Alternative,
  generator: LoadGenerator,
  settings: IncidentsSettings,
  tasksPerSecond: number,
  repetition: number,
  signal: AbortSignal,
): Promise<IncidentSummary> {
  const fromMs = settings.leadInMs + settings.beforeMs;
  const untilMs = fromMs + settings.incidentMs;
  const machineCpu = sampleMachineCpu(os.availableParallelism());
  const result = await generator.run(
    {
      kind: 'open',
      target: 'balancer',
      tasksPerSecond,
      warmupMs: settings.leadInMs,
      durationMs: settings.beforeMs + settings.incidentMs,
      maxOutstanding: settings.maxOutstanding,
      keepTaskRecords: true,
      incident: { integration: settings.slowIntegration, sleepFactor: settings.slowdownFactor, fromMs, untilMs },
    },
    signal,
  );
  return summariseIncident({
    alternative: alternative.name,
    repetition,
    records: result.taskRecords ?? [],
    sentCalls: result.sentCalls ?? 0,
    answeredCalls: result.answeredCalls ?? 0,
    dropped: result.dropped,
    before: { fromMs: settings.leadInMs, untilMs: fromMs },
    during: { fromMs, untilMs },
    slowIntegration: settings.slowIntegration,
    taskDeadlineMs: settings.taskDeadlineMs,
    machineCpuPercentOfCore: machineCpu(),
  });
}

function judge(summaries: readonly IncidentSummary[], settings: IncidentsSettings): Goal[] {
  const found: Goal[] = [];
  const limited = summaries.filter((s) => s.alternative === headroomWithLimits);
  if (limited.length > 0) {
    const worst = limited.reduce((a, b) => (b.othersP99Ratio > a.othersP99Ratio ? b : a));
    found.push({
      name: `headroom-limits (share ${settings.limitedShareOfCapacity}): the other integrations' p99 during the slow bank's incident over before it (${worst.othersDuring.p99Ms.toFixed(0)} over ${worst.othersBefore.p99Ms.toFixed(0)} ms; worst repetition)`,
      target: `<= ${goals.othersP99DuringOverBefore}x`,
      measured: worst.othersP99Ratio,
      digits: 2,
      met: worst.othersP99Ratio <= goals.othersP99DuringOverBefore,
    });
    const missed = limited.reduce((sum, s) => sum + s.othersDuring.missed, 0);
    found.push({
      name: `headroom-limits: the other integrations' tasks during the incident that missed their ${settings.taskDeadlineMs} ms deadline or failed`,
      target: '= 0',
      measured: missed,
      met: missed === 0,
    });
  }
  const lost = summaries.reduce((sum, s) => sum + s.lostTasks, 0);
  found.push({ name: 'tasks sent without a final answer, every alternative', target: '= 0', measured: lost, met: lost === 0 });
  const uncoded = limited.reduce((sum, s) => sum + s.slowDuring.uncoded, 0);
  found.push({ name: "headroom-limits: the slow bank's failed tasks answered without an HR_ERR_* code", target: '= 0', measured: uncoded, met: uncoded === 0 });
  return found;
}
