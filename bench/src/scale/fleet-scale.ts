/**
 * scale, fleet-scale mode: the ledger of @headroom/fleet against a private redis-server holding a
 * fleet of the size Headroom is for, driven by simulated workers and balancers (fleet-sim.ts) that
 * send what real ones send. Redis's own accounting (INFO cpu of its main thread, INFO
 * commandstats) is read over windows of each state:
 *   empty: Redis with only this reader connected;
 *   workers idle: every worker connected and heartbeating, no balancer, no task;
 *   fleet idle: balancers too (sweeps, directory reads), no task;
 *   busy: fleet idle, with `busyWorkers` workers each running slotsPerWorker tasks that do not end;
 *   load: tasks arriving at a rate, each running a log-normal time, in the steady state
 *     (rate x mean duration in flight) before the first window;
 *   with others (after the loads): the highest rate again, every process also sending what a
 *     real one sends besides the ledger (worker reports, latency summaries, balancer heartbeats).
 * Per idle worker-second = (workers idle - empty) / workers; per balancer-second = (fleet idle -
 * workers idle) / balancers; per busy worker-second = per idle one + (busy - fleet idle) /
 * busyWorkers; per task = (load - fleet idle) / tasks per second: a task's reserve and release
 * and the upkeep of its lease while it runs (heartbeats of busier workers, sweeps).
 */
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { sleep } from '@headroom/common';
import { startPrivateRedis } from '@headroom/testkit';
import { spread, type Spread } from '../report/stats';
import { fleetLedgerDescription, type LedgerCounts } from './fleet-ledger';
import { FleetSim, type FleetSimSettings } from './fleet-sim';
import { countersBetween, emptyCounters, type SimCounters } from './sim-counters';
import { readAccounting, spentBetween, type RedisSpent } from './redis-accounting';
import { meanDurationMs } from './task-durations';

export interface FleetScaleSettings {
  sim: Omit<FleetSimSettings, 'cluster' | 'otherCluster'>;
  /** Workers held full (slotsPerWorker tasks each) in the busy state. */
  busyWorkers: number;
  /** Rates measured in turn, lowest first, tasks/s: batches grow with the rate, so the cost per task falls as it rises. */
  tasksPerSecond: number[];
  /** Then at the rate the costs measured say takes plannedShareOfThread (at most goalTasksPerSecond), if the harness kept up so far. */
  loadAtPlannedShare: boolean;
  /**
   * Then the highest rate driven again with everything else real processes
   * send (FleetSim.sendOthers), after a warm-up of a latency-report period: what one Redis's thread
   * carries in all, beside what the ledger alone takes.
   */
  othersAtHighestRate: boolean;
  /** The empty, idle and busy states: `windows` windows of this length each. */
  idleWindowMs: number;
  /** Under load: after the steady state is placed, this long before the first window. */
  loadWarmUpMs: number;
  loadWindowMs: number;
  windows: number;
  /** Share of Redis's thread a deployment may plan to use. */
  plannedShareOfThread: number;
  /** Runs, each in a process of its own on a fresh redis-server: the figures pool the windows of all. */
  repetitions: number;
  /** The target fleet: tasks/s it asks one Redis to carry at plannedShareOfThread. */
  goalTasksPerSecond: number;
}

/** One window of Redis's accounting and of what the simulated fleet sent meanwhile. */
export interface FleetWindow {
  seconds: number;
  redisCpuUsPerSecond: number;
  /** Redis commands (scripts count as evalsha, and their own commands again under their names). */
  commands: RedisSpent['commands'];
  sent: SimCounters;
  /** Of what sendOthers sent, the calls not yet answered when `sent` was read: Redis may count them in the next window. */
  othersUnderWayAtEnd: FleetSim['othersUnderWay'];
  /** Tasks in flight on the simulated workers when the window began and ended. */
  inFlightAtStart: number;
  inFlightAtEnd: number;
  /** This process's CPU over the window, in cores (the harness and its 4,000 connections). */
  harnessCores: number;
  /** Longest gap between two ticks of the harness's 1 ms timer: how late it ran. */
  longestTickGapMs: number;
  /** This process's heap at the end of the window. */
  heapUsedMiB: number;
}

