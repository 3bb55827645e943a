/**
 * scale: what one Redis can carry, from measured costs. On a private redis-server of
 * its own (so nobody else's commands count):
 *   1. scripts alone: this process calls the ledger's scripts (reserve, release, heartbeat of a
 *      worker running tasks, sweep) through the real Ledger, a fixed number of times each, and
 *      reads Redis's own accounting (INFO commandstats: time in the script; INFO cpu: its main
 *      thread's CPU, parsing and network included);
 *   2. real processes: workers alone, idle; then with balancers, idle; then under open-loop load.
 *      The main thread's CPU per worker-second, per balancer-second and per task is the model's input.
 * The model: Redis runs commands on one thread, so a deployment fits while the sum of those costs
 * stays under a share of one core.
 *   3. fleet scale (scale/fleet-scale.ts): the ledger on a fresh private redis-server, with 4,000
 *      simulated workers of 30 slots and 20 simulated balancers sending what real ones send, each on
 *      its own connection, under tasks of seconds: per task, per idle and per busy worker-second,
 *      and what one Redis carries at half its thread.
 */
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { sleep } from '@headroom/common';
import { Ledger } from '@headroom/fleet';
import { findOnPath, startPrivateRedis } from '@headroom/testkit';
import { Cleanups } from './fleet/cleanups';
import { benchKeyPrefix, benchPlace, startProcessFleet } from './fleet/headroom-fleet';
import { LoadGenerator } from './load/generator';
import type { Goal } from './report/goals';
import { startRun, type BenchmarkOptions, type RunHeader } from './report/run-header';
import { failedCalls, spread, type Spread } from './report/stats';
import type { FleetScaleResult, FleetScaleSettings } from './scale/fleet-scale';
import { runFleetScale } from './scale/fleet-scale-runner';
import { fleetScaleGoals } from './scale/fleet-scale-summary';
import { realFleetTimings } from './scale/real-timings';
import { readAccounting, spentBetween, type RedisSpent } from './scale/redis-accounting';

export interface ScaleSettings {
  scripts: {
    /** Workers registered in the ledger while the scripts run. */
    workers: number;
    /** Lease ids each heartbeat carries: a worker at max parallelism 30, full. */
    leasesPerHeartbeat: number;
    /** Calls of each script per repetition. */
    callsPerScript: number;
    /** Calls in flight at once from this process (one connection, as a balancer sends them). */
    concurrency: number;
    repetitions: number;
  };
  fleet: {
    workers: number;
    maxParallelismPerWorker: number;
    balancers: number;
    /** Each task sleeps this long in the worker (demo handler). */
    taskSleepMs: number;
    tasksPerSecond: number;
    /** Workers heartbeat every second and report their figures every 2 s: a window of 3 s or more holds at least one of each. */
    idleWindowMs: number;
    loadLeadInMs: number;
    loadWindowMs: number;
    repetitions: number;
  };
  /** Share of Redis's one thread a deployment may plan to use: the rest is for bursts, queues waking up (pub/sub) and persistence. */
  plannedShareOfCore: number;
  fleetScale: FleetScaleSettings;
}

const fleetSim = {
  slotsPerWorker: 30,
  ...realFleetTimings(),
  userPresentShare: 0.1,
  durations: { medianMs: 2_000, p99OverMedian: 10 },
  // Latency summaries count per integration: a fleet of bank integrations has a few dozen; each worker's tasks spread over them.
  integrations: 20,
  integrationLimits: 'none' as const,
  maxOutstandingReserves: 8_000,
  connectConcurrency: 200,
};

