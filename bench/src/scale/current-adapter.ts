import type { Redis } from 'ioredis';
import { Ledger } from '@headroom/fleet';
import type { FleetLedger, FleetLedgerKind } from './fleet-ledger';

/** The ledger of @headroom/fleet as built now, called as today's worker and balancer call it. */
export const currentLedgerKind: FleetLedgerKind = {
  scripts: 'new',
  releasedBy: 'balancer',
  description:
    'the ledger of @headroom/fleet (fleet/src/ledger.ts and fleet/lua/ as built for this run: heartbeats carry the lease ids the worker holds; balancers release the leases of answered tasks, batched with their reservations)',
  open(redis: Redis, keyPrefix: string): FleetLedger {
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
      async sweep(cluster, heartbeatTimeoutMs) {
        const swept = await ledger.sweep(cluster, heartbeatTimeoutMs);
        // Leases no longer expire one by one: a worker's go with it when it is swept.
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
  },
};
