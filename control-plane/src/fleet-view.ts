import {
  readBalancerErrors,
  type BalancerErrorRates,
  type ClusterSnapshot,
  type EjectionReason,
  type Ledger,
  type RedisConnection,
  type WorkerRecord,
  type WorkerReport,
  type WorkerReports,
} from '@headroom/fleet';

export type ClusterRole = 'baseline' | 'candidate';

export interface ClusterSummary {
  name: string;
  role: ClusterRole;
  workers: number;
  drainingWorkers: number;
  capacity: number;
  inFlight: number;
  free: number;
  /** Leases held (tasks reserved or running). */
  leases: number;
  /** Balancers with tasks waiting for a slot in this cluster. */
  waitingBalancers: number;
  /** Tasks finished per second: the workers' (their latest reports, a few seconds) and the balancers' errors. */
  tasksPerSecond: number;
  /** Of those, tasks that failed per second: on the workers, and in the balancers before any worker ran them (`balancerErrorsPerSecond`). */
  errorsPerSecond: number;
  /**
   * Tasks the balancers failed before any worker ran them, per second over the last 10 to 20 s:
   * deadline passed in the queue, queue full, shed, no worker took it.
   */
  balancerErrorsPerSecond: number;
  /** The same by integration and HR_ERR_* code, the most first (at most 20). */
  balancerErrors: BalancerErrorRate[];
  /** Tasks the workers held (queued or running) at their last heartbeats: what they run, by their own count. */
  heldByWorkers: number;
  /**
   * inFlight minus heldByWorkers: slots the ledger counts that the workers do not run (negative:
   * fewer than they run). A few are tasks on their way to a worker or answers on their way back;
   * more is an error of the ledger, which the workers' next heartbeats correct.
   */
  ledgerDriftSlots: number;
}

export interface BalancerErrorRate {
  integration: string;
  code: string;
  perSecond: number;
}

export interface WorkerSummary {
  workerId: string;
  cluster: string;
  address: string;
  maxParallelism: number;
  inFlight: number;
  free: number;
  draining: boolean;
  /** Balancers could not connect to it: none sends it a task until then (or until a health check passes); null when not marked. */
  unreachableUntilUnixMs: number | null;
  /** Why balancers skip it: 'unreachable' (they could not connect to it) or 'failing' (it failed far more than the other workers on an integration); null when not marked. */
  ejectedReason: EjectionReason | null;
  lastHeartbeatUnixMs: number;
  /** Tasks it held (queued or running) at its last heartbeat: what it runs, by its own count; null when it did not say. */
  heldAtHeartbeat: number | null;
  /** inFlight minus heldAtHeartbeat (see ClusterSummary.ledgerDriftSlots); null when it did not say. */
  ledgerDriftSlots: number | null;
  /** Its latest report: heap, GC, event loop, latency; null until it sent one. */
  stats: WorkerReport | null;
}

/** The window over which balancer errors are counted: the slots that overlap it (10 to 20 s with the default slots). */
export const balancerErrorWindowMs = 10_000;
/** Most entries of ClusterSummary.balancerErrors. */
const maxBalancerErrorEntries = 20;

/** What the ledger says of the two clusters, shaped for the API. */
export class FleetView {
  constructor(
    private readonly ledger: Ledger,
    private readonly reports: WorkerReports,
    readonly clusters: { baseline: string; candidate: string },
    /** Where the balancers count their errors (the ledger's Redis and key prefix). */
    private readonly balancerErrors: { redis: RedisConnection; keyPrefix: string },
  ) {}

  async snapshots(): Promise<{ role: ClusterRole; snapshot: ClusterSnapshot }[]> {
    const [baseline, candidate] = await Promise.all([this.ledger.snapshot(this.clusters.baseline), this.ledger.snapshot(this.clusters.candidate)]);
    return [
      { role: 'baseline', snapshot: baseline },
      { role: 'candidate', snapshot: candidate },
    ];
  }

  async clusterSummaries(): Promise<ClusterSummary[]> {
    const snapshots = await this.snapshots();
    const [reports, balancerErrors] = await Promise.all([
      this.reportsOf(snapshots),
      readBalancerErrors(this.balancerErrors.redis, this.balancerErrors.keyPrefix, balancerErrorWindowMs),
    ]);
    return snapshots.map(({ role, snapshot }) => summarise(role, snapshot, reports, balancerErrors));
  }

  /** Per cluster, the ledger's drift (ClusterSummary.ledgerDriftSlots), for the metrics. */
  async ledgerDrift(): Promise<{ cluster: string; ledgerDriftSlots: number }[]> {
    return (await this.snapshots()).map(({ snapshot }) => ({ cluster: snapshot.cluster, ledgerDriftSlots: drift(snapshot.workers).ledgerDriftSlots }));
  }

