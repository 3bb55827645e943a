/**
 * overhead: what the balancer costs. One balancer and two echo workers, each its own process,
 * on the shared Redis; a load generator in a fourth process.
 *   1. ceiling: closed loop through Balancer.Submit (and straight to the workers, for reference);
 *   2. added latency: open loop at a fixed rate, alternating direct (Worker.Execute on the same
 *      workers) and through the balancer, several repetitions; added = balancer - direct.
 */
import { benchPlace, startProcessFleet, type ProcessFleet } from './fleet/headroom-fleet';
import { Cleanups } from './fleet/cleanups';
import { sampleCpu } from './fleet/cpu-usage';
import { LoadGenerator } from './load/generator';
import type { PhaseResult, PhaseSpec, TargetName } from './load/protocol';
import type { Goal } from './report/goals';
import type { LatencySummary } from './report/histogram';
import { startRun, type BenchmarkOptions, type RunHeader } from './report/run-header';
import { failedCalls, spread, type Spread } from './report/stats';

export interface OverheadSettings {
  workerCount: number;
  maxParallelismPerWorker: number;
  payloadBytes: number;
  callTimeoutMs: number;
  ceiling: {
    /** Calls outstanding; the measured ceiling is the best balancer figure over these. */
    concurrencies: readonly number[];
    warmupMs: number;
    durationMs: number;
  };
  latency: {
    /** The rate the goals are judged at. */
    goalTasksPerSecond: number;
    /** Further rates, as shares of the measured balancer ceiling. */
    ceilingShares: readonly number[];
    repetitions: number;
    /** Unmeasured calls at the same rate before each measured window. */
    leadInMs: number;
    durationMs: number;
    maxOutstanding: number;
  };
}

export const fullSettings: OverheadSettings = {
  workerCount: 2,
  maxParallelismPerWorker: 64,
  payloadBytes: 16,
  callTimeoutMs: 10_000,
  // 128 = the workers' slots; 64 stays below them; 256 overfills them, so tasks wait in the balancer's queue.
  // Windows sized so that all of `npm run bench` fits in 15 minutes on this machine.
  ceiling: { concurrencies: [64, 128, 256], warmupMs: 1_000, durationMs: 3_000 },
  latency: { goalTasksPerSecond: 1_000, ceilingShares: [0.25, 0.5, 0.75], repetitions: 3, leadInMs: 500, durationMs: 2_500, maxOutstanding: 2_048 },
};

/** Seconds in all: proves the benchmark still runs end to end, measures nothing worth reading. */
export const smokeSettings: OverheadSettings = {
  ...fullSettings,
  ceiling: { concurrencies: [8], warmupMs: 200, durationMs: 1_000 },
  latency: { goalTasksPerSecond: 100, ceilingShares: [], repetitions: 1, leadInMs: 200, durationMs: 1_000, maxOutstanding: 256 },
};

export const goals = { ceilingTasksPerSecond: 4_000, addedP50Ms: 1, addedP99Ms: 5 } as const;

export interface Measurement {
  target: TargetName;
  tasksPerSecond: number;
  /** Open loop: from when each call was due. Closed loop: from when it was sent. */
  latency: LatencySummary;
  /** Open loop: how late the generator sent calls. */
  sendLag: LatencySummary;
  errorsByCode: Record<string, number>;
  dropped: number;
  /** Per process, percent of one core during the phase (Linux /proc). */
  cpuPercentOfCore: Record<string, number>;
}

export interface CeilingRun extends Measurement {
  concurrency: number;
}

export interface LatencyLevel {
  label: string;
  tasksPerSecond: number;
  /** The level the latency goals are judged at. */
  isGoalLevel: boolean;
  repetitions: { direct: Measurement; balancer: Measurement }[];
  directP50Ms: Spread;
  directP99Ms: Spread;
  balancerP50Ms: Spread;
  balancerP99Ms: Spread;
  /** Balancer minus direct, per repetition, then median and range over repetitions. */
  addedP50Ms: Spread;
  addedP99Ms: Spread;
  /** Failed and dropped calls, all repetitions and both paths. */
  failedCalls: number;
}

export interface OverheadResult extends RunHeader<'overhead', OverheadSettings> {
  ceiling: { runs: CeilingRun[]; balancerTasksPerSecond: number; directTasksPerSecond: number };
  latency: LatencyLevel[];
  goals: Goal[];
}

export interface OverheadOptions extends BenchmarkOptions {
  /** Run the balancer under --cpu-prof, writing the profile here when it exits. */
  balancerCpuProfileDir?: string;
}

const failures = failedCalls;

