/**
 * priority: user-present tasks under a background spike. One balancer and its workers, each its
 * own process; two load-generator processes, one per priority, send open-loop load near the
 * fleet's capacity (a tenth of it user-present), then the background one multiplies its rate by 10
 * for the spike while the user-present one keeps its rate. Both run a phase before the spike and
 * one during it, started together. Every task's final answer is counted by the generators and,
 * by outcome, on the balancer's own metrics. Repeated on the same fleet.
 */
import { sleep } from '@headroom/common';
import { Cleanups } from './fleet/cleanups';
import { sampleCpu } from './fleet/cpu-usage';
import { benchPlace, startProcessFleet } from './fleet/headroom-fleet';
import { getText } from './fleet/http-get';
import { parsePrometheusText } from './fleet/runtime-metrics';
import { LoadGenerator, measureCarriedTasksPerSecond } from './load/generator';
import type { OpenLoopSpec, PhaseResult } from './load/protocol';
import type { Goal } from './report/goals';
import { startRun, type BenchmarkOptions, type RunHeader } from './report/run-header';
import { figures, spread, type Figures, type Spread } from './report/stats';

export interface PrioritySettings {
  workerCount: number;
  maxParallelismPerWorker: number;
  /** Every task sleeps this long in the worker (demo handler). */
  taskSleepMs: number;
  /** Steady load as a share of the fleet's capacity, measured first (measureCarriedTasksPerSecond, this many times its slots in flight). */
  steadyUtilisation: number;
  capacityProbe: { slotsMultiple: number; warmupMs: number; durationMs: number };
  userPresentShare: number;
  /** During the spike, background tasks are sent at this many times their steady rate. */
  spikeFactor: number;
  /** Steady load before its window is measured: connections open and the steady state sets in. */
  leadInMs: number;
  /** Measured windows: steady load, then the spike. */
  steadyMs: number;
  spikeMs: number;
  /** Each task's deadline: queued background tasks that find no slot by then are answered DEADLINE_EXCEEDED. */
  taskTimeoutMs: number;
  /** The balancer's --max-queued-tasks: a spike fills it, so background work is also refused and shed. */
  maxQueuedTasks: number;
  /** The balancer's --kept-for-user-present-share (its default). */
  keptForUserPresentShare: number;
  repetitions: number;
  /** Between runs: the last answers arrive and the queue empties. */
  pauseMs: number;
}

export const fullSettings: PrioritySettings = {
  workerCount: 3,
  maxParallelismPerWorker: 5,
  taskSleepMs: 100,
  steadyUtilisation: 0.85,
  capacityProbe: { slotsMultiple: 2, warmupMs: 1_000, durationMs: 3_000 },
  userPresentShare: 0.1,
  spikeFactor: 10,
  leadInMs: 1_000,
  steadyMs: 6_000,
  spikeMs: 6_000,
  taskTimeoutMs: 2_000,
  maxQueuedTasks: 1_000,
  keptForUserPresentShare: 0.1,
  repetitions: 3,
  pauseMs: 1_000,
};

/** Seconds in all: proves the benchmark still runs end to end, measures nothing worth reading. */
export const smokeSettings: PrioritySettings = {
  ...fullSettings,
  workerCount: 2,
  maxParallelismPerWorker: 2,
  taskSleepMs: 50,
  capacityProbe: { slotsMultiple: 2, warmupMs: 200, durationMs: 600 },
  userPresentShare: 0.25,
  leadInMs: 300,
  steadyMs: 1_500,
  spikeMs: 1_500,
  taskTimeoutMs: 1_000,
  maxQueuedTasks: 50,
  repetitions: 1,
  pauseMs: 200,
};

export const goals = { userP99SpikeOverSteady: 1.2 } as const;

/** What the client saw of one priority in one phase's measured window. */
export interface PriorityPhase {
  /** Answered with a result or an error. */
  sent: number;
  ran: number;
  rejectedByCode: Record<string, number>;
  /** Not sent: the generator's own limit of calls in flight was reached. */
  notSent: number;
  p50Ms: number;
  p99Ms: number;
  maxMs: number;
}