export const fullSettings: ScaleSettings = {
  scripts: { workers: 100, leasesPerHeartbeat: 30, callsPerScript: 3_000, concurrency: 16, repetitions: 3 },
  // 250 tasks/s: well under what the fleet and this machine carry, so that tasks do not queue (queued tasks add pub/sub to the cost).
  fleet: {
    workers: 8,
    maxParallelismPerWorker: 16,
    balancers: 2,
    taskSleepMs: 10,
    tasksPerSecond: 250,
    idleWindowMs: 3_000,
    loadLeadInMs: 1_000,
    loadWindowMs: 3_000,
    repetitions: 3,
  },
  plannedShareOfCore: 0.5,
  // The target fleet at rising rates, then at the rate its costs say takes half the thread. The harness (one Node process, 4,040 connections, on a
  // 2-core machine shared with Redis and other work) drives about 20,000 as a real fleet sends them (balancers batching): above
  // that it says so, and the figure at half a thread is extrapolated from the highest rate it drove.
  fleetScale: {
    sim: { ...fleetSim, workers: 4_000, balancers: 20 },
    // Half the fleet busy: 60,000 leases, as many as 18,000 tasks/s keep in flight.
    busyWorkers: 2_000,
    // Batches grow with the rate (a balancer's calls carry what came in their window): the cost per task falls as it rises.
    tasksPerSecond: [2_000, 5_000, 10_000, 20_000],
    loadAtPlannedShare: true,
    othersAtHighestRate: true,
    idleWindowMs: 2_000,
    loadWarmUpMs: 2_000,
    loadWindowMs: 3_000,
    windows: 2,
    repetitions: 2,
    plannedShareOfThread: 0.5,
    goalTasksPerSecond: 20_000,
  },
};

/** Seconds in all: proves the benchmark still runs end to end, measures nothing worth reading. */
export const smokeSettings: ScaleSettings = {
  scripts: { workers: 5, leasesPerHeartbeat: 3, callsPerScript: 100, concurrency: 4, repetitions: 1 },
  fleet: {
    workers: 2,
    maxParallelismPerWorker: 4,
    balancers: 1,
    taskSleepMs: 10,
    tasksPerSecond: 50,
    idleWindowMs: 1_000,
    loadLeadInMs: 200,
    loadWindowMs: 1_000,
    repetitions: 1,
  },
  plannedShareOfCore: 0.5,
  // A few hundred workers at the real periods; tasks enough that their cost stands out of the idle fleet's noise.
  fleetScale: {
    sim: { ...fleetSim, workers: 300, balancers: 4 },
    busyWorkers: 300,
    tasksPerSecond: [400, 800],
    loadAtPlannedShare: false,
    othersAtHighestRate: true,
    idleWindowMs: 500,
    loadWarmUpMs: 300,
    loadWindowMs: 700,
    windows: 2,
    repetitions: 1,
    plannedShareOfThread: 0.5,
    goalTasksPerSecond: 20_000,
  },
};

/** Calls (EVALSHA and EVAL) and their time: how a script reaches Redis. */
const scriptCalls = (spent: RedisSpent) => {
  const calls = (spent.commands.evalsha?.calls ?? 0) + (spent.commands.eval?.calls ?? 0);
  const usec = (spent.commands.evalsha?.usec ?? 0) + (spent.commands.eval?.usec ?? 0);
  return { calls, usec };
};

/** heartbeat-busy: of a worker running leasesPerHeartbeat tasks (it renews each lease); heartbeat-idle: of one running none. */
export const scriptNames = ['reserve', 'release', 'heartbeat-busy', 'heartbeat-idle', 'sweep'] as const;
export type ScriptName = (typeof scriptNames)[number];

export interface ScriptCost {
  script: ScriptName;
  /** Time inside the script (commandstats), per call. */
  usecPerCall: Spread;
  /** Redis's main-thread CPU per call: the script plus reading the request and writing the answer. */
  mainThreadCpuUsPerCall: Spread;
}

export interface FleetMeasurement {
  repetition: number;
  /** Main-thread CPU per second of each state, in microseconds: Redis with none of our processes (its own timers and our INFO readings) ... */
  emptyCpuUsPerSecond: number;
  workersIdleCpuUsPerSecond: number;
  fleetIdleCpuUsPerSecond: number;
  loadCpuUsPerSecond: number;
  tasks: number;
  tasksPerSecond: number;
  failedTasks: number;
  /** Commands per task under load, beyond the idle fleet's (from commandstats). */
  commandsPerTask: Record<string, number>;
  /** Commands per second of one idle worker. */
  commandsPerWorkerSecond: Record<string, number>;
  /** Derived: per worker-second, per balancer-second, per task. */
  perWorkerSecondUs: number;
  perBalancerSecondUs: number;
  perTaskUs: number;
}