export async function runOverhead(options: OverheadOptions): Promise<OverheadResult> {
  const settings = options.smoke ? smokeSettings : fullSettings;
  const run = await startRun('overhead', options, settings);
  const { keyPrefix, logDir } = benchPlace('overhead');
  const cleanups = new Cleanups();
  const { progress, signal } = options;

  try {
    progress(`starting 1 balancer and ${settings.workerCount} workers (key prefix ${keyPrefix}, logs in ${logDir})`);
    const fleet: ProcessFleet = await startProcessFleet(
      keyPrefix,
      {
        redisUrl: options.redisUrl,
        workers: [{ cluster: 'baseline', count: settings.workerCount, maxParallelismPerWorker: settings.maxParallelismPerWorker }],
        logDir,
        balancerNodeFlags: options.balancerCpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${options.balancerCpuProfileDir}`] : [],
      },
      cleanups.register,
    );
    signal.throwIfAborted();
    const generator = await LoadGenerator.start({
      balancerAddresses: fleet.balancers.map((b) => b.address),
      workers: fleet.workers.map((w) => ({ address: w.address, cluster: w.cluster, workerId: w.workerId })),
      task: { integration: 'echo', payload: 'a'.repeat(settings.payloadBytes) },
      callTimeoutMs: settings.callTimeoutMs,
    });
    cleanups.register(() => generator.close());
    const pids = new Map([...fleet.pids, ['generator', generator.pid]]);
    if (run.redisPid !== undefined) pids.set('redis', run.redisPid);

    const measure = async (spec: PhaseSpec): Promise<Measurement> => {
      const cpu = sampleCpu(pids);
      const result: PhaseResult = await generator.run(spec, signal);
      return {
        target: spec.target,
        tasksPerSecond: result.tasksPerSecond,
        latency: result.latency,
        sendLag: result.sendLag,
        errorsByCode: result.errorsByCode,
        dropped: result.dropped,
        cpuPercentOfCore: cpu(),
      };
    };

    // 1. Ceiling. Direct calls are pinned to workers lane by lane, so more lanes than the
    // workers' slots would only be refused: cap them there.
    const capacity = settings.workerCount * settings.maxParallelismPerWorker;
    const ceilingRuns: CeilingRun[] = [];
    for (const concurrency of settings.ceiling.concurrencies) {
      for (const target of ['direct', 'balancer'] as const) {
        const lanes = target === 'direct' ? Math.min(concurrency, capacity) : concurrency;
        if (ceilingRuns.some((run) => run.target === target && run.concurrency === lanes)) continue;
        const { warmupMs, durationMs } = settings.ceiling;
        const measurement = await measure({ kind: 'closed', target, concurrency: lanes, warmupMs, durationMs, maxCalls: Math.ceil(((warmupMs + durationMs) / 1000) * 100_000) });
        ceilingRuns.push({ ...measurement, concurrency: lanes });
        progress(`ceiling ${target.padEnd(8)} ${String(lanes).padStart(4)} outstanding: ${Math.round(measurement.tasksPerSecond)} tasks/s, p50 ${measurement.latency.p50Ms.toFixed(2)} ms, failed ${failures(measurement)}`);
      }
    }
    const best = (target: TargetName) => Math.max(0, ...ceilingRuns.filter((run) => run.target === target).map((run) => run.tasksPerSecond));
    const balancerCeiling = best('balancer');

    // 2. Added latency, open loop, alternating direct and balancer.
    const levels = [
      { label: `${settings.latency.goalTasksPerSecond} tasks/s`, tasksPerSecond: settings.latency.goalTasksPerSecond, isGoalLevel: true },
      ...settings.latency.ceilingShares
        .map((share) => ({ label: `${Math.round(share * 100)}% of ceiling`, tasksPerSecond: Math.round(share * balancerCeiling), isGoalLevel: false }))
        .filter((level) => level.tasksPerSecond > 0),
    ];
    const latency: LatencyLevel[] = [];
    for (const level of levels) {
      const repetitions: LatencyLevel['repetitions'] = [];
      for (let repetition = 1; repetition <= settings.latency.repetitions; repetition++) {
        const run = (target: TargetName) =>
          measure({
            kind: 'open',
            target,
            tasksPerSecond: level.tasksPerSecond,
            warmupMs: settings.latency.leadInMs,
            durationMs: settings.latency.durationMs,
            maxOutstanding: settings.latency.maxOutstanding,
          });
        const direct = await run('direct');
        const balancer = await run('balancer');
        repetitions.push({ direct, balancer });
        progress(
          `latency ${level.label} (${level.tasksPerSecond} tasks/s) #${repetition}: p50 ${direct.latency.p50Ms.toFixed(2)} → ${balancer.latency.p50Ms.toFixed(2)} ms, ` +
            `p99 ${direct.latency.p99Ms.toFixed(2)} → ${balancer.latency.p99Ms.toFixed(2)} ms (direct → balancer), failed ${failures(direct) + failures(balancer)}`,
        );
      }
      const of = (pick: (r: { direct: Measurement; balancer: Measurement }) => number) => spread(repetitions.map(pick));
      latency.push({
        ...level,
        repetitions,
        directP50Ms: of((r) => r.direct.latency.p50Ms),
        directP99Ms: of((r) => r.direct.latency.p99Ms),
        balancerP50Ms: of((r) => r.balancer.latency.p50Ms),
        balancerP99Ms: of((r) => r.balancer.latency.p99Ms),
        addedP50Ms: of((r) => r.balancer.latency.p50Ms - r.direct.latency.p50Ms),
        addedP99Ms: of((r) => r.balancer.latency.p99Ms - r.direct.latency.p99Ms),
        failedCalls: repetitions.reduce((sum, r) => sum + failures(r.direct) + failures(r.balancer), 0),
      });
    }

    const goalLevel = latency.find((level) => level.isGoalLevel);
    const goalResults: Goal[] = [
      { name: 'ceiling through the balancer', target: `>= ${goals.ceilingTasksPerSecond} tasks/s`, measured: balancerCeiling, met: balancerCeiling >= goals.ceilingTasksPerSecond },
    ];
    if (goalLevel) {
      goalResults.push(
        { name: `added p50 at ${goalLevel.label}`, target: `<= ${goals.addedP50Ms} ms`, measured: goalLevel.addedP50Ms.median, met: goalLevel.addedP50Ms.median <= goals.addedP50Ms },
        { name: `added p99 at ${goalLevel.label}`, target: `<= ${goals.addedP99Ms} ms`, measured: goalLevel.addedP99Ms.median, met: goalLevel.addedP99Ms.median <= goals.addedP99Ms },
      );
    }
    return {
      ...run.header(),
      ceiling: { runs: ceilingRuns, balancerTasksPerSecond: balancerCeiling, directTasksPerSecond: best('direct') },
      latency,
      goals: goalResults,
    };
  } finally {
    await cleanups.runAll();
  }
}
