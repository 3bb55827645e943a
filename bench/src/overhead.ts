/**
 * overhead: what the balancer costs. One balancer and two echo workers, each its own
 * process, on the shared Redis; HAProxy (leastconn) in front of the same workers; a load generator
 * in a process of its own, which also runs the proxyless client. Every path of overheadPaths in the
 * same run:
 *   1. ceiling: closed loop per path at several numbers of calls outstanding;
 *   2. added latency: open loop at a fixed rate, the paths alternating within each repetition;
 *      added = path - direct per repetition, then the median over repetitions;
 *   3. CPU per task: each process's CPU time over every measured window, over the tasks answered in it.
 */
import { execFileSync } from 'node:child_process';
import * as os from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { Ledger, connectRedis, waitUntilReady } from '@headroom/fleet';
import { benchPlace, startProcessFleet, type ProcessFleet } from './fleet/headroom-fleet';
import { Cleanups } from './fleet/cleanups';
import { sampleMachineCpu } from './fleet/cpu-usage';
import { findHaproxy, startHaproxy, type HaproxyProcess } from './fleet/haproxy';
import { LoadGenerator } from './load/generator';
import type { PhaseResult, PhaseSpec, TargetName, Targets } from './load/protocol';
import { cpuGroups, cpuPerTask, overheadPaths, type CpuGroup, type CpuPerTask, type OverheadPath } from './overhead-paths';
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
    /** Before the first run: each path under closed-loop load this long, unmeasured, so that no path runs cold (JIT, connections). */
    firstWarmupPerPathMs: number;
    /** Calls outstanding; a path's ceiling is its best figure over these. */
    concurrencies: readonly number[];
    warmupMs: number;
    durationMs: number;
  };
  latency: {
    /** The goals are judged at the lower of these two rates. */
    goalRate: { maxTasksPerSecond: number; shareOfBalancerCeiling: number };
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
  ceiling: { firstWarmupPerPathMs: 2_000, concurrencies: [64, 128, 256], warmupMs: 1_000, durationMs: 3_000 },
  latency: {
    goalRate: { maxTasksPerSecond: 1_000, shareOfBalancerCeiling: 0.5 },
    ceilingShares: [0.25, 0.5, 0.75],
    repetitions: 3,
    leadInMs: 500,
    durationMs: 2_500,
    maxOutstanding: 2_048,
  },
};

/** Seconds in all: proves the benchmark still runs end to end, measures nothing worth reading. */
export const smokeSettings: OverheadSettings = {
  ...fullSettings,
  ceiling: { firstWarmupPerPathMs: 300, concurrencies: [8], warmupMs: 300, durationMs: 1_500 },
  latency: {
    goalRate: { maxTasksPerSecond: 100, shareOfBalancerCeiling: 0.5 },
    ceilingShares: [],
    repetitions: 1,
    leadInMs: 200,
    durationMs: 1_000,
    maxOutstanding: 256,
  },
};

/** The goals for the balancer. */
export const goals = { balancerCpuMicrosPerTask: 120, balancerCeilingShareOfDirect: 0.7, addedP50Ms: 2, addedP99Ms: 10 } as const;
/** The goals for the proxyless path (its added latency: at most HAProxy's). */
export const proxylessGoals = { ceilingShareOfDirect: 0.9 } as const;

export interface Measurement {
  target: TargetName;
  tasksPerSecond: number;
  /** Open loop: from when each call was due. Closed loop: from when it was sent. */
  latency: LatencySummary;
  /** Open loop: how late the generator sent calls. */
  sendLag: LatencySummary;
  errorsByCode: Record<string, number>;
  dropped: number;
  /** Each process's CPU time over the measured window, per task answered in it (Linux /proc). */
  cpu?: CpuPerTask;
  /** How busy the whole machine was during the phase, in percent of one core: ours and everyone else's work. */
  machineBusyPercentOfCore?: number;
  /** HAProxy path: the requests HAProxy sent to each worker during the phase, warm-up included (its `stot` counters). */
  haproxyRequestsByServer?: Record<string, number>;
}