  async workers(): Promise<WorkerSummary[]> {
    const snapshots = await this.snapshots();
    const reports = await this.reportsOf(snapshots);
    return snapshots.flatMap(({ snapshot }) =>
      snapshot.workers.map((w) => ({
        workerId: w.workerId,
        cluster: snapshot.cluster,
        address: w.address,
        maxParallelism: w.capacity,
        inFlight: w.inflight,
        free: Math.max(0, w.freeSlots),
        draining: w.draining,
        unreachableUntilUnixMs: w.unreachableUntilMs,
        ejectedReason: w.ejectedReason,
        lastHeartbeatUnixMs: w.lastHeartbeatMs,
        heldAtHeartbeat: w.heldAtHeartbeat,
        ledgerDriftSlots: w.heldAtHeartbeat === null ? null : w.inflight - w.heldAtHeartbeat,
        stats: reports.get(w.workerId) ?? null,
      })),
    );
  }

  private reportsOf(snapshots: { snapshot: ClusterSnapshot }[]): Promise<Map<string, WorkerReport>> {
    return this.reports.read(snapshots.flatMap(({ snapshot }) => snapshot.workers.map((w) => w.workerId)));
  }

  /** Asks a worker to drain; false when no cluster knows it. */
  async drain(workerId: string): Promise<{ cluster: string } | undefined> {
    for (const cluster of [this.clusters.baseline, this.clusters.candidate]) {
      if (await this.ledger.drain(cluster, workerId)) return { cluster };
    }
    return undefined;
  }
}

function summarise(role: ClusterRole, snapshot: ClusterSnapshot, reports: Map<string, WorkerReport>, balancerErrors: BalancerErrorRates): ClusterSummary {
  // Capacity and free slots count the workers that take tasks, as the ledger's totals do.
  const live = snapshot.workers.filter((w) => !w.draining && w.unreachableUntilMs === null);
  const reported = snapshot.workers.flatMap((w) => reports.get(w.workerId) ?? []);
  const workersRate = (of: (report: WorkerReport) => number) => reported.reduce((sum, report) => sum + of(report), 0);
  const failed = balancerErrorRates(snapshot.cluster, balancerErrors);
  const failedPerSecond = failed.reduce((sum, entry) => sum + entry.perSecond, 0);
  return {
    name: snapshot.cluster,
    role,
    workers: snapshot.workers.length,
    drainingWorkers: snapshot.workers.filter((w) => w.draining).length,
    capacity: live.reduce((sum, w) => sum + w.capacity, 0),
    inFlight: snapshot.workers.reduce((sum, w) => sum + w.inflight, 0),
    free: live.reduce((sum, w) => sum + Math.max(0, w.freeSlots), 0),
    leases: snapshot.leases,
    waitingBalancers: snapshot.waitingBalancers.length,
    tasksPerSecond: roundRate(workersRate((report) => report.tasksPerSecond) + failedPerSecond),
    errorsPerSecond: roundRate(workersRate((report) => report.errorsPerSecond) + failedPerSecond),
    balancerErrorsPerSecond: roundRate(failedPerSecond),
    balancerErrors: failed.slice(0, maxBalancerErrorEntries).map((entry) => ({ ...entry, perSecond: roundRate(entry.perSecond) })),
    ...drift(snapshot.workers),
  };
}

/** One cluster's balancer errors per second, the most first. */
function balancerErrorRates(cluster: string, { seconds, counts }: BalancerErrorRates): BalancerErrorRate[] {
  return counts
    .filter((entry) => entry.cluster === cluster)
    .map((entry) => ({ integration: entry.integration, code: entry.code, perSecond: entry.count / seconds }))
    .sort((a, b) => b.perSecond - a.perSecond || a.integration.localeCompare(b.integration) || a.code.localeCompare(b.code));
}

/** What the ledger counts against what the workers that said hold (workers that did not say are left out of both). */
function drift(workers: readonly WorkerRecord[]): { heldByWorkers: number; ledgerDriftSlots: number } {
  let heldByWorkers = 0;
  let counted = 0;
  for (const worker of workers) {
    if (worker.heldAtHeartbeat === null) continue;
    heldByWorkers += worker.heldAtHeartbeat;
    counted += worker.inflight;
  }
  return { heldByWorkers, ledgerDriftSlots: counted - heldByWorkers };
}

function roundRate(perSecond: number): number {
  return Math.round(perSecond * 10) / 10;
}