export interface CapacityRow {
  label: string;
  redisShards: number;
  /** Per shard. */
  workers: number;
  balancers: number;
  /** Planned (plannedShareOfCore of each shard's thread) and absolute (the whole thread), in all shards together. */
  plannedTasksPerSecond: number;
  saturatedTasksPerSecond: number;
}

export interface ScaleResult extends RunHeader<'scale', ScaleSettings> {
  privateRedisVersion: string;
  scripts: ScriptCost[];
  fleetRuns: FleetMeasurement[];
  /** Of an idle worker (fleet measurement). */
  perWorkerSecondUs: Spread;
  /** What a worker's heartbeat costs more when every one of its leasesPerHeartbeat slots runs a task (scripts alone). */
  busyWorkerExtraUs: number;
  perBalancerSecondUs: Spread;
  perTaskUs: Spread;
  capacity: CapacityRow[];
  /** The ledger at 4,000 workers (part 3). */
  fleetScale: FleetScaleResult;
  goals: Goal[];
}

/** REDIS_URL is not used: the benchmark measures a private Redis of its own. */
export type ScaleOptions = BenchmarkOptions;

/** Runs `fn(i)` for i < count with `concurrency` calls in flight; bounded by count and by `timeoutMs`. */
export async function runCalls(count: number, concurrency: number, timeoutMs: number, fn: (i: number) => Promise<unknown>): Promise<void> {
  let next = 0;
  const giveUpAt = performance.now() + timeoutMs;
  const lane = async () => {
    while (next < count) {
      if (performance.now() > giveUpAt) throw new Error(`${count} calls did not finish within ${timeoutMs} ms`);
      await fn(next++);
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, lane));
}

const callsTimeoutMs = 60_000;
const cluster = 'baseline';