export interface PriorityRun {
  repetition: number;
  steady: { userPresent: PriorityPhase; background: PriorityPhase };
  spike: { userPresent: PriorityPhase; background: PriorityPhase };
  /** Calls the generators sent in all (lead-ins included); each phase ends only once every one of them was answered. */
  sent: number;
  /** The balancer's own count of the final answers it gave, by priority and outcome (headroom_balancer_tasks_total). */
  balancerAnswersByPriorityAndOutcome: Record<string, number>;
  balancerAnswers: number;
  /** Mean time user-present tasks waited in the balancer for a slot (headroom_balancer_queue_wait_seconds, lead-in included): what of their latency is the wait for capacity. */
  userPresentMeanSlotWaitMs: { steady: number; spike: number };
  /** Balancer, generators, workers, Redis (Linux /proc), in percent of one core over the run. */
  cpuPercentOfCore: Record<string, number>;
}

export interface PriorityResult extends RunHeader<'priority', PrioritySettings> {
  /** Slots over the tasks' time, on paper. */
  nominalCapacityTasksPerSecond: number;
  /** As measured: the reference of the steady load. */
  capacityTasksPerSecond: number;
  runs: PriorityRun[];
  /** Every run's user-present tasks pooled, before and in the spike. */
  userPresentSteady: Figures;
  userPresentSpike: Figures;
  userPresentP99PooledRatio: number;
  /** Per run, median and range. */
  userPresentP99SteadyMs: Spread;
  userPresentP99SpikeMs: Spread;
  /** Spike over steady, per run. */
  userPresentP99Ratio: Spread;
  userPresentRejected: number;
  backgroundRejectedByCode: Record<string, number>;
  /** Sent by the generators minus answered by the balancer, all runs: 0 when each task got exactly one final answer. */
  sentMinusBalancerAnswers: number;
  goals: Goal[];
}

export type PriorityOptions = BenchmarkOptions;

const sum = (values: Iterable<number>) => [...values].reduce((total, n) => total + n, 0);

function phaseOf(result: PhaseResult): PriorityPhase {
  const rejected = sum(Object.values(result.errorsByCode));
  return {
    sent: result.succeeded + rejected,
    ran: result.succeeded,
    rejectedByCode: result.errorsByCode,
    notSent: result.dropped,
    p50Ms: result.latency.p50Ms,
    p99Ms: result.latency.p99Ms,
    maxMs: result.latency.maxMs,
  };
}

/** What the balancer counted so far: its answers (headroom_balancer_tasks_total by "priority outcome") and the user-present tasks' wait for a slot. */
async function balancerCounts(
  metricsUrl: string,
  signal: AbortSignal,
): Promise<{ answers: Map<string, number>; userQueueWaitSeconds: number; userQueueWaits: number }> {
  const answers = new Map<string, number>();
  let userQueueWaitSeconds = 0;
  let userQueueWaits = 0;
  for (const sample of parsePrometheusText(await getText(metricsUrl, 5_000, signal))) {
    if (sample.name === 'headroom_balancer_tasks_total') {
      const key = `${sample.labels.priority} ${sample.labels.outcome}`;
      answers.set(key, (answers.get(key) ?? 0) + sample.value);
    } else if (sample.labels.priority === 'user_present' && sample.name === 'headroom_balancer_queue_wait_seconds_sum') {
      userQueueWaitSeconds += sample.value;
    } else if (sample.labels.priority === 'user_present' && sample.name === 'headroom_balancer_queue_wait_seconds_count') {
      userQueueWaits += sample.value;
    }
  }
  return { answers, userQueueWaitSeconds, userQueueWaits };
}