export interface CeilingRun extends Measurement {
  concurrency: number;
}

export interface PathLatency {
  target: TargetName;
  label: string;
  p50Ms: Spread;
  p99Ms: Spread;
  /** This path minus direct in the same repetition, then median and range over repetitions; missing for direct. */
  addedP50Ms?: Spread;
  addedP99Ms?: Spread;
  /** Median over repetitions, per process group. */
  cpuMicrosPerTask: Partial<Record<CpuGroup, number>>;
  /** Failed and dropped calls, all repetitions. */
  failedCalls: number;
}

export interface LatencyLevel {
  label: string;
  tasksPerSecond: number;
  /** The level the latency goals are judged at. */
  isGoalLevel: boolean;
  /** Each repetition's measurements, in the order of `paths`. */
  repetitions: Measurement[][];
  paths: PathLatency[];
}

/** The ledger after the last phase: every lease the balancer and the proxyless client took, given back. */
export interface LedgerAtEnd {
  cluster: string;
  totalCapacity: number;
  totalFree: number;
  leases: number;
  /** How long after the last phase it was read (it waits up to ledgerSettleTimeoutMs for leases to reach 0). */
  readAfterMs: number;
}

export interface OverheadResult extends RunHeader<'overhead', OverheadSettings> {
  /** The paths measured, in the order each repetition ran them. */
  paths: OverheadPath[];
  /** The HAProxy that ran, or why its path was left out. */
  haproxy: { binary: string; version: string } | { skipped: string };
  /** 1-minute load average when the run ended (the start's is in `machine`). */
  loadAverageAtEnd1m: number;
  ceiling: {
    runs: CeilingRun[];
    /** Per path, its best closed-loop run. */
    best: Partial<Record<TargetName, CeilingRun>>;
  };
  latency: LatencyLevel[];
  ledgerAtEnd: LedgerAtEnd;
  goals: Goal[];
  /** Goals this run could not judge, and why. */
  notJudged: string[];
}

export interface OverheadOptions extends BenchmarkOptions {
  /** Run the balancer under --cpu-prof, writing the profile here when it exits. */
  balancerCpuProfileDir?: string;
}

const failures = failedCalls;
/** Releases are batched and asynchronous: the ledger may hold a lease a moment after its task was answered. */
const ledgerSettleTimeoutMs = 3_000;
const medianOf = (values: readonly number[]) => spread(values).median;

