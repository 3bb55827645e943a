/**
 * What the fleet-scale harness needs of a slot ledger, as real workers and balancers call it:
 * one small interface, two adapters (legacy-adapter.ts: the frozen old scripts;
 * current-adapter.ts: the `Ledger` of @headroom/fleet), so that both run on the same harness in
 * the same run. Each simulated process opens its own adapter on its own connection, as a real
 * process builds its own `Ledger` on its own Redis connection.
 */
import type { Redis } from 'ioredis';

export type TaskPriority = 'user' | 'background';

export interface SimWorkerIdentity {
  readonly workerId: string;
  readonly address: string;
  readonly capacity: number;
}

export type SimReservation = { ok: true; leaseId: string; workerId: string } | { ok: false; reason: string };

/** A worker as the ledger counts it, for the consistency check at the end of a run. */
export interface LedgerWorkerCount {
  workerId: string;
  capacity: number;
  inflight: number;
  freeSlots: number;
}

export interface LedgerCounts {
  workers: LedgerWorkerCount[];
  totalCapacity: number;
  totalFree: number;
}

/** One simulated process's view of the ledger (one connection). */
export interface FleetLedger {
  /**
   * A worker's periodic heartbeat with what it runs: `running` holds the lease ids of its running
   * tasks (the old scripts renew each one; the new ledger drops the leases it does not hold).
   * Resolves to what the worker multiplies its period by until its next heartbeat (the new
   * ledger's HeartbeatReply.heartbeatScale; 1 with the old scripts).
   */
  heartbeat(cluster: string, worker: SimWorkerIdentity, running: ReadonlySet<string>, answeredTasks: number): Promise<number>;
  reserve(cluster: string, request: { priority: TaskPriority; balancerId: string; waitIfNone: boolean; targetWorkerId?: string }): Promise<SimReservation>;
  /** `answered`: released by the balancer that received the worker's answer (see FleetLedgerKind.releasedBy). */
  release(cluster: string, leaseId: string, answered: boolean): Promise<boolean>;
  /** A balancer's periodic sweep; leasesExpired is 0 where the ledger no longer expires leases. */
  sweep(cluster: string, heartbeatTimeoutMs: number): Promise<{ workersRemoved: number; leasesExpired: number }>;
  /** A balancer's periodic read of the worker directory (balancer/src/worker-directory.ts); returns the workers it holds. */
  readDirectory(cluster: string): Promise<number>;
  /** A balancer whose queue for the cluster emptied says so (balancer/src/admission.ts syncRegistration). */
  stopWaiting(cluster: string, balancerId: string): Promise<void>;
  /** Every worker's counts and the cluster totals (reads the whole cluster: only for checks). */
  counts(cluster: string): Promise<LedgerCounts>;
  deregister(cluster: string, workerId: string): Promise<void>;
  /** The pub/sub channel on which the ledger announces freed slots while balancers wait. */
  slotFreedChannel(cluster: string): string;
}

export interface FleetLedgerKind {
  /** 'old': the frozen copy of the scripts before the redesign; 'new': @headroom/fleet as built now. */
  readonly scripts: 'old' | 'new';
  /**
   * Who releases a task's lease when it ends: the worker on its own connection (old), or the
   * balancer that gets the worker's answer, batched with its reservations (new; the worker's
   * heartbeat then counts its answers).
   */
  readonly releasedBy: 'worker' | 'balancer';
  readonly description: string;
  open(redis: Redis, keyPrefix: string): FleetLedger;
}