export async function runPriority(options: PriorityOptions): Promise<PriorityResult> {
  const settings = options.smoke ? smokeSettings : fullSettings;
  const run = await startRun('priority', options, settings);
  const { progress, signal } = options;
  const { keyPrefix, logDir } = benchPlace('priority');
  const cleanups = new Cleanups();
  const slots = settings.workerCount * settings.maxParallelismPerWorker;
  const nominalCapacity = slots / (settings.taskSleepMs / 1000);
  try {
    progress(`starting 1 balancer and ${settings.workerCount} workers (key prefix ${keyPrefix}, logs in ${logDir})`);
    const fleet = await startProcessFleet(
      keyPrefix,
      {
        redisUrl: options.redisUrl,
        workers: [{ cluster: 'baseline', count: settings.workerCount, maxParallelismPerWorker: settings.maxParallelismPerWorker }],
        balancerArgs: [
          '--metrics-port',
          '0',
          '--max-queued-tasks',
          String(settings.maxQueuedTasks),
          '--kept-for-user-present-share',
          String(settings.keptForUserPresentShare),
        ],
        logDir,
      },
      cleanups.register,
    );
    const balancer = fleet.balancers[0]!;
    if (!balancer.metricsUrl) throw new Error(`the balancer did not say where it serves /metrics (logs in ${logDir})`);
    const task = { integration: 'bank-a', payload: JSON.stringify({ sleepMs: settings.taskSleepMs }) };
    const generators = {
      userPresent: await LoadGenerator.start({
        balancerAddresses: [balancer.address],
        workers: [],
        task: { ...task, priority: 'USER_PRESENT' },
        callTimeoutMs: settings.taskTimeoutMs,
      }),
      background: await LoadGenerator.start({
        balancerAddresses: [balancer.address],
        workers: [],
        task: { ...task, priority: 'BACKGROUND' },
        callTimeoutMs: settings.taskTimeoutMs,
      }),
    };
    cleanups.register(() => generators.userPresent.close());
    cleanups.register(() => generators.background.close());
    // What the fleet carries, every slot taken (user-present tasks: none is kept from them): the reference of "near capacity".
    const { slotsMultiple, warmupMs, durationMs } = settings.capacityProbe;
    const capacity = await measureCarriedTasksPerSecond(generators.userPresent, { concurrency: slotsMultiple * slots, warmupMs, durationMs }, signal);
    // The probe's last calls end meanwhile: they must not count among the first run's answers.
    await sleep(settings.pauseMs, signal);
    const steadyRate = settings.steadyUtilisation * capacity;
    const userRate = steadyRate * settings.userPresentShare;
    const backgroundRate = steadyRate - userRate;
    const open = (tasksPerSecond: number, warmupMs: number, durationMs: number, keepLatencies: boolean): OpenLoopSpec => ({
      kind: 'open',
      target: 'balancer',
      tasksPerSecond,
      warmupMs,
      durationMs,
      maxOutstanding: 20_000,
      keepLatencies,
    });
    /** Both priorities at once; each phase ends when every call it sent was answered. User-present latencies are kept, to pool the runs. */
    const phase = (backgroundFactor: number, warmupMs: number, durationMs: number) =>
      Promise.all([
        generators.userPresent.run(open(userRate, warmupMs, durationMs, true), signal),
        generators.background.run(open(backgroundRate * backgroundFactor, warmupMs, durationMs, false), signal),
      ]);
    // A window holds few user-present tasks, so its p99 is about its slowest one: the goal is judged on all runs' tasks together.
    const userLatencies = { steady: [] as number[], spike: [] as number[] };
    const keep = (into: number[], result: PhaseResult) => {
      for (const figures of Object.values(result.byIntegration)) into.push(...(figures.latenciesMs ?? []));
      for (const figures of Object.values(result.byIntegration)) delete figures.latenciesMs;
    };
    progress(
      `capacity ${capacity.toFixed(0)} tasks/s measured (${nominalCapacity.toFixed(0)} on paper); ${userRate.toFixed(1)} user-present and ${backgroundRate.toFixed(1)} background tasks/s ` +
        `(${Math.round(settings.steadyUtilisation * 100)}% of capacity), then background x${settings.spikeFactor}; ${settings.leadInMs} ms lead-in and ${settings.steadyMs} / ${settings.spikeMs} ms windows`,
    );

    const runs: PriorityRun[] = [];
    for (let repetition = 1; repetition <= settings.repetitions; repetition++) {
      const before = await balancerCounts(balancer.metricsUrl, signal);
      const pids = new Map([...fleet.pids, ['generator-user-present', generators.userPresent.pid], ['generator-background', generators.background.pid]]);
      if (run.redisPid !== undefined) pids.set('redis', run.redisPid);
      const cpu = sampleCpu(pids);
      const [userSteady, backgroundSteady] = await phase(1, settings.leadInMs, settings.steadyMs);
      const between = await balancerCounts(balancer.metricsUrl, signal);
      // The spike is measured from its first task: its start, when the queue fills, is part of it.
      const [userSpike, backgroundSpike] = await phase(settings.spikeFactor, 0, settings.spikeMs);
      const cpuPercentOfCore = cpu();
      keep(userLatencies.steady, userSteady);
      keep(userLatencies.spike, userSpike);
      const after = await balancerCounts(balancer.metricsUrl, signal);
      const byOutcome = Object.fromEntries(
        [...after.answers].map(([key, count]) => [key, count - (before.answers.get(key) ?? 0)]).filter(([, count]) => count !== 0),
      );
      const meanWaitMs = (from: typeof before, to: typeof before) =>
        ((to.userQueueWaitSeconds - from.userQueueWaitSeconds) / (to.userQueueWaits - from.userQueueWaits)) * 1000;
      const r: PriorityRun = {
        repetition,
        steady: { userPresent: phaseOf(userSteady), background: phaseOf(backgroundSteady) },
        spike: { userPresent: phaseOf(userSpike), background: phaseOf(backgroundSpike) },
        sent: sum([userSteady, backgroundSteady, userSpike, backgroundSpike].map((p) => p.calls - p.dropped)),
        balancerAnswersByPriorityAndOutcome: byOutcome,
        balancerAnswers: sum(Object.values(byOutcome)),
        userPresentMeanSlotWaitMs: { steady: meanWaitMs(before, between), spike: meanWaitMs(between, after) },
        cpuPercentOfCore,
      };
      runs.push(r);
      progress(
        `#${repetition}: user-present p99 ${r.steady.userPresent.p99Ms.toFixed(0)} ms steady → ${r.spike.userPresent.p99Ms.toFixed(0)} ms in the spike, ` +
          `refused ${sum(Object.values(r.spike.userPresent.rejectedByCode))}; background in the spike: sent ${r.spike.background.sent}, ran ${r.spike.background.ran}, ` +
          `refused ${JSON.stringify(r.spike.background.rejectedByCode)}; the balancer answered ${r.balancerAnswers} of ${r.sent} sent`,
      );
      await sleep(settings.pauseMs, signal);
    }
    return {
      ...run.header(),
      nominalCapacityTasksPerSecond: nominalCapacity,
      capacityTasksPerSecond: capacity,
      ...summarise(runs, figures(userLatencies.steady), figures(userLatencies.spike)),
    };
  } finally {
    await cleanups.runAll();
  }
}

