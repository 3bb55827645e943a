/**
 * The slot ledger as the fleet-scale harness calls it: the `Ledger` of @headroom/fleet, called as
 * today's workers and balancers call it, behind the few calls the simulated fleet (fleet-sim.ts)
 * makes, so that the harness's hot loop handles plain values and no Ledger result types. Each
 * simulated process opens its own on its own connection, as a real process builds its own `Ledger`
 * on its own Redis connection.
 */
import type { Redis } from 'ioredis';
import { Ledger, type IntegrationLimit } from '@headroom/fleet';

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
   * A worker's periodic heartbeat with the lease ids of its running tasks (the ledger drops the
   * leases it does not hold). Resolves to what the worker multiplies its period by until its next
   * heartbeat (HeartbeatReply.heartbeatScale).
   */
  heartbeat(cluster: string, worker: SimWorkerIdentity, running: ReadonlySet<string>): Promise<number>;
  reserve(
    cluster: string,
    request: { priority: TaskPriority; balancerId: string; waitIfNone: boolean; targetWorkerId?: string; integration?: string },
  ): Promise<SimReservation>;
  /** An operator's limit on one integration (as the control plane sets it). */
  setIntegrationLimit(cluster: string, integration: string, limit: IntegrationLimit): Promise<void>;
  /** Sent by the balancer that received the worker's answer, batched with its reservations. */
  release(cluster: string, leaseId: string): Promise<boolean>;
  /** A balancer's periodic sweep; leasesExpired stays 0, as leases no longer expire one by one (a worker's go with it). */
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

/** What a run measured, for its JSON. */
export const fleetLedgerDescription =
  'the ledger of @headroom/fleet (fleet/src/ledger.ts and fleet/lua/ as built for this run: heartbeats carry the lease ids the worker holds; balancers release the leases of answered tasks, batched with their reservations)';

export function openFleetLedger(redis: Redis, keyPrefix: string): FleetLedger {
  const ledger = new Ledger(redis, { keyPrefix });
  // A balancer's directory: the version it last read, and how many workers it holds, per cluster.
  const directory = new Map<string, { version: string; workers: number }>();
  return {
    async heartbeat(cluster, worker, running) {
      return (
        await ledger.heartbeat(cluster, {
          workerId: worker.workerId,
          address: worker.address,
          capacity: worker.capacity,
          draining: false,
          heldLeaseIds: running,
          addressUnchanged: true,
        })
      ).heartbeatScale;
    },
    async reserve(cluster, request) {
      const reservation = await ledger.reserve(cluster, request);
      return reservation.ok ? { ok: true, leaseId: reservation.leaseId, workerId: reservation.workerId } : reservation;
    },
    release: (cluster, leaseId) => ledger.release(cluster, leaseId),
    setIntegrationLimit: (cluster, integration, limit) => ledger.setIntegrationLimit(cluster, integration, limit),
    async sweep(cluster, heartbeatTimeoutMs) {
      const swept = await ledger.sweep(cluster, heartbeatTimeoutMs);
      return { workersRemoved: swept.workersRemoved, leasesExpired: 0 };
    },
    async readDirectory(cluster) {
      // What the balancer's WorkerDirectory reads each period: the whole list only when it changed.
      const known = directory.get(cluster);
      const read = await ledger.addressesIfChanged(cluster, known?.version);
      if (!read.changed) return known?.workers ?? 0;
      directory.set(cluster, { version: read.version, workers: read.addresses.size });
      return read.addresses.size;
    },
    stopWaiting: (cluster, balancerId) => ledger.stopWaiting(cluster, balancerId, 'all'),
    async counts(cluster) {
      const snapshot = await ledger.snapshot(cluster);
      return {
        workers: snapshot.workers.map((w) => ({ workerId: w.workerId, capacity: w.capacity, inflight: w.inflight, freeSlots: w.freeSlots })),
        totalCapacity: snapshot.totalCapacity,
        totalFree: snapshot.totalFree,
      };
    },
    async deregister(cluster, workerId) {
      await ledger.deregister(cluster, workerId);
    },
    slotFreedChannel: (cluster) => ledger.keys(cluster).slotFreedChannel,
  };
}
