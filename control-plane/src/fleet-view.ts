import type { ClusterSnapshot, EjectionReason, Ledger, WorkerReport, WorkerReports } from '@headroom/fleet';

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
  /** Tasks finished per second, from the workers' latest reports (a few seconds). */
  tasksPerSecond: number;
  /** Of those, tasks that failed per second. */
  errorsPerSecond: number;
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
  /** Its latest report: heap, GC, event loop, latency; null until it sent one. */
  stats: WorkerReport | null;
}

/** What the ledger says of the two clusters, shaped for the API. */
export class FleetView {
  constructor(
    private readonly ledger: Ledger,
    private readonly reports: WorkerReports,
    readonly clusters: { baseline: string; candidate: string },
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
    const reports = await this.reportsOf(snapshots);
    return snapshots.map(({ role, snapshot }) => summarise(role, snapshot, reports));
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

function summarise(role: ClusterRole, snapshot: ClusterSnapshot, reports: Map<string, WorkerReport>): ClusterSummary {
  // Capacity and free slots count the workers that take tasks, as the ledger's totals do.
  const live = snapshot.workers.filter((w) => !w.draining && w.unreachableUntilMs === null);
  const reported = snapshot.workers.flatMap((w) => reports.get(w.workerId) ?? []);
  const rate = (of: (report: WorkerReport) => number) => Math.round(reported.reduce((sum, report) => sum + of(report), 0) * 10) / 10;
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
    tasksPerSecond: rate((report) => report.tasksPerSecond),
    errorsPerSecond: rate((report) => report.errorsPerSecond),
  };
}