/** Part 1: each script alone, called through the real Ledger. */
async function measureScripts(redis: Redis, settings: ScaleSettings['scripts'], progress: (line: string) => void): Promise<ScriptCost[]> {
  const keyPrefix = benchKeyPrefix('scale');
  // Leases live long enough that none expires during a run; capacity enough that reserve always finds a slot.
  const ledger = new Ledger(redis, { keyPrefix });
  const workerIds = Array.from({ length: settings.workers }, (_unused, i) => `w${i}`);
  const heartbeat = (workerId: string, leaseIds: readonly string[]) =>
    ledger.heartbeat(cluster, {
      workerId,
      address: `127.0.0.1:${10_000 + workerIds.indexOf(workerId)}`,
      capacity: 1_000_000,
      draining: false,
      heldLeaseIds: leaseIds,
    });
  const samples = new Map<ScriptName, { usecPerCall: number[]; cpuPerCall: number[] }>(scriptNames.map((name) => [name, { usecPerCall: [], cpuPerCall: [] }]));
  const timed = async (script: ScriptName, calls: number, fn: (i: number) => Promise<unknown>) => {
    const before = await readAccounting(redis);
    await runCalls(calls, settings.concurrency, callsTimeoutMs, fn);
    const spent = spentBetween(before, await readAccounting(redis));
    // Per operation: reservations and releases go in batches (16 in flight here), heartbeats and sweeps one per call.
    const { usec } = scriptCalls(spent);
    samples.get(script)!.usecPerCall.push(usec / calls);
    samples.get(script)!.cpuPerCall.push(spent.mainThreadCpuUs / calls);
  };
  try {
    for (const workerId of workerIds) await heartbeat(workerId, []);
    for (let repetition = 1; repetition <= settings.repetitions; repetition++) {
      // reserve, then release what was reserved, then heartbeats of idle workers, then of workers each running leasesPerHeartbeat tasks, then sweeps; in turn.
      const leases: string[] = [];
      await timed('reserve', settings.callsPerScript, async () => {
        const reservation = await ledger.reserve(cluster, { priority: 'user', balancerId: 'bench', waitIfNone: false });
        if (reservation.ok) leases.push(reservation.leaseId);
      });
      await timed('release', leases.length, (i) => ledger.release(cluster, leases[i]!));
      await timed('heartbeat-idle', settings.callsPerScript, (i) => heartbeat(workerIds[i % workerIds.length]!, []));
      const running = new Map<string, string[]>();
      for (const workerId of workerIds) {
        const ids: string[] = [];
        for (let i = 0; i < settings.leasesPerHeartbeat; i++) {
          const reservation = await ledger.reserve(cluster, { priority: 'user', balancerId: 'bench', waitIfNone: false, targetWorkerId: workerId });
          if (reservation.ok) ids.push(reservation.leaseId);
        }
        running.set(workerId, ids);
      }
      await timed('heartbeat-busy', settings.callsPerScript, (i) => {
        const workerId = workerIds[i % workerIds.length]!;
        return heartbeat(workerId, running.get(workerId)!);
      });
      await timed('sweep', settings.callsPerScript, () => ledger.sweep(cluster, 3_000));
      for (const ids of running.values()) for (const id of ids) await ledger.release(cluster, id);
      progress(
        `scripts #${repetition}: ${scriptNames.map((name) => `${name} ${samples.get(name)!.usecPerCall.at(-1)!.toFixed(1)} µs in the script, ${samples.get(name)!.cpuPerCall.at(-1)!.toFixed(1)} µs of CPU`).join('; ')}`,
      );
    }
  } finally {
    for (const workerId of workerIds) await ledger.deregister(cluster, workerId).catch(() => undefined);
  }
  return scriptNames.map((script) => ({
    script,
    usecPerCall: spread(samples.get(script)!.usecPerCall),
    mainThreadCpuUsPerCall: spread(samples.get(script)!.cpuPerCall),
  }));
}