export interface FleetLoad {
  targetTasksPerSecond: number;
  /** rate x mean duration: the steady state's tasks in flight. */
  expectedInFlight: number;
  windows: FleetWindow[];
  /** Tasks reserved per second over each window. */
  tasksPerSecond: Spread;
  inFlightAtStart: Spread;
  redisCpuUsPerSecond: Spread;
  /** redisCpuUsPerSecond / 1,000,000. */
  shareOfThread: Spread;
  perTaskUs: Spread;
  perTaskUsByWindow: number[];
  /** Redis commands per task beyond the idle fleet's, by name (medians over windows). */
  commandsPerTask: Record<string, number>;
  /** Microseconds inside each command per task beyond the idle fleet's (a script's commands also count inside evalsha). */
  usecPerTaskByCommand: Record<string, number>;
  /** Microseconds inside scripts (EVALSHA and EVAL, commandstats) per task beyond the idle fleet's: the rest of perTaskUs is reading, parsing and answering requests. */
  scriptUsecPerTask: number;
  /** The harness sent what the rate asked, on time: no arrival dropped, no heartbeat late, its timer never far behind. */
  keptUp: boolean;
  whyNotKeptUp: string[];
  /** What the ledger answered that a healthy fleet should not see (leases expired, no slot found, calls failed). */
  anomalies: string[];
  /** This process's CPU, in cores. */
  harnessCores: Spread;
  /** Why this rate: 'fixed' (the settings) or at the planned share. */
  chosenAs: string;
}

export interface ConsistencyCheck {
  /** With tasks running (arrivals and task ends paused, one heartbeat period later): workers whose ledger in-flight differs from what the simulated worker runs, or whose free slots are not capacity - in flight. */
  whileRunning: { workers: number; tasksRunning: number; ledgerInflight: number; mismatches: string[] };
  /** Once every task ended (one heartbeat period later): workers not at in flight 0 and free = capacity; totals. */
  afterAllEnded: {
    workers: number;
    /** Reservations granted and releases sent by the simulated fleet until then (equal: every task ended). */
    tasksReserved: number;
    releasesSent: number;
    ledgerInflight: number;
    totalCapacity: number;
    totalFree: number;
    sumOfCapacities: number;
    mismatches: string[];
  };
}

export interface FleetScaleRun {
  /** The ledger measured. */
  description: string;
  redisVersion: string;
  empty: FleetWindow[];
  workersIdle: FleetWindow[];
  fleetIdle: FleetWindow[];
  busy: FleetWindow[];
  loads: FleetLoad[];
  /** The highest rate again with everything else real processes send (settings.othersAtHighestRate); null when not measured. Its perTaskUs counts the others' cost too. */
  withOthers: FleetLoad | null;
  emptyCpuUsPerSecond: Spread;
  perIdleWorkerSecondUs: Spread;
  perBalancerSecondUs: Spread;
  perBusyWorkerSecondUs: Spread;
  /** The figures of each window, that repetitions pool. */
  perIdleWorkerSecondUsByWindow: number[];
  perBalancerSecondUsByWindow: number[];
  perBusyWorkerSecondUsByWindow: number[];
  commandsPerIdleWorkerSecond: Record<string, number>;
  commandsPerBusyWorkerSecond: Record<string, number>;
  /** A worker's heartbeat period as the fleet ran: the real default times the scale the ledger answered for its size. */
  heartbeatPeriodMs: number;
  /** Tasks/s at plannedShareOfThread: (share x 1,000,000 - empty - workers x idle worker-second - balancers x balancer-second) / per task, per task from the highest rate measured. */
  tasksPerSecondAtPlannedShare: number;
  tasksPerSecondAtPlannedShareFrom: string;
  consistency: ConsistencyCheck;
  /** Everything the simulated fleet sent and got over the whole run. */
  totals: SimCounters;
  lastError: string | null;
  durationSeconds: number;
}

