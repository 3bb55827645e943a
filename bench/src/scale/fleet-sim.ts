/**
 * A simulated fleet in this process: workers and balancers that call the slot ledger exactly as
 * the real ones do, each on its own Redis connection, with none of their other work (no gRPC, no
 * handlers). What each simulated process sends, and when:
 * - a worker (worker/src/worker.ts): a heartbeat every heartbeatIntervalMs (times the scale the
 *   ledger answers for the cluster's size) with what it runs, on its own connection;
 * - a balancer (balancer/src/balancer.ts, admission.ts, worker-directory.ts): a reserve per
 *   arriving task on its own connection (waitIfNone true, as Admission.tryReserve asks), and the
 *   release of each task it dispatched when the worker answers (the Ledger batches both, as in a
 *   real balancer); a sweep of each of its two clusters every sweepIntervalMs; a read of each
 *   cluster's worker directory every directoryRefreshIntervalMs after the previous read ended; a subscriber
 *   connection for slot-freed messages. A task that found no slot waits in the balancer's queue
 *   and is tried again when a slot-freed message comes or every queueRecheckIntervalMs; when its
 *   queue empties the balancer says it no longer waits.
 * While sendOthers(true), each also sends what a real one sends besides the ledger: a worker its
 * report for the admin UI with the first heartbeat due after reportIntervalMs (fleet/src/worker-reports.ts;
 * its connection then pipelines automatically, as a real worker's does, so the two go in one
 * write) and its task latencies every latencyReportIntervalMs (fleet/src/latency.ts, the tasks
 * spread over `integrations`); a balancer its heartbeat to the balancer register every
 * balancerHeartbeatIntervalMs (fleet/src/override.ts). All through the real classes.
 * One timer drives it all (every millisecond); per task it keeps a lease id, a worker index and
 * its start in a time wheel, and no closure.
 */
import { performance } from 'node:perf_hooks';
import type { Redis } from 'ioredis';
import { connectRedis, LatencyRecorder, OverrideStore, waitUntilReady, WorkerReports, type WorkerReport } from '@headroom/fleet';
import { workerReportTtlMs } from '@headroom/worker';
import { openFleetLedger, type FleetLedger, type SimReservation, type SimWorkerIdentity, type TaskPriority } from './fleet-ledger';
import { emptyCounters } from './sim-counters';
import { DurationSampler, meanDurationMs, type LogNormalDurations } from './task-durations';

export interface FleetSimSettings {
  workers: number;
  slotsPerWorker: number;
  balancers: number;
  /** The cluster the workers are in, and the other one balancers serve too (they sweep and read both). */
  cluster: string;
  otherCluster: string;
  /** worker/src/worker.ts default. */
  heartbeatIntervalMs: number;
  /** balancer/src/config.ts defaults. */
  heartbeatTimeoutMs: number;
  sweepIntervalMs: number;
  directoryRefreshIntervalMs: number;
  queueRecheckIntervalMs: number;
  /** worker/src/worker.ts and balancer/src/config.ts defaults, for sendOthers. */
  reportIntervalMs: number;
  latencyReportIntervalMs: number;
  balancerHeartbeatIntervalMs: number;
  /** Integrations the tasks are spread over (latency summaries count per integration). */
  integrations: number;
  /**
   * 'every': each reservation names one of `integrations`, and each has an in-flight limit of its
   * own in the ledger (half the cluster, so that none is reached: the cost of keeping to limits,
   * not of refusing); 'none': reservations name no integration, and the ledger reads no limit.
   */
  integrationLimits: 'every' | 'none';
  userPresentShare: number;
  durations: LogNormalDurations;
  /** Reservations under way at once, all balancers together, beyond which arrivals are dropped (and counted): the harness cannot drive the rate. */
  maxOutstandingReserves: number;
  /** Connections opened at once while the fleet starts. */
  connectConcurrency: number;
}

/** How new reservations are used: tasks of the load, tasks already running when the load starts, or held slots. */
type ReserveMode = 'task' | 'steady-state' | 'hold';