function summarise(
  runs: readonly PriorityRun[],
  steady: Figures,
  spike: Figures,
): Omit<PriorityResult, keyof RunHeader<'priority', PrioritySettings> | 'capacityTasksPerSecond' | 'nominalCapacityTasksPerSecond'> {
  const userPresentP99Ratio = spread(runs.map((r) => r.spike.userPresent.p99Ms / r.steady.userPresent.p99Ms));
  const pooledRatio = spike.p99Ms / steady.p99Ms;
  const userPresentRejected = sum(runs.flatMap((r) => [r.steady.userPresent, r.spike.userPresent].flatMap((p) => Object.values(p.rejectedByCode))));
  const backgroundRejectedByCode: Record<string, number> = {};
  for (const r of runs) {
    for (const phase of [r.steady.background, r.spike.background]) {
      for (const [code, count] of Object.entries(phase.rejectedByCode)) backgroundRejectedByCode[code] = (backgroundRejectedByCode[code] ?? 0) + count;
    }
  }
  // A clear error names what happened (HR_ERR_SHED, HR_ERR_QUEUE_FULL, HR_ERR_DEADLINE_EXCEEDED ...); a bare gRPC status does not.
  const unclearRefusals = sum(
    Object.entries(backgroundRejectedByCode)
      .filter(([code]) => !code.startsWith('HR_ERR_'))
      .map(([, count]) => count),
  );
  const sentMinusBalancerAnswers = sum(runs.map((r) => r.sent - r.balancerAnswers));
  const goalsFound: Goal[] = [
    {
      name: `user-present p99 in the spike over before it (all runs' tasks: ${spike.p99Ms.toFixed(0)} over ${steady.p99Ms.toFixed(0)} ms)`,
      target: `<= ${goals.userP99SpikeOverSteady}x`,
      measured: pooledRatio,
      digits: 2,
      met: pooledRatio <= goals.userP99SpikeOverSteady,
    },
    { name: 'user-present tasks shed or refused', target: '= 0', measured: userPresentRejected, met: userPresentRejected === 0 },
    {
      name: 'background refusals without a Headroom error code',
      target: '= 0',
      measured: unclearRefusals,
      met: unclearRefusals === 0,
    },
    {
      name: 'tasks sent minus final answers the balancer gave (each generator phase also waits for every answer)',
      target: '= 0',
      measured: Math.abs(sentMinusBalancerAnswers),
      met: sentMinusBalancerAnswers === 0,
    },
  ];
  return {
    runs: [...runs],
    userPresentSteady: steady,
    userPresentSpike: spike,
    userPresentP99PooledRatio: pooledRatio,
    userPresentP99SteadyMs: spread(runs.map((r) => r.steady.userPresent.p99Ms)),
    userPresentP99SpikeMs: spread(runs.map((r) => r.spike.userPresent.p99Ms)),
    userPresentP99Ratio,
    userPresentRejected,
    backgroundRejectedByCode,
    sentMinusBalancerAnswers,
    goals: goalsFound,
  };
}