export interface FleetScaleResult {
  settings: FleetScaleSettings;
  meanTaskDurationMs: number;
  /** The repetitions pooled (windows together, medians over them; see poolRuns). */
  run: FleetScaleRun;
  /** Each repetition's own figures, in the order they ran (their windows are in `run`). */
  repetitions: (Pick<FleetScaleRun, 'durationSeconds' | 'perIdleWorkerSecondUs' | 'perBusyWorkerSecondUs' | 'perBalancerSecondUs'> & {
    loads: Pick<FleetLoad, 'targetTasksPerSecond' | 'tasksPerSecond' | 'perTaskUs' | 'shareOfThread' | 'keptUp'>[];
  })[];
}

/** Beyond this (a heartbeat period), the harness's 1 ms timer ran too late to send heartbeats and releases when a real fleet would. */
const maxTickGapMs = 1_000;

export const median = (values: readonly number[]) => spread(values).median;

/** Calls per second of each command in a window. */
const callsPerSecond = (w: FleetWindow) => Object.fromEntries(Object.entries(w.commands).map(([name, c]) => [name, c.calls / w.seconds]));
const usecPerSecond = (w: FleetWindow) => Object.fromEntries(Object.entries(w.commands).map(([name, c]) => [name, c.usec / w.seconds]));

/** Per unit, of each command, (median over `windows` - median over `baseline`) / per; our INFO readings and the rare ones left out. */
function extraPer(
  windows: readonly FleetWindow[],
  baseline: readonly FleetWindow[],
  of: (w: FleetWindow) => Record<string, number>,
  per: number,
  threshold: number,
): Record<string, number> {
  const names = new Set(windows.flatMap((w) => Object.keys(w.commands)));
  const extra: Record<string, number> = {};
  for (const name of names) {
    if (name === 'info') continue;
    const value = (median(windows.map((w) => of(w)[name] ?? 0)) - median(baseline.map((w) => of(w)[name] ?? 0))) / per;
    if (value >= threshold) extra[name] = value;
  }
  return extra;
}

async function measureWindows(sim: FleetSim | undefined, redis: Redis, count: number, windowMs: number, signal: AbortSignal): Promise<FleetWindow[]> {
  const windows: FleetWindow[] = [];
  for (let i = 0; i < count; i++) {
    const before = await readAccounting(redis);
    const sentBefore = structuredClone(sim?.counters);
    const cpuBefore = process.cpuUsage();
    const inFlightAtStart = sim?.inFlight ?? 0;
    sim?.takeLongestTickGapMs();
    const startedAt = performance.now();
    await sleep(windowMs, signal);
    // What was sent is read before Redis's accounting: a call answered by now ran before the INFO
    // below; one still under way may run after it (othersUnderWayAtEnd).
    const sent = sim && sentBefore ? countersBetween(sentBefore, sim.counters) : emptyCounters();
    const othersUnderWayAtEnd = { reports: 0, latencyFlushes: 0, balancerHeartbeats: 0, ...sim?.othersUnderWay };
    const after = await readAccounting(redis);
    const seconds = (performance.now() - startedAt) / 1000;
    const cpu = process.cpuUsage(cpuBefore);
    const spent = spentBetween(before, after);
    windows.push({
      seconds,
      redisCpuUsPerSecond: spent.mainThreadCpuUs / seconds,
      commands: spent.commands,
      sent,
      othersUnderWayAtEnd,
      inFlightAtStart,
      inFlightAtEnd: sim?.inFlight ?? 0,
      harnessCores: (cpu.user + cpu.system) / 1e6 / seconds,
      longestTickGapMs: sim?.takeLongestTickGapMs() ?? 0,
      heapUsedMiB: Math.round(process.memoryUsage().heapUsed / 1024 / 1024),
    });
  }
  return windows;
}