class SimWorker {
  readonly running = new Set<string>();
  heartbeatUnderWay = false;
  /** What it sends besides the ledger (sendOthers). */
  reports: WorkerReports | undefined;
  latency: LatencyRecorder | undefined;
  nextReportAtMs = 0;
  latencyFlushUnderWay = false;
  readonly onHeartbeat: (scale: number) => void;
  readonly onHeartbeatError: (error: unknown) => void;

  constructor(
    readonly index: number,
    readonly identity: SimWorkerIdentity,
    readonly connection: Redis,
    readonly ledger: FleetLedger,
    sim: FleetSim,
  ) {
    this.onHeartbeat = (scale) => {
      this.heartbeatUnderWay = false;
      sim.outstanding--;
      sim.heartbeatScale = scale;
    };
    this.onHeartbeatError = (error) => {
      this.heartbeatUnderWay = false;
      sim.outstanding--;
      sim.failed('heartbeat', error);
    };
  }
}

class SimBalancer {
  /** Priorities of the tasks waiting in this balancer's queue for a slot (bounded: see queueTask). */
  readonly queued: TaskPriority[] = [];
  /** Recorded in the ledger as waiting (a reserve with waitIfNone found nothing). */
  registeredWaiting = false;
  woken = false;
  nextRecheckAtMs = 0;
  nextSweepAtMs = 0;
  nextDirectoryAtMs = 0;
  directoryUnderWay = false;
  /** Its heartbeat to the balancer register (sendOthers). */
  overrides: OverrideStore | undefined;
  nextRegisterAtMs = 0;
  registerUnderWay = false;
  readonly onReserveUser: (reservation: SimReservation) => void;
  readonly onReserveBackground: (reservation: SimReservation) => void;

  constructor(
    readonly index: number,
    readonly balancerId: string,
    readonly connection: Redis,
    readonly subscriber: Redis,
    readonly ledger: FleetLedger,
    sim: FleetSim,
  ) {
    this.onReserveUser = (reservation) => sim.reserved(this, 'user', reservation);
    this.onReserveBackground = (reservation) => sim.reserved(this, 'background', reservation);
  }
}

/** Tasks ending in one millisecond: parallel arrays, so that a task costs no object of its own. */
interface WheelSlot {
  workers: number[];
  leases: string[];
  /** The balancer that dispatched each task (it gets the answer). */
  balancers: number[];
  /** When each task started (performance.now()), for the latency summaries. */
  starts: number[];
}

const maxQueuedPerBalancer = 10_000;
const reservationsPerRoundTrip = 16;

/** A worker's report as a real one writes it (worker/src/reporter.ts): its size is what Redis handles. */
const sampleReport = (tasksPerSecond: number): WorkerReport => ({
  atUnixMs: Date.now(),
  heapUsedBytes: 48_000_000 + Math.round(Math.random() * 4_000_000),
  heapLimitBytes: 4_345_298_944,
  gcTimeRatio: 0.004,
  eventLoopUtilization: 0.12,
  eventLoopDelayP99Ms: 21.4,
  latencyP50Ms: 2_006.8,
  latencyP99Ms: 19_742.1,
  tasksPerSecond,
  errorsPerSecond: 0,
  selfProtection: null,
});