function haproxyVersion(binary: string): string {
  try {
    return /version (\S+)/.exec(execFileSync(binary, ['-v'], { encoding: 'utf8', timeout: 5_000 }))?.[1] ?? 'unknown';
  } catch {
    return 'unknown';
  }
}

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
        // HAProxy picks the worker and cannot name it in the body.
        workerArgs: ['--accept-unaddressed'],
        balancerNodeFlags: options.balancerCpuProfileDir ? ['--cpu-prof', `--cpu-prof-dir=${options.balancerCpuProfileDir}`] : [],
      },
      cleanups.register,
    );
    signal.throwIfAborted();

    const haproxyBinary = findHaproxy();
    let haproxy: HaproxyProcess | undefined;
    let haproxyInfo: OverheadResult['haproxy'];
    const serverNames = fleet.workers.map((_worker, index) => `w${index + 1}`);
    if (haproxyBinary) {
      haproxy = await startHaproxy(
        haproxyBinary,
        fleet.workers.map((worker, index) => ({ name: serverNames[index]!, address: worker.address, maxConcurrentRequests: settings.maxParallelismPerWorker })),
        cleanups.register,
      );
      haproxyInfo = { binary: haproxyBinary, version: haproxyVersion(haproxyBinary) };
      progress(`HAProxy ${haproxyInfo.version} (${haproxyBinary}) on ${haproxy.address}, pid ${haproxy.pid}`);
    } else {
      haproxyInfo = { skipped: 'haproxy is not installed (not on the PATH, not at /usr/sbin/haproxy): its path was left out' };
      progress(haproxyInfo.skipped);
    }
    const paths = overheadPaths.filter((path) => path.target !== 'haproxy' || haproxy);

    const targets: Targets = {
      balancerAddresses: fleet.balancers.map((b) => b.address),
      workers: fleet.workers.map((w) => ({ address: w.address, cluster: w.cluster, workerId: w.workerId })),
      ...(haproxy ? { haproxy: { address: haproxy.address } } : {}),
      ledger: { redisUrl: options.redisUrl, keyPrefix },
      task: { integration: 'echo', payload: 'a'.repeat(settings.payloadBytes) },
      callTimeoutMs: settings.callTimeoutMs,
    };
    const generator = await LoadGenerator.start(targets);
    cleanups.register(() => generator.close());
    const pids = new Map([...fleet.pids, ['generator', generator.pid]]);
    if (run.redisPid !== undefined) pids.set('redis', run.redisPid);
    if (haproxy) pids.set('haproxy', haproxy.pid);
    const cpuOf = Object.fromEntries(pids);

    const measure = async (spec: PhaseSpec): Promise<Measurement> => {
      const machineCpu = sampleMachineCpu(run.header().machine.nproc);
      const requestsBefore = spec.target === 'haproxy' ? await haproxy?.requestsByServer() : undefined;
      const result: PhaseResult = await generator.run({ ...spec, cpuOf }, signal);
      const requestsAfter = requestsBefore ? await haproxy?.requestsByServer() : undefined;
      const machineBusy = machineCpu();
      return {
        target: spec.target,
        tasksPerSecond: result.tasksPerSecond,
        latency: result.latency,
        sendLag: result.sendLag,
        errorsByCode: result.errorsByCode,
        dropped: result.dropped,
        ...(result.cpu ? { cpu: cpuPerTask(result.cpu) } : {}),
        ...(machineBusy !== undefined ? { machineBusyPercentOfCore: machineBusy } : {}),
        ...(requestsBefore && requestsAfter
          ? {
              haproxyRequestsByServer: Object.fromEntries(
                Object.entries(requestsAfter).map(([server, total]) => [server, total - (requestsBefore[server] ?? 0)]),
              ),
            }
          : {}),
      };
    };
    const cpuLine = (m: Measurement) =>
      cpuGroups
        .filter((group) => m.cpu?.microsPerTask[group] !== undefined)
        .map((group) => `${group} ${Math.round(m.cpu!.microsPerTask[group]!)}`)
        .join(', ');

    // 1. Ceiling, each path at each number of calls outstanding, after every path has warmed up.
    const capacity = settings.workerCount * settings.maxParallelismPerWorker;
    for (const path of paths) {
      const lanes = Math.min(settings.ceiling.concurrencies[0] ?? 1, capacity);
      const warmupMs = settings.ceiling.firstWarmupPerPathMs;
      await generator.run(
        { kind: 'closed', target: path.target, concurrency: lanes, warmupMs, durationMs: 0, maxCalls: Math.ceil((warmupMs / 1000) * 100_000) },
        signal,
      );
    }
    progress(`each path warmed up for ${settings.ceiling.firstWarmupPerPathMs} ms`);
    const ceilingRuns: CeilingRun[] = [];
    for (const concurrency of settings.ceiling.concurrencies) {
      for (const path of paths) {
        const lanes = path.lanesCappedAtSlots ? Math.min(concurrency, capacity) : concurrency;
        if (ceilingRuns.some((run) => run.target === path.target && run.concurrency === lanes)) continue;
        const { warmupMs, durationMs } = settings.ceiling;
        const measurement = await measure({
          kind: 'closed',
          target: path.target,
          concurrency: lanes,
          warmupMs,
          durationMs,
          maxCalls: Math.ceil(((warmupMs + durationMs) / 1000) * 100_000),
        });
        ceilingRuns.push({ ...measurement, concurrency: lanes });
        progress(
          `ceiling ${path.target.padEnd(9)} ${String(lanes).padStart(4)} outstanding: ${Math.round(measurement.tasksPerSecond)} tasks/s, p50 ${measurement.latency.p50Ms.toFixed(2)} ms, ` +
            `failed ${failures(measurement)}; CPU µs/task: ${cpuLine(measurement)}`,
        );
      }
    }
    const best: OverheadResult['ceiling']['best'] = {};
    for (const runOfPath of ceilingRuns) {
      const current = best[runOfPath.target];
      if (!current || runOfPath.tasksPerSecond > current.tasksPerSecond) best[runOfPath.target] = runOfPath;
    }
    const balancerCeiling = best.balancer?.tasksPerSecond ?? 0;

    // 2. Latency, open loop, the paths alternating within each repetition.
    const { goalRate } = settings.latency;
    const goalTasksPerSecond = Math.round(Math.min(goalRate.maxTasksPerSecond, goalRate.shareOfBalancerCeiling * balancerCeiling));
    const atShare = (share: number) => ({
      label: `${Math.round(share * 100)}% of ceiling`,
      tasksPerSecond: Math.round(share * balancerCeiling),
      isGoalLevel: false,
    });
    const goalLevel =
      goalTasksPerSecond === goalRate.maxTasksPerSecond
        ? { label: `${goalTasksPerSecond} tasks/s`, tasksPerSecond: goalTasksPerSecond, isGoalLevel: true }
        : { ...atShare(goalRate.shareOfBalancerCeiling), isGoalLevel: true };
    const levels = [goalLevel, ...settings.latency.ceilingShares.map(atShare)]
      .filter((level) => level.tasksPerSecond > 0)
      .filter((level, index, all) => all.findIndex((other) => other.tasksPerSecond === level.tasksPerSecond) === index);
    const latency: LatencyLevel[] = [];
    for (const level of levels) {
      const repetitions: Measurement[][] = [];
      for (let repetition = 1; repetition <= settings.latency.repetitions; repetition++) {
        const measurements: Measurement[] = [];
        for (const path of paths) {
          measurements.push(
            await measure({
              kind: 'open',
              target: path.target,
              tasksPerSecond: level.tasksPerSecond,
              warmupMs: settings.latency.leadInMs,
              durationMs: settings.latency.durationMs,
              maxOutstanding: settings.latency.maxOutstanding,
            }),
          );
        }
        repetitions.push(measurements);
        progress(
          `latency ${level.label} (${level.tasksPerSecond} tasks/s) #${repetition}: ` +
            measurements.map((m) => `${m.target} p50 ${m.latency.p50Ms.toFixed(2)} p99 ${m.latency.p99Ms.toFixed(2)} ms`).join('; ') +
            `; failed ${measurements.reduce((sum, m) => sum + failures(m), 0)}`,
        );
      }
      latency.push({ ...level, repetitions, paths: paths.map((path, index) => pathLatency(path, index, repetitions)) });
    }
    const ledgerAtEnd = await readLedgerAtEnd(options.redisUrl, keyPrefix, fleet.workers[0]!.cluster);
    progress(
      `ledger after the last phase: ${ledgerAtEnd.leases} leases, ${ledgerAtEnd.totalFree} of ${ledgerAtEnd.totalCapacity} slots free (read ${ledgerAtEnd.readAfterMs} ms after)`,
    );

    return {
      ...run.header(),
      paths: [...paths],
      haproxy: haproxyInfo,
      loadAverageAtEnd1m: Math.round(os.loadavg()[0]! * 100) / 100,
      ceiling: { runs: ceilingRuns, best },
      latency,
      ledgerAtEnd,
      ...judge(
        paths,
        best,
        latency.find((level) => level.isGoalLevel),
      ),
    };
  } finally {
    await cleanups.runAll();
  }
}