/** Workers whose counts in the ledger disagree with `expectedInflight` (or free != capacity - inflight). */
function mismatchesOf(counts: LedgerCounts, expectedInflight: (workerId: string) => number | undefined, capacity: number): string[] {
  const mismatches: string[] = [];
  for (const w of counts.workers) {
    const expected = expectedInflight(w.workerId);
    if (expected === undefined) mismatches.push(`${w.workerId}: in the ledger, not in the fleet`);
    else if (w.inflight !== expected || w.freeSlots !== w.capacity - w.inflight || w.capacity !== capacity)
      mismatches.push(`${w.workerId}: ledger inflight ${w.inflight}, free ${w.freeSlots}, capacity ${w.capacity}; the worker runs ${expected} of ${capacity}`);
    if (mismatches.length >= 20) break;
  }
  return mismatches;
}

/** One run, in this process (fleet-scale-process.ts runs it in a process of its own). */
export async function runOne(
  binary: string,
  settings: FleetScaleSettings,
  progress: (line: string) => void,
  signal: AbortSignal,
  /** The rate at the planned share found by the first repetition: the later ones measure there too, so that their windows pool. */
  plannedShareRate?: number,
): Promise<FleetScaleRun> {
  const startedAt = performance.now();
  const server = await startPrivateRedis({ binary });
  const reader = new Redis(server.url, { maxRetriesPerRequest: 1 });
  let sim: FleetSim | undefined;
  try {
    const redisVersion = /^redis_version:(\S+)/m.exec(await reader.info('server'))?.[1] ?? 'unknown';
    const s = settings.sim;
    const n = settings.windows;
    const label = 'fleet-scale';
    const empty = await measureWindows(undefined, reader, n, settings.idleWindowMs, signal);
    progress(`${label}: opening ${s.workers} worker and ${s.balancers} x 2 balancer connections to redis-server ${redisVersion} (pid ${server.pid})`);
    sim = await FleetSim.open(server.url, 'bench:fleet-scale', { ...s, cluster: 'baseline', otherCluster: 'candidate' });
    await sim.startWorkers();
    await sleep(sim.heartbeatPeriodMs, signal);
    const workersIdle = await measureWindows(sim, reader, n, settings.idleWindowMs, signal);
    sim.startBalancers();
    await sleep(Math.min(s.sweepIntervalMs, s.directoryRefreshIntervalMs) / 2, signal);
    const fleetIdle = await measureWindows(sim, reader, n, settings.idleWindowMs, signal);
    const emptyUs = median(empty.map((w) => w.redisCpuUsPerSecond));
    const perIdleWorkerSecondUsByWindow = workersIdle.map((w) => (w.redisCpuUsPerSecond - emptyUs) / s.workers);
    const perIdleWorkerSecondUs = spread(perIdleWorkerSecondUsByWindow);
    const workersIdleUs = median(workersIdle.map((w) => w.redisCpuUsPerSecond));
    const perBalancerSecondUsByWindow = fleetIdle.map((w) => (w.redisCpuUsPerSecond - workersIdleUs) / s.balancers);
    const perBalancerSecondUs = spread(perBalancerSecondUsByWindow);
    progress(
      `${label}: idle ${perIdleWorkerSecondUs.median.toFixed(1)} µs per worker-second, ${perBalancerSecondUs.median.toFixed(0)} µs per balancer-second (Redis empty ${emptyUs.toFixed(0)} µs/s)`,
    );

    const fleetIdleUs = median(fleetIdle.map((w) => w.redisCpuUsPerSecond));

    const meanMs = meanDurationMs(s.durations);
    const planned = settings.plannedShareOfThread * 1e6;
    /** Tasks/s at the planned share of the thread, linearly from the fixed costs and a load's cost per task. */
    const linearAtPlannedShare = (load: FleetLoad) =>
      Math.max(0, (planned - emptyUs - s.workers * perIdleWorkerSecondUs.median - s.balancers * perBalancerSecondUs.median) / load.perTaskUs.median);
    const fleet = sim;
    const measureLoad = async (rate: number, chosenAs: string, warmUpMs = settings.loadWarmUpMs): Promise<FleetLoad> => {
      const expectedInFlight = Math.round((rate * meanMs) / 1000);
      // From the previous rate's steady state (or none) to this one's: add the difference, as tasks found running.
      await fleet.fillToSteadyState(Math.max(0, expectedInFlight - fleet.inFlight), signal);
      fleet.setRate(rate);
      await sleep(warmUpMs, signal);
      const windows = await measureWindows(fleet, reader, n, settings.loadWindowMs, signal);
      const tasksPerSecond = spread(windows.map((w) => w.sent.reserved / w.seconds));
      const perTaskUsByWindow = windows.map((w) => (w.redisCpuUsPerSecond - fleetIdleUs) / (w.sent.reserved / w.seconds));
      const perTaskUs = spread(perTaskUsByWindow);
      const total = (of: (sent: SimCounters) => number) => windows.reduce((sum, w) => sum + of(w.sent), 0);
      // The harness could not send what a real fleet would: its figures are not the rate's.
      const whyNotKeptUp: string[] = [];
      if (total((c) => c.arrivalsDropped) > 0)
        whyNotKeptUp.push(`${total((c) => c.arrivalsDropped)} arrivals dropped (${s.maxOutstandingReserves} calls under way)`);
      if (tasksPerSecond.median < 0.95 * rate) whyNotKeptUp.push(`reserved ${tasksPerSecond.median.toFixed(0)} tasks/s of ${rate}`);
      if (total((c) => c.heartbeatsLate) > 0) whyNotKeptUp.push(`${total((c) => c.heartbeatsLate)} heartbeats late`);
      const longestTickGapMs = Math.max(...windows.map((w) => w.longestTickGapMs));
      if (longestTickGapMs > maxTickGapMs) whyNotKeptUp.push(`the harness's 1 ms timer ran ${longestTickGapMs.toFixed(0)} ms late`);
      // What the ledger answered that a healthy fleet should not see.
      const anomalies: string[] = [];
      if (total((c) => c.leasesExpired) > 0) anomalies.push(`${total((c) => c.leasesExpired)} leases expired`);
      if (total((c) => c.releasedNotHeld) > 0) anomalies.push(`${total((c) => c.releasedNotHeld)} releases of leases no longer held`);
      if (total((c) => c.workersRemoved) > 0) anomalies.push(`${total((c) => c.workersRemoved)} workers swept`);
      const refused = total((c) => Object.values(c.refused).reduce((a, b) => a + b, 0));
      if (refused > 0) anomalies.push(`${refused} reserves found no slot (${JSON.stringify(Object.assign({}, ...windows.map((w) => w.sent.refused)))})`);
      if (total((c) => c.errors) > 0) anomalies.push(`${total((c) => c.errors)} calls failed (${fleet.lastErrorMessage})`);
      const load: FleetLoad = {
        targetTasksPerSecond: rate,
        expectedInFlight,
        windows,
        tasksPerSecond,
        inFlightAtStart: spread(windows.map((w) => w.inFlightAtStart)),
        redisCpuUsPerSecond: spread(windows.map((w) => w.redisCpuUsPerSecond)),
        shareOfThread: spread(windows.map((w) => w.redisCpuUsPerSecond / 1e6)),
        perTaskUs,
        perTaskUsByWindow,
        commandsPerTask: extraPer(windows, fleetIdle, callsPerSecond, tasksPerSecond.median, 0.01),
        usecPerTaskByCommand: extraPer(windows, fleetIdle, usecPerSecond, tasksPerSecond.median, 0.01),
        scriptUsecPerTask: 0,
        keptUp: whyNotKeptUp.length === 0,
        whyNotKeptUp,
        anomalies,
        harnessCores: spread(windows.map((w) => w.harnessCores)),
        chosenAs,
      };
      load.scriptUsecPerTask = (load.usecPerTaskByCommand.evalsha ?? 0) + (load.usecPerTaskByCommand.eval ?? 0);
      progress(
        `${label}: ${rate} tasks/s (reserved ${tasksPerSecond.median.toFixed(0)}/s, ${load.inFlightAtStart.median} in flight of ${expectedInFlight} expected): ` +
          `${perTaskUs.median.toFixed(1)} µs per task (${load.scriptUsecPerTask.toFixed(1)} inside scripts), ${(load.shareOfThread.median * 100).toFixed(1)}% of Redis's thread; harness ${median(windows.map((w) => w.harnessCores)).toFixed(2)} cores` +
          `${load.keptUp ? '' : `; the harness did not keep up: ${whyNotKeptUp.join(', ')}`}${anomalies.length > 0 ? `; ${anomalies.join(', ')}` : ''}`,
      );
      return load;
    };
    const loads: FleetLoad[] = [];
    for (const rate of settings.tasksPerSecond) {
      const load = await measureLoad(rate, 'fixed');
      loads.push(load);
      // A higher rate would not be driven either.
      if (!load.keptUp) break;
    }
    const last = loads.at(-1);
    if (settings.loadAtPlannedShare && last?.keptUp) {
      // Then at the rate that should take the planned share of the thread (by the costs just measured), to measure
      // it there; no higher than the goal's rate, nor than 80% of the fleet's slots in flight.
      const fleetRateCap = (0.8 * s.workers * s.slotsPerWorker * 1000) / meanMs;
      const rate = plannedShareRate ?? Math.round(Math.min(linearAtPlannedShare(last), settings.goalTasksPerSecond, fleetRateCap) / 100) * 100;
      if (rate > 1.1 * last.targetTasksPerSecond) loads.push(await measureLoad(rate, 'at the planned share, by the costs measured at the rate before'));
    }
    let withOthers: FleetLoad | null = null;
    const highestDriven = loads.filter((load) => load.keptUp).at(-1);
    if (settings.othersAtHighestRate && highestDriven) {
      sim.sendOthers(true);
      // A latency-report period first, so that each worker's flush carries a period's tasks, as in a fleet that runs.
      withOthers = await measureLoad(
        highestDriven.targetTasksPerSecond,
        'the same, with worker reports, latency summaries and balancer heartbeats',
        Math.max(settings.loadWarmUpMs, s.latencyReportIntervalMs),
      );
      sim.sendOthers(false);
    }

    const consistency = await checkConsistency(sim, s, signal);
    progress(
      `${label}: consistency: ${consistency.whileRunning.mismatches.length + consistency.afterAllEnded.mismatches.length} mismatches (${consistency.whileRunning.tasksRunning} tasks running, then none)`,
    );

    // Last, as nothing needs the fleet idle again: busyWorkers workers each running slotsPerWorker tasks that do not end.
    await sim.holdBusyWorkers(settings.busyWorkers, s.slotsPerWorker, signal);
    // Every busy worker heartbeats at least once with its tasks before the first window.
    await sleep(sim.heartbeatPeriodMs + 100, signal);
    const busy = await measureWindows(sim, reader, n, settings.idleWindowMs, signal);
    const perBusyWorkerSecondUsByWindow = busy.map((w) => perIdleWorkerSecondUs.median + (w.redisCpuUsPerSecond - fleetIdleUs) / settings.busyWorkers);
    const perBusyWorkerSecondUs = spread(perBusyWorkerSecondUsByWindow);
    const commandsPerIdleWorkerSecond = extraPer(workersIdle, empty, callsPerSecond, s.workers, 0.01);
    const commandsPerBusyWorkerSecond: Record<string, number> = { ...commandsPerIdleWorkerSecond };
    for (const [name, value] of Object.entries(extraPer(busy, fleetIdle, callsPerSecond, settings.busyWorkers, 0.01)))
      commandsPerBusyWorkerSecond[name] = (commandsPerBusyWorkerSecond[name] ?? 0) + value;
    progress(
      `${label}: ${settings.busyWorkers} workers busy (${s.slotsPerWorker} tasks each): ${perBusyWorkerSecondUs.median.toFixed(1)} µs per busy worker-second`,
    );

    // Extrapolated from the highest rate the harness drove as a real fleet would.
    const highest = loads.filter((load) => load.keptUp).at(-1) ?? loads.at(-1);
    const tasksPerSecondAtPlannedShare = highest ? linearAtPlannedShare(highest) : Number.NaN;
    return {
      description: fleetLedgerDescription,
      redisVersion,
      empty,
      workersIdle,
      fleetIdle,
      busy,
      loads,
      withOthers,
      emptyCpuUsPerSecond: spread(empty.map((w) => w.redisCpuUsPerSecond)),
      perIdleWorkerSecondUs,
      perBalancerSecondUs,
      perBusyWorkerSecondUs,
      perIdleWorkerSecondUsByWindow,
      perBalancerSecondUsByWindow,
      perBusyWorkerSecondUsByWindow,
      commandsPerIdleWorkerSecond,
      commandsPerBusyWorkerSecond,
      heartbeatPeriodMs: sim.heartbeatPeriodMs,
      tasksPerSecondAtPlannedShare,
      tasksPerSecondAtPlannedShareFrom: highest
        ? `per task ${highest.perTaskUs.median.toFixed(1)} µs measured at ${highest.tasksPerSecond.median.toFixed(0)} tasks/s, per idle worker-second ${perIdleWorkerSecondUs.median.toFixed(1)} µs x ${s.workers} workers, per balancer-second ${perBalancerSecondUs.median.toFixed(0)} µs x ${s.balancers}, Redis empty ${emptyUs.toFixed(0)} µs/s`
        : 'no load measured',
      consistency,
      totals: structuredClone(sim.counters),
      lastError: sim.lastErrorMessage ?? null,
      durationSeconds: (performance.now() - startedAt) / 1000,
    };
  } finally {
    sim?.close();
    reader.disconnect();
    await server.stop();
  }
}