export class FleetSim {
  readonly counters = emptyCounters();
  /** Calls under way, of every kind (quiesce waits for none). */
  outstanding = 0;
  /** Calls of sendOthers sent and not yet answered, by kind: Redis may not have run them yet. */
  readonly othersUnderWay = { reports: 0, latencyFlushes: 0, balancerHeartbeats: 0 };
  private outstandingReserves = 0;
  private readonly workers: SimWorker[] = [];
  private readonly workerIndexById = new Map<string, number>();
  private readonly balancers: SimBalancer[] = [];
  private readonly wheel = new Map<number, WheelSlot>();
  private wheelDoneUpToMs = 0;
  private readonly held: { worker: number; lease: string; balancer: number }[] = [];
  private readonly durations: DurationSampler;
  private timer: NodeJS.Timeout | undefined;
  /** When the next worker's heartbeat is due: the workers take turns, evenly over the period. */
  private nextHeartbeatAtMs = Number.NaN;
  private heartbeatSeq = 0;
  /** What the workers' period is multiplied by, as the ledger last answered (every worker of the cluster is told the same). */
  heartbeatScale = 1;
  private balancersRunning = false;
  private tasksPerSecond = 0;
  private rateFromMs = 0;
  private arrivalsSinceRate = 0;
  private nextBalancer = 0;
  private mode: ReserveMode = 'task';
  private tasksRunning = 0;
  /** sendOthers: on, and when the next worker's latency flush is due (the workers take turns, as with heartbeats). */
  private othersOn = false;
  private nextLatencyFlushAtMs = Number.NaN;
  private latencyFlushSeq = 0;
  private readonly integrationNames: string[];
  /** The key prefix the fleet's processes share (reports, latency summaries and the balancer register are under it too). */
  private keyPrefix = '';
  private taskEndsPaused = false;
  private readonly onReleased = (held: boolean) => {
    this.outstanding--;
    if (!held) this.counters.releasedNotHeld++;
  };
  private readonly onStopWaitingDone = () => {
    this.outstanding--;
  };
  private readonly onReserveError = (error: unknown) => {
    this.outstanding--;
    this.outstandingReserves--;
    this.failed('reserve', error);
  };
  private readonly onReleaseError = (error: unknown) => this.failedCall('release', error);
  private readonly onSweepError = (error: unknown) => this.failedCall('sweep', error);
  private readonly onStopWaitingError = (error: unknown) => this.failedCall('stop-waiting', error);
  private lastError: string | undefined;
  /** Longest gap between two timer ticks since the last reading, in ms: how late the harness ran. */
  private longestTickGapMs = 0;
  private lastTickAtMs = Number.NaN;

  private constructor(readonly settings: FleetSimSettings) {
    this.durations = new DurationSampler(settings.durations);
    this.integrationNames = Array.from({ length: settings.integrations }, (_unused, i) => `bank-${String(i + 1).padStart(2, '0')}`);
  }

  /** Opens every simulated process's connections (workers' one each, balancers' two each) and builds their ledgers; sends nothing yet. */
  static async open(redisUrl: string, keyPrefix: string, settings: FleetSimSettings): Promise<FleetSim> {
    const sim = new FleetSim(settings);
    sim.keyPrefix = keyPrefix;
    try {
      const connect = async (options: Parameters<typeof connectRedis>[1] = {}) => {
        // The benchmark's private redis-server: one Redis.
        const redis = connectRedis(redisUrl, options) as Redis;
        await waitUntilReady(redis, redisUrl);
        return redis;
      };
      for (let from = 0; from < settings.workers; from += settings.connectConcurrency) {
        const batch = Array.from({ length: Math.min(settings.connectConcurrency, settings.workers - from) }, (_unused, i) => from + i);
        // A real worker's connection pipelines automatically (connectRedis), but it seldom has two
        // commands in one tick; what Redis receives is the same without, and the harness is spared
        // an ioredis Pipeline per call (most of its CPU with 4,000 workers).
        const connections = await Promise.all(batch.map(() => connect({ enableAutoPipelining: false })));
        batch.forEach((index, i) => {
          const identity = { workerId: `w${index}`, address: `10.0.${Math.floor(index / 250)}.${index % 250}:50051`, capacity: settings.slotsPerWorker };
          sim.workers.push(new SimWorker(index, identity, connections[i]!, openFleetLedger(connections[i]!, keyPrefix), sim));
          sim.workerIndexById.set(identity.workerId, index);
        });
      }
      for (let i = 0; i < settings.balancers; i++) {
        const connection = await connect();
        // As balancer/src/cli.ts opens its subscriber.
        const subscriber = await connect({ enableOfflineQueue: true, enableAutoPipelining: false });
        const balancer = new SimBalancer(i, `b${i}`, connection, subscriber, openFleetLedger(connection, keyPrefix), sim);
        const channels = new Map([settings.cluster, settings.otherCluster].map((cluster) => [balancer.ledger.slotFreedChannel(cluster), cluster]));
        subscriber.on('message', () => {
          balancer.woken = true;
          sim.counters.slotFreedMessages++;
        });
        await subscriber.subscribe(...channels.keys());
        sim.balancers.push(balancer);
      }
      if (settings.integrationLimits === 'every') {
        for (const integration of sim.integrationNames)
          await sim.balancers[0]!.ledger.setIntegrationLimit(settings.cluster, integration, { shareOfCapacity: 0.5 });
      }
    } catch (error) {
      sim.close();
      throw error;
    }
    sim.lastTickAtMs = performance.now();
    sim.timer = setInterval(() => sim.tick(), 1);
    return sim;
  }