/** The cluster's leases and free slots once they settle (or after ledgerSettleTimeoutMs). */
async function readLedgerAtEnd(redisUrl: string, keyPrefix: string, cluster: string): Promise<LedgerAtEnd> {
  const redis = connectRedis(redisUrl);
  try {
    await waitUntilReady(redis, redisUrl);
    const ledger = new Ledger(redis, { keyPrefix });
    const startedAt = Date.now();
    for (;;) {
      const snapshot = await ledger.snapshot(cluster);
      const readAfterMs = Date.now() - startedAt;
      if ((snapshot.leases === 0 && snapshot.totalFree === snapshot.totalCapacity) || readAfterMs >= ledgerSettleTimeoutMs) {
        return { cluster, totalCapacity: snapshot.totalCapacity, totalFree: snapshot.totalFree, leases: snapshot.leases, readAfterMs };
      }
      await sleep(50);
    }
  } finally {
    redis.disconnect();
  }
}

/** One path's figures at one level, over the repetitions (direct is index 0 of each). */
function pathLatency(path: OverheadPath, index: number, repetitions: readonly Measurement[][]): PathLatency {
  const of = (pick: (m: Measurement, direct: Measurement) => number) => spread(repetitions.map((measurements) => pick(measurements[index]!, measurements[0]!)));
  const cpuMicrosPerTask: PathLatency['cpuMicrosPerTask'] = {};
  for (const group of cpuGroups) {
    const values = repetitions.map((measurements) => measurements[index]!.cpu?.microsPerTask[group]).filter((value): value is number => value !== undefined);
    if (values.length > 0) cpuMicrosPerTask[group] = medianOf(values);
  }
  return {
    target: path.target,
    label: path.label,
    p50Ms: of((m) => m.latency.p50Ms),
    p99Ms: of((m) => m.latency.p99Ms),
    ...(path.target === 'direct'
      ? {}
      : { addedP50Ms: of((m, direct) => m.latency.p50Ms - direct.latency.p50Ms), addedP99Ms: of((m, direct) => m.latency.p99Ms - direct.latency.p99Ms) }),
    cpuMicrosPerTask,
    failedCalls: repetitions.reduce((sum, measurements) => sum + failures(measurements[index]!), 0),
  };
}