/** Part 2: real workers, then balancers too, idle; then under load. */
async function measureFleet(
  redisUrl: string,
  redis: Redis,
  settings: ScaleSettings['fleet'],
  repetition: number,
  signal: AbortSignal,
): Promise<FleetMeasurement> {
  const { keyPrefix, logDir } = benchPlace('scale');
  const cleanups = new Cleanups();
  const cpuPerSecond = async (windowMs: number) => {
    const before = await readAccounting(redis);
    const startedAt = performance.now();
    await sleep(windowMs, signal);
    const after = await readAccounting(redis);
    const spent = spentBetween(before, after);
    return { cpuUsPerSecond: spent.mainThreadCpuUs / ((performance.now() - startedAt) / 1000), spent };
  };
  try {
    const empty = await cpuPerSecond(settings.idleWindowMs);
    await startProcessFleet(
      keyPrefix,
      { redisUrl, workers: [{ cluster, count: settings.workers, maxParallelismPerWorker: settings.maxParallelismPerWorker }], balancerCount: 0, logDir },
      cleanups.register,
    );
    const workersIdle = await cpuPerSecond(settings.idleWindowMs);
    const balancers = await startProcessFleet(keyPrefix, { redisUrl, workers: [], balancerCount: settings.balancers, logDir }, cleanups.register);
    const fleetIdle = await cpuPerSecond(settings.idleWindowMs);
    const generator = await LoadGenerator.start({
      balancerAddresses: balancers.balancers.map((b) => b.address),
      workers: [],
      task: { integration: 'bank-a', payload: JSON.stringify({ sleepMs: settings.taskSleepMs }) },
      callTimeoutMs: 10_000,
    });
    cleanups.register(() => generator.close());
    const phase = generator.run(
      {
        kind: 'open',
        target: 'balancer',
        tasksPerSecond: settings.tasksPerSecond,
        warmupMs: settings.loadLeadInMs,
        durationMs: settings.loadWindowMs,
        maxOutstanding: 4_096,
      },
      signal,
    );
    // Its failure is reported where it is awaited, below.
    phase.catch(() => undefined);
    await sleep(settings.loadLeadInMs, signal);
    const load = await cpuPerSecond(settings.loadWindowMs);
    const result = await phase;
    const loadSeconds = settings.loadWindowMs / 1000;
    const tasks = result.tasksPerSecond * loadSeconds;
    const idleSeconds = settings.idleWindowMs / 1000;
    /** Calls of each command in `spent` beyond what `baseline` made in the same time, over `per`; our own readings (INFO) and the rare ones left out. */
    const extraCommands = (spent: RedisSpent, seconds: number, baseline: RedisSpent, baselineSeconds: number, per: number) => {
      const extra: Record<string, number> = {};
      for (const [name, { calls }] of Object.entries(spent.commands)) {
        const perUnit = (calls - ((baseline.commands[name]?.calls ?? 0) / baselineSeconds) * seconds) / per;
        if (name !== 'info' && perUnit >= 0.05) extra[name] = perUnit;
      }
      return extra;
    };
    return {
      repetition,
      emptyCpuUsPerSecond: empty.cpuUsPerSecond,
      workersIdleCpuUsPerSecond: workersIdle.cpuUsPerSecond,
      fleetIdleCpuUsPerSecond: fleetIdle.cpuUsPerSecond,
      loadCpuUsPerSecond: load.cpuUsPerSecond,
      tasks,
      tasksPerSecond: result.tasksPerSecond,
      failedTasks: failedCalls(result),
      commandsPerTask: extraCommands(load.spent, loadSeconds, fleetIdle.spent, idleSeconds, tasks),
      commandsPerWorkerSecond: extraCommands(workersIdle.spent, idleSeconds, empty.spent, idleSeconds, settings.workers * idleSeconds),
      perWorkerSecondUs: (workersIdle.cpuUsPerSecond - empty.cpuUsPerSecond) / settings.workers,
      perBalancerSecondUs: (fleetIdle.cpuUsPerSecond - workersIdle.cpuUsPerSecond) / settings.balancers,
      perTaskUs: (load.cpuUsPerSecond - fleetIdle.cpuUsPerSecond) / result.tasksPerSecond,
    };
  } finally {
    await cleanups.runAll();
  }
}

/** Deployments the model is asked about: workers and balancers per Redis (per shard with a cluster). */
const deployments: readonly Omit<CapacityRow, 'plannedTasksPerSecond' | 'saturatedTasksPerSecond'>[] = [
  { label: 'small', redisShards: 1, workers: 100, balancers: 3 },
  { label: 'medium', redisShards: 1, workers: 1_000, balancers: 10 },
  { label: 'large', redisShards: 1, workers: 2_000, balancers: 20 },
  { label: 'Redis Cluster, 4 Headroom clusters', redisShards: 4, workers: 1_000, balancers: 30 },
  { label: 'Redis Cluster, 16 Headroom clusters', redisShards: 16, workers: 1_000, balancers: 60 },
];

/**
 * tasks/s one thread carries = (share of the thread − workers × their cost per second − balancers ×
 * theirs) ÷ cost per task, with every worker busy (its heartbeat renews a lease per running task).
 * A balancer's cost counts in full on every shard: it sweeps and reads every cluster it serves, so
 * this overstates a shard's share of it.
 */
export function tasksPerSecondCarried(
  costs: { perWorkerSecondUs: number; perBalancerSecondUs: number; perTaskUs: number },
  deployment: { workers: number; balancers: number },
  shareOfCore: number,
): number {
  const leftUs = shareOfCore * 1e6 - deployment.workers * costs.perWorkerSecondUs - deployment.balancers * costs.perBalancerSecondUs;
  return Math.max(0, leftUs / costs.perTaskUs);
}