  get workerCount(): number {
    return this.workers.length;
  }

  /** Tasks running on the simulated workers (held slots included). */
  get inFlight(): number {
    return this.tasksRunning + this.held.length;
  }

  /** Every worker heartbeats once (all of them registered when this resolves), then once a period (heartbeatPeriodMs), spread evenly over it. */
  async startWorkers(): Promise<void> {
    const { cluster } = this.settings;
    for (let from = 0; from < this.workers.length; from += this.settings.connectConcurrency) {
      await Promise.all(
        this.workers.slice(from, from + this.settings.connectConcurrency).map(async (w) => {
          this.heartbeatScale = await w.ledger.heartbeat(cluster, w.identity, w.running);
        }),
      );
    }
    this.nextHeartbeatAtMs = performance.now() + this.heartbeatPeriodMs / this.workers.length;
  }

  /** A worker's heartbeat period: the real worker's, times the scale its ledger answers. */
  get heartbeatPeriodMs(): number {
    return this.settings.heartbeatIntervalMs * this.heartbeatScale;
  }

  /** Balancers start sweeping and reading the directory, each at its own phase. */
  startBalancers(): void {
    const now = performance.now();
    this.balancers.forEach((b, i) => {
      b.nextSweepAtMs = now + (i * this.settings.sweepIntervalMs) / this.balancers.length;
      b.nextDirectoryAtMs = now + (i * this.settings.directoryRefreshIntervalMs) / this.balancers.length;
    });
    this.balancersRunning = true;
  }

  /**
   * On: every simulated process also sends what a real one sends besides the ledger (see the top of
   * this file), through the same classes: worker reports, latency summaries, balancer heartbeats.
   * Off: only the ledger's calls, the figures the goals are about.
   */
  sendOthers(on: boolean): void {
    if (on === this.othersOn) return;
    this.othersOn = on;
    if (!on) {
      // Back to the harness's plain connections (see open).
      for (const w of this.workers) w.connection.options.enableAutoPipelining = false;
      return;
    }
    const now = performance.now();
    for (const w of this.workers) {
      // A real worker's connection (connectRedis) pipelines automatically: its report and heartbeat go in one write.
      w.connection.options.enableAutoPipelining = true;
      w.reports ??= new WorkerReports(w.connection, this.keyPrefix);
      w.latency ??= new LatencyRecorder(w.connection, { keyPrefix: this.keyPrefix, cluster: this.settings.cluster });
      w.nextReportAtMs = now;
    }
    this.nextLatencyFlushAtMs = now + this.settings.latencyReportIntervalMs / this.workers.length;
    this.balancers.forEach((b, i) => {
      b.overrides ??= new OverrideStore(b.connection, this.keyPrefix);
      b.nextRegisterAtMs = now + (i * this.settings.balancerHeartbeatIntervalMs) / this.balancers.length;
    });
  }

  /** Tasks arrive at this rate from now on (open loop, spread over the balancers in turn); 0 stops them. */
  setRate(tasksPerSecond: number): void {
    this.tasksPerSecond = tasksPerSecond;
    this.rateFromMs = performance.now();
    this.arrivalsSinceRate = 0;
  }

  /**
   * Puts `count` tasks in flight at once, each with the time left of a task found running in the
   * steady state (see DurationSampler.residual): with count = rate x mean duration, the fleet is in
   * its steady state for that rate as soon as they are placed. Sent through the balancers as reserves.
   */
  async fillToSteadyState(count: number, signal: AbortSignal): Promise<void> {
    await this.reserveMany(count, 'steady-state', undefined, signal);
  }