/** The goals, met or not, and those this run cannot judge. */
function judge(
  paths: readonly OverheadPath[],
  best: OverheadResult['ceiling']['best'],
  goalLevel: LatencyLevel | undefined,
): { goals: Goal[]; notJudged: string[] } {
  const results: Goal[] = [];
  const notJudged: string[] = [];
  // By name, not TargetName: the proxyless path's goals are judged once it is a target.
  const atGoal = (target: string) => goalLevel?.paths.find((path) => path.target === target);
  const bestOf = (target: string) => (best as Partial<Record<string, CeilingRun>>)[target];
  const directCeiling = best.direct?.tasksPerSecond ?? 0;
  const shareOfDirect = (target: string) => (directCeiling > 0 ? (bestOf(target)?.tasksPerSecond ?? 0) / directCeiling : 0);

  const balancerAtCeiling = best.balancer?.cpu?.microsPerTask.balancer;
  if (balancerAtCeiling !== undefined) {
    results.push({
      name: `balancer CPU per task at its ceiling (${best.balancer!.concurrency} outstanding)`,
      target: `<= ${goals.balancerCpuMicrosPerTask} µs`,
      measured: balancerAtCeiling,
      met: balancerAtCeiling <= goals.balancerCpuMicrosPerTask,
    });
  }
  const balancer = atGoal('balancer');
  const balancerAtGoal = balancer?.cpuMicrosPerTask.balancer;
  if (goalLevel && balancerAtGoal !== undefined) {
    results.push({
      name: `balancer CPU per task at ${goalLevel.label}`,
      target: `<= ${goals.balancerCpuMicrosPerTask} µs`,
      measured: balancerAtGoal,
      met: balancerAtGoal <= goals.balancerCpuMicrosPerTask,
    });
  }
  results.push({
    name: 'ceiling through the balancer, share of direct',
    target: `>= ${goals.balancerCeilingShareOfDirect}x direct`,
    measured: shareOfDirect('balancer'),
    digits: 2,
    met: shareOfDirect('balancer') >= goals.balancerCeilingShareOfDirect,
  });
  if (goalLevel && balancer?.addedP50Ms && balancer.addedP99Ms) {
    results.push(
      {
        name: `balancer added p50 at ${goalLevel.label}`,
        target: `<= ${goals.addedP50Ms} ms`,
        measured: balancer.addedP50Ms.median,
        met: balancer.addedP50Ms.median <= goals.addedP50Ms,
      },
      {
        name: `balancer added p99 at ${goalLevel.label}`,
        target: `<= ${goals.addedP99Ms} ms`,
        measured: balancer.addedP99Ms.median,
        met: balancer.addedP99Ms.median <= goals.addedP99Ms,
      },
    );
  }

  const haproxy = atGoal('haproxy');
  if (paths.some((path) => path.target === 'haproxy')) {
    const haproxyAtCeiling = bestOf('haproxy')?.cpu?.microsPerTask.haproxy;
    if (haproxyAtCeiling !== undefined)
      results.push({
        name: `HAProxy CPU per task at its ceiling (${bestOf('haproxy')!.concurrency} outstanding)`,
        target: 'none: the anchor (µs)',
        measured: haproxyAtCeiling,
        met: 'stated',
      });
    const haproxyAtGoal = haproxy?.cpuMicrosPerTask.haproxy;
    if (goalLevel && haproxyAtGoal !== undefined)
      results.push({ name: `HAProxy CPU per task at ${goalLevel.label}`, target: 'none: the anchor (µs)', measured: haproxyAtGoal, met: 'stated' });
    results.push({
      name: 'ceiling through HAProxy, share of direct',
      target: 'none: the anchor (x direct)',
      measured: shareOfDirect('haproxy'),
      digits: 2,
      met: 'stated',
    });
    if (goalLevel && haproxy?.addedP50Ms && haproxy.addedP99Ms) {
      results.push(
        { name: `HAProxy added p50 at ${goalLevel.label}`, target: 'none: the anchor (ms)', measured: haproxy.addedP50Ms.median, met: 'stated' },
        { name: `HAProxy added p99 at ${goalLevel.label}`, target: 'none: the anchor (ms)', measured: haproxy.addedP99Ms.median, met: 'stated' },
      );
    }
  }

  const proxyless = atGoal('proxyless');
  if (paths.some((path) => path.target === 'proxyless')) {
    results.push({
      name: 'ceiling of the proxyless client, share of direct',
      target: `>= ${proxylessGoals.ceilingShareOfDirect}x direct`,
      measured: shareOfDirect('proxyless'),
      digits: 2,
      met: shareOfDirect('proxyless') >= proxylessGoals.ceilingShareOfDirect,
    });
    if (goalLevel && proxyless?.addedP50Ms && proxyless.addedP99Ms && haproxy?.addedP50Ms && haproxy.addedP99Ms) {
      results.push(
        {
          name: `proxyless added p50 at ${goalLevel.label}`,
          target: `<= HAProxy's (${haproxy.addedP50Ms.median.toFixed(2)} ms)`,
          measured: proxyless.addedP50Ms.median,
          met: proxyless.addedP50Ms.median <= haproxy.addedP50Ms.median,
        },
        {
          name: `proxyless added p99 at ${goalLevel.label}`,
          target: `<= HAProxy's (${haproxy.addedP99Ms.median.toFixed(2)} ms)`,
          measured: proxyless.addedP99Ms.median,
          met: proxyless.addedP99Ms.median <= haproxy.addedP99Ms.median,
        },
      );
    } else {
      notJudged.push("proxyless added latency <= HAProxy's: needs both paths measured at the goal level");
    }
    // The client's routing work runs in the caller: the generator's CPU over what it spends calling the workers straight.
    const directGenerator = atGoal('direct')?.cpuMicrosPerTask.generator;
    const proxylessGenerator = proxyless?.cpuMicrosPerTask.generator;
    if (goalLevel && directGenerator !== undefined && proxylessGenerator !== undefined) {
      results.push({
        name: `proxyless client's routing CPU in the caller at ${goalLevel.label} (generator µs/task, proxyless − direct)`,
        target: 'none: stated (µs)',
        measured: proxylessGenerator - directGenerator,
        met: 'stated',
      });
    }
  }
  return { goals: results, notJudged };
}