export async function runScale(options: ScaleOptions): Promise<ScaleResult> {
  const settings = options.smoke ? smokeSettings : fullSettings;
  const { progress, signal } = options;
  const binary = findOnPath('redis-server');
  if (!binary) throw new Error('scale needs redis-server on the PATH: it measures a private Redis of its own (apt-get install redis-server)');
  const server = await startPrivateRedis({ binary });
  const cleanups = new Cleanups();
  cleanups.register(async () => void (await server.stop()));
  try {
    const run = await startRun('scale', { ...options, redisUrl: server.url }, settings);
    const redis = new Redis(server.url, { maxRetriesPerRequest: 1 });
    cleanups.register(async () => void redis.disconnect());
    const privateRedisVersion = /^redis_version:(\S+)/m.exec(await redis.info('server'))?.[1] ?? 'unknown';
    progress(`private redis-server ${privateRedisVersion} at ${server.url} (pid ${server.pid})`);

    const scripts = await measureScripts(redis, settings.scripts, progress);
    const fleetRuns: FleetMeasurement[] = [];
    for (let repetition = 1; repetition <= settings.fleet.repetitions; repetition++) {
      const m = await measureFleet(server.url, redis, settings.fleet, repetition, signal);
      fleetRuns.push(m);
      progress(
        `fleet #${repetition}: ${m.perWorkerSecondUs.toFixed(0)} µs per worker-second, ${m.perBalancerSecondUs.toFixed(0)} µs per balancer-second, ` +
          `${m.perTaskUs.toFixed(0)} µs per task (${m.tasksPerSecond.toFixed(0)} tasks/s, failed ${m.failedTasks})`,
      );
    }
    const perWorkerSecondUs = spread(fleetRuns.map((m) => m.perWorkerSecondUs));
    const perBalancerSecondUs = spread(fleetRuns.map((m) => m.perBalancerSecondUs));
    const perTaskUs = spread(fleetRuns.map((m) => m.perTaskUs));
    // A busy worker's heartbeat renews a lease per running task: what that adds, by the scripts alone (one heartbeat a second).
    const cpuOf = (name: ScriptName) => scripts.find((c) => c.script === name)!.mainThreadCpuUsPerCall.median;
    const busyWorkerExtraUs = cpuOf('heartbeat-busy') - cpuOf('heartbeat-idle');
    const costs = {
      perWorkerSecondUs: perWorkerSecondUs.median + busyWorkerExtraUs,
      perBalancerSecondUs: perBalancerSecondUs.median,
      perTaskUs: perTaskUs.median,
    };
    const capacity = deployments.map((d) => ({
      ...d,
      plannedTasksPerSecond: d.redisShards * tasksPerSecondCarried(costs, d, settings.plannedShareOfCore),
      saturatedTasksPerSecond: d.redisShards * tasksPerSecondCarried(costs, d, 1),
    }));
    const medium = capacity.find((row) => row.label === 'medium')!;
    // Part 3, on a fresh private redis-server of its own.
    await redis.quit().catch(() => undefined);
    await server.stop();
    const fleetScale = await runFleetScale(binary, settings.fleetScale, progress, signal);
    return {
      ...run.header(),
      privateRedisVersion,
      scripts,
      fleetRuns,
      perWorkerSecondUs,
      busyWorkerExtraUs,
      perBalancerSecondUs,
      perTaskUs,
      capacity,
      fleetScale,
      goals: [
        {
          name: "Redis thread's CPU per task (reserve, release, the rest), µs",
          target: 'state it (no target)',
          measured: perTaskUs.median,
          digits: 1,
          met: 'stated',
        },
        {
          name: "Redis thread's CPU per idle worker per second (heartbeat, reports), µs",
          target: 'state it (no target)',
          measured: perWorkerSecondUs.median,
          digits: 1,
          met: 'stated',
        },
        {
          name: `tasks/s one Redis carries at ${settings.plannedShareOfCore * 100}% of its thread with ${medium.workers.toLocaleString('en-US')} workers and ${medium.balancers} balancers (the model)`,
          target: 'state it (no target)',
          measured: medium.plannedTasksPerSecond,
          met: 'stated',
        },
        ...fleetScaleGoals(fleetScale),
      ],
    };
  } finally {
    await cleanups.runAll();
  }
}