  /** Holds `tasksEach` slots on each of the first `workers` workers (targeted reserves) until releaseHeld(): busy workers for the heartbeat measurement. */
  async holdBusyWorkers(workers: number, tasksEach: number, signal: AbortSignal): Promise<void> {
    await this.reserveMany(workers * tasksEach, 'hold', (i) => this.workers[Math.floor(i / tasksEach)]!.identity.workerId, signal);
  }

  async releaseHeld(signal: AbortSignal): Promise<void> {
    for (const { worker, lease, balancer } of this.held.splice(0)) {
      await this.waitForRoom(signal);
      this.release(worker, lease, balancer, undefined);
    }
    await this.quiesce(signal);
  }

  /** Stops arrivals and ends every running task now (each released by the balancer that dispatched it), then waits for every call under way. */
  async endAllTasks(signal: AbortSignal): Promise<void> {
    this.setRate(0);
    await this.quiesce(signal);
    const slots = [...this.wheel.values()];
    this.wheel.clear();
    for (const slot of slots) {
      for (let i = 0; i < slot.leases.length; i++) {
        await this.waitForRoom(signal);
        this.tasksRunning--;
        this.release(slot.workers[i]!, slot.leases[i]!, slot.balancers[i]!, undefined);
      }
    }
    await this.releaseHeld(signal);
  }

  /** While paused, no task ends (tasks due end when resumed): the fleet holds still for a check. */
  pauseTaskEnds(paused: boolean): void {
    this.taskEndsPaused = paused;
  }