/** Pauses the load, checks the ledger against the simulated workers, then ends every task and checks again. */
async function checkConsistency(sim: FleetSim, s: FleetScaleSettings['sim'], signal: AbortSignal): Promise<ConsistencyCheck> {
  const ledger = sim.anyLedger;
  sim.setRate(0);
  sim.pauseTaskEnds(true);
  await sim.quiesce(signal);
  // One heartbeat of every worker with what it runs now.
  await sleep(sim.heartbeatPeriodMs + 100, signal);
  const running = sim.runningByWorker();
  const duringCounts = await ledger.counts('baseline');
  const whileRunning = {
    workers: duringCounts.workers.length,
    tasksRunning: [...running.values()].reduce((a, b) => a + b, 0),
    ledgerInflight: duringCounts.workers.reduce((a, w) => a + w.inflight, 0),
    mismatches: mismatchesOf(duringCounts, (id) => running.get(id), s.slotsPerWorker),
  };
  if (duringCounts.workers.length !== s.workers)
    whileRunning.mismatches.push(`${duringCounts.workers.length} workers in the ledger, ${s.workers} in the fleet`);
  sim.pauseTaskEnds(false);
  await sim.endAllTasks(signal);
  await sleep(sim.heartbeatPeriodMs + 100, signal);
  const afterCounts = await ledger.counts('baseline');
  const afterAllEnded = {
    workers: afterCounts.workers.length,
    tasksReserved: sim.counters.reserved,
    releasesSent: sim.counters.releaseCalls,
    ledgerInflight: afterCounts.workers.reduce((a, w) => a + w.inflight, 0),
    totalCapacity: afterCounts.totalCapacity,
    totalFree: afterCounts.totalFree,
    sumOfCapacities: afterCounts.workers.reduce((a, w) => a + w.capacity, 0),
    mismatches: mismatchesOf(afterCounts, (id) => (running.has(id) ? 0 : undefined), s.slotsPerWorker),
  };
  if (afterCounts.workers.length !== s.workers) afterAllEnded.mismatches.push(`${afterCounts.workers.length} workers in the ledger, ${s.workers} in the fleet`);
  if (afterAllEnded.tasksReserved !== afterAllEnded.releasesSent)
    afterAllEnded.mismatches.push(`${afterAllEnded.tasksReserved} tasks reserved, ${afterAllEnded.releasesSent} released`);
  if (afterCounts.totalFree !== afterCounts.totalCapacity || afterCounts.totalCapacity !== s.workers * s.slotsPerWorker)
    afterAllEnded.mismatches.push(
      `totals: free ${afterCounts.totalFree}, capacity ${afterCounts.totalCapacity}; the fleet has ${s.workers * s.slotsPerWorker} slots, none used`,
    );
  return { whileRunning, afterAllEnded };
}