  /**
   * Resolves when no call is under way (or, with `reservesOnly`, no reservation: under load,
   * tasks end all the time and their releases wait up to a batch window) and no balancer has a
   * task queued.
   */
  async quiesce(signal: AbortSignal, timeoutMs = 30_000, reservesOnly = false): Promise<void> {
    const giveUpAt = performance.now() + timeoutMs;
    while ((reservesOnly ? this.outstandingReserves : this.outstanding) > 0 || this.balancers.some((b) => b.queued.length > 0)) {
      if (performance.now() > giveUpAt) {
        const queued = this.balancers.reduce((sum, b) => sum + b.queued.length, 0);
        throw new Error(
          `the simulated fleet did not quiesce within ${timeoutMs} ms (${this.outstanding} calls under way, ${this.outstandingReserves} of them reservations; ${queued} tasks queued; refused so far: ${JSON.stringify(this.counters.refused)})`,
        );
      }
      signal.throwIfAborted();
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }

  /** What each worker runs, by worker id (for the consistency check). */
  runningByWorker(): Map<string, number> {
    return new Map(this.workers.map((w) => [w.identity.workerId, w.running.size]));
  }

  /** The ledger as seen through a balancer's connection. */
  get anyLedger(): FleetLedger {
    return this.balancers[0]?.ledger ?? this.workers[0]!.ledger;
  }

  /** Longest gap between two ticks since the last call, ms. */
  takeLongestTickGapMs(): number {
    const gap = this.longestTickGapMs;
    this.longestTickGapMs = 0;
    return gap;
  }

  get lastErrorMessage(): string | undefined {
    return this.lastError;
  }

  close(): void {
    clearInterval(this.timer);
    for (const w of this.workers) w.connection.disconnect();
    for (const b of this.balancers) {
      b.connection.disconnect();
      b.subscriber.disconnect();
    }
  }

  /** A reservation answered (bound per balancer and priority: no closure per task). */
  reserved(balancer: SimBalancer, priority: TaskPriority, reservation: SimReservation): void {
    this.outstanding--;
    this.outstandingReserves--;
    if (!reservation.ok) {
      this.counters.refused[reservation.reason] = (this.counters.refused[reservation.reason] ?? 0) + 1;
      balancer.registeredWaiting = true;
      this.queueTask(balancer, priority);
      return;
    }
    this.counters.reserved++;
    const index = this.workerIndexById.get(reservation.workerId);
    if (index === undefined) {
      this.failed('reserve', new Error(`the ledger chose an unknown worker ${reservation.workerId}`));
      return;
    }
    // The balancer hands the task to the worker at once: it runs from now.
    this.workers[index]!.running.add(reservation.leaseId);
    if (this.mode === 'hold') {
      this.held.push({ worker: index, lease: reservation.leaseId, balancer: balancer.index });
      return;
    }
    this.tasksRunning++;
    const durationMs = this.mode === 'steady-state' ? this.durations.residual() : this.durations.next();
    const endMs = Math.max(Math.floor(performance.now() + durationMs), this.wheelDoneUpToMs + 1);
    let slot = this.wheel.get(endMs);
    if (!slot) {
      slot = { workers: [], leases: [], balancers: [], starts: [] };
      this.wheel.set(endMs, slot);
    }
    slot.workers.push(index);
    slot.leases.push(reservation.leaseId);
    slot.balancers.push(balancer.index);
    slot.starts.push(performance.now());
  }

  failed(operation: string, error: unknown): void {
    this.counters.errors++;
    this.lastError = `${operation}: ${error instanceof Error ? error.message : String(error)}`;
  }

  private failedCall(operation: string, error: unknown): void {
    this.outstanding--;
    this.failed(operation, error);
  }

  private tick(): void {
    const now = performance.now();
    const gap = now - this.lastTickAtMs;
    if (gap > this.longestTickGapMs) this.longestTickGapMs = gap;
    this.lastTickAtMs = now;
    this.heartbeats(now);
    if (this.othersOn) this.latencyFlushes(now);
    if (this.balancersRunning) this.balancerTimers(now);
    this.endTasks(now);
    this.arrivals(now);
    this.serveQueues(now);
  }

  private heartbeats(now: number): void {
    if (Number.isNaN(this.nextHeartbeatAtMs)) return;
    const n = this.workers.length;
    const { cluster } = this.settings;
    while (this.nextHeartbeatAtMs <= now) {
      const worker = this.workers[this.heartbeatSeq % n]!;
      this.heartbeatSeq++;
      this.nextHeartbeatAtMs += this.heartbeatPeriodMs / n;
      if (worker.heartbeatUnderWay) {
        this.counters.heartbeatsLate++;
        continue;
      }
      worker.heartbeatUnderWay = true;
      // As worker.ts: the report rides with the first heartbeat due after its interval, sent first in the same turn.
      if (this.othersOn && now >= worker.nextReportAtMs && worker.reports) {
        const { reportIntervalMs, heartbeatIntervalMs } = this.settings;
        worker.nextReportAtMs = now + reportIntervalMs - heartbeatIntervalMs / 2;
        this.counters.reports++;
        this.othersUnderWay.reports++;
        // Its task rate, as the reporter counts it: the tasks it runs over their mean duration.
        const tasksPerSecond = (worker.running.size * 1000) / meanDurationMs(this.settings.durations);
        const report = worker.reports.publish(worker.identity.workerId, sampleReport(tasksPerSecond), workerReportTtlMs(reportIntervalMs));
        this.track(report, 'worker report', () => this.othersUnderWay.reports--);
      }
      this.counters.heartbeats++;
      this.outstanding++;
      worker.ledger.heartbeat(cluster, worker.identity, worker.running).then(worker.onHeartbeat, worker.onHeartbeatError);
    }
  }

  /** Each worker flushes its latency summaries once every latencyReportIntervalMs, the workers in turn (a real worker's setInterval). */
  private latencyFlushes(now: number): void {
    const n = this.workers.length;
    while (this.nextLatencyFlushAtMs <= now) {
      const worker = this.workers[this.latencyFlushSeq % n]!;
      this.latencyFlushSeq++;
      this.nextLatencyFlushAtMs += this.settings.latencyReportIntervalMs / n;
      if (worker.latencyFlushUnderWay || !worker.latency) continue;
      worker.latencyFlushUnderWay = true;
      this.counters.latencyFlushes++;
      this.othersUnderWay.latencyFlushes++;
      this.track(worker.latency.flush(), 'latency flush', () => {
        worker.latencyFlushUnderWay = false;
        this.othersUnderWay.latencyFlushes--;
      });
    }
  }

  /** Counts a call as under way until it ends; `ended` runs either way, and a failure is counted. */
  private track(call: Promise<unknown>, operation: string, ended: () => void): void {
    this.outstanding++;
    call.then(
      () => {
        ended();
        this.outstanding--;
      },
      (error: unknown) => {
        ended();
        this.failedCall(operation, error);
      },
    );
  }

  private balancerTimers(now: number): void {
    const { cluster, otherCluster, heartbeatTimeoutMs, sweepIntervalMs } = this.settings;
    for (const b of this.balancers) {
      if (this.othersOn && b.overrides && now >= b.nextRegisterAtMs && !b.registerUnderWay) {
        // As OverrideFollower: its heartbeat with what it says of itself, the next a period after.
        b.nextRegisterAtMs = now + this.settings.balancerHeartbeatIntervalMs;
        b.registerUnderWay = true;
        this.counters.balancerHeartbeats++;
        this.othersUnderWay.balancerHeartbeats++;
        const info = {
          address: `10.1.0.${b.index}:50050`,
          queued: { userPresent: 0, background: b.queued.length },
          trafficFlag: { enabled: true, candidateShare: 0.1 },
        };
        this.track(b.overrides.balancerHeartbeat(b.balancerId, info), 'balancer heartbeat', () => {
          b.registerUnderWay = false;
          this.othersUnderWay.balancerHeartbeats--;
        });
      }
      if (now >= b.nextSweepAtMs) {
        // setInterval in the balancer: both clusters, whether or not the previous sweep ended.
        b.nextSweepAtMs += sweepIntervalMs;
        for (const c of [cluster, otherCluster]) {
          this.counters.sweeps++;
          this.outstanding++;
          b.ledger.sweep(c, heartbeatTimeoutMs).then((swept) => {
            this.outstanding--;
            this.counters.workersRemoved += swept.workersRemoved;
            this.counters.leasesExpired += swept.leasesExpired;
          }, this.onSweepError);
        }
      }
      if (now >= b.nextDirectoryAtMs && !b.directoryUnderWay) {
        b.directoryUnderWay = true;
        void this.refreshDirectory(b);
      }
    }
  }

  /** As WorkerDirectory.refresh: each cluster in turn; the next refresh directoryRefreshIntervalMs after this one ends. */
  private async refreshDirectory(b: SimBalancer): Promise<void> {
    this.outstanding++;
    try {
      for (const c of [this.settings.cluster, this.settings.otherCluster]) {
        this.counters.directoryReads++;
        await b.ledger.readDirectory(c);
      }
    } catch (error) {
      this.failed('directory', error);
    } finally {
      this.outstanding--;
      b.directoryUnderWay = false;
      b.nextDirectoryAtMs = performance.now() + this.settings.directoryRefreshIntervalMs;
    }
  }

  private endTasks(now: number): void {
    if (this.taskEndsPaused) return;
    const upTo = Math.floor(now);
    for (let ms = this.wheelDoneUpToMs + 1; ms <= upTo; ms++) {
      const slot = this.wheel.get(ms);
      if (!slot) continue;
      this.wheel.delete(ms);
      for (let i = 0; i < slot.leases.length; i++) {
        this.tasksRunning--;
        this.release(slot.workers[i]!, slot.leases[i]!, slot.balancers[i]!, now - slot.starts[i]!);
      }
    }
    if (upTo > this.wheelDoneUpToMs) this.wheelDoneUpToMs = upTo;
  }

  /**
   * The worker's task ended: it stops counting it as running, and the balancer that dispatched the
   * task releases its lease (the answer reaches the balancer at once here). While sendOthers, the
   * worker counts the task's run time (`ranMs`) in its latency summaries.
   */
  private release(workerIndex: number, leaseId: string, balancerIndex: number, ranMs: number | undefined): void {
    const worker = this.workers[workerIndex]!;
    worker.running.delete(leaseId);
    if (this.othersOn && ranMs !== undefined) worker.latency?.record(this.randomIntegration(), ranMs);
    this.counters.releaseCalls++;
    this.outstanding++;
    this.balancers[balancerIndex]!.ledger.release(this.settings.cluster, leaseId).then(this.onReleased, this.onReleaseError);
  }

  private arrivals(now: number): void {
    if (this.tasksPerSecond <= 0) return;
    const due = Math.floor(((now - this.rateFromMs) * this.tasksPerSecond) / 1000) - this.arrivalsSinceRate;
    if (due <= 0) return;
    this.arrivalsSinceRate += due;
    this.counters.arrivals += due;
    for (let i = 0; i < due; i++) {
      if (this.outstandingReserves >= this.settings.maxOutstandingReserves) {
        this.counters.arrivalsDropped += due - i;
        return;
      }
      const balancer = this.balancers[this.nextBalancer++ % this.balancers.length]!;
      this.sendReserve(balancer, Math.random() < this.settings.userPresentShare ? 'user' : 'background', undefined);
    }
  }

  private randomIntegration(): string {
    return this.integrationNames[Math.floor(Math.random() * this.integrationNames.length)]!;
  }

  private sendReserve(balancer: SimBalancer, priority: TaskPriority, targetWorkerId: string | undefined): void {
    this.counters.reserveCalls++;
    this.outstanding++;
    this.outstandingReserves++;
    const integration = this.settings.integrationLimits === 'every' ? this.randomIntegration() : undefined;
    balancer.ledger
      .reserve(this.settings.cluster, {
        priority,
        balancerId: balancer.balancerId,
        waitIfNone: true,
        ...(targetWorkerId ? { targetWorkerId } : {}),
        ...(integration ? { integration } : {}),
      })
      .then(priority === 'user' ? balancer.onReserveUser : balancer.onReserveBackground, this.onReserveError);
  }

  private queueTask(balancer: SimBalancer, priority: TaskPriority): void {
    if (balancer.queued.length >= maxQueuedPerBalancer) {
      this.counters.refused['queue-full'] = (this.counters.refused['queue-full'] ?? 0) + 1;
      return;
    }
    if (priority === 'user') balancer.queued.unshift(priority);
    else balancer.queued.push(priority);
  }

  /** As Admission.serveQueue: on a slot-freed message or every queueRecheckIntervalMs, reserve for up to 16 queued tasks in one round trip. */
  private serveQueues(now: number): void {
    for (const b of this.balancers) {
      if (b.queued.length === 0) {
        if (b.registeredWaiting) {
          b.registeredWaiting = false;
          this.counters.stopWaitings++;
          this.outstanding++;
          b.ledger.stopWaiting(this.settings.cluster, b.balancerId).then(this.onStopWaitingDone, this.onStopWaitingError);
        }
        continue;
      }
      if (!b.woken && now < b.nextRecheckAtMs) continue;
      b.woken = false;
      b.nextRecheckAtMs = now + this.settings.queueRecheckIntervalMs;
      for (const priority of b.queued.splice(0, reservationsPerRoundTrip)) this.sendReserve(b, priority, undefined);
    }
  }

  /** Sends `count` reserves as fast as the bound on reserves under way lets it, through the balancers in turn. */
  private async reserveMany(count: number, mode: ReserveMode, targetOf: ((i: number) => string) | undefined, signal: AbortSignal): Promise<void> {
    // Arrivals stop meanwhile (the caller sets the next rate after): the wait below is for these
    // reservations, and with arrivals going on some would always be under way (each waits for its
    // balancer's batch window).
    this.setRate(0);
    this.mode = mode;
    try {
      for (let i = 0; i < count; i++) {
        await this.waitForRoom(signal);
        const balancer = this.balancers[this.nextBalancer++ % this.balancers.length]!;
        this.sendReserve(balancer, mode === 'hold' || Math.random() < this.settings.userPresentShare ? 'user' : 'background', targetOf?.(i));
      }
      await this.quiesce(signal, 30_000, true);
    } finally {
      this.mode = 'task';
    }
  }

  /** Waits while maxOutstandingReserves calls are under way. */
  private async waitForRoom(signal: AbortSignal): Promise<void> {
    while (this.outstanding >= this.settings.maxOutstandingReserves) {
      signal.throwIfAborted();
      await new Promise((resolve) => setImmediate(resolve));
    }
  }
}
