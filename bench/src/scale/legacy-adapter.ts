import type { Redis } from 'ioredis';
import type { FleetLedger, FleetLedgerKind } from './fleet-ledger';
import { Ledger } from './legacy-ledger/ledger';
import { defineScripts, loadScripts, type LuaScript } from './legacy-ledger/script-loader';

/** The old lease lifetime (the legacy ledger's default): a running task's lease is renewed by every heartbeat. */
const legacyLeaseTtlMs = 3_000;

let scripts: LuaScript[] | undefined;

/** The frozen old ledger (legacy-ledger/), called as a real worker and balancer of that time called it. */
export const legacyLedgerKind: FleetLedgerKind = {
  scripts: 'old',
  releasedBy: 'worker',
  description: `the ledger before issue 14 (frozen copy in bench/src/scale/legacy-ledger/, leaseTtlMs ${legacyLeaseTtlMs}; heartbeats renew each running lease)`,
  open(redis: Redis, keyPrefix: string): FleetLedger {
    // One copy of the scripts' sources for the whole simulated fleet (the Ledger then finds them defined):
    // 4,000 copies would only swell this process's heap and its GC pauses.
    defineScripts(redis, (scripts ??= loadScripts()));
    const ledger = new Ledger(redis, { keyPrefix, leaseTtlMs: legacyLeaseTtlMs });
    return {
      async heartbeat(cluster, worker, running) {
        // As the old worker did: `runningLeaseIds: [...running.keys()]`.
        await ledger.heartbeat(cluster, {
          workerId: worker.workerId,
          address: worker.address,
          capacity: worker.capacity,
          draining: false,
          runningLeaseIds: [...running],
        });
        return 1;
      },
      async reserve(cluster, request) {
        const reservation = await ledger.reserve(cluster, request);
        return reservation.ok ? { ok: true, leaseId: reservation.leaseId, workerId: reservation.workerId } : reservation;
      },
      release: (cluster, leaseId) => ledger.release(cluster, leaseId),
      sweep: (cluster, heartbeatTimeoutMs) => ledger.sweep(cluster, heartbeatTimeoutMs),
      async readDirectory(cluster) {
        return (await ledger.addresses(cluster)).size;
      },
      stopWaiting: (cluster, balancerId) => ledger.stopWaiting(cluster, balancerId, 'all'),
      async counts(cluster) {
        const snapshot = await ledger.snapshot(cluster);
        // Free slots as reserve sees them: the score in the `free` sorted set (the snapshot computes capacity - inflight itself).
        const scores = await redis.zrange(ledger.keys(cluster).free, 0, -1, 'WITHSCORES');
        const free = new Map<string, number>();
        for (let i = 0; i < scores.length; i += 2) free.set(scores[i]!, Number(scores[i + 1]));
        return {
          workers: snapshot.workers.map((w) => ({
            workerId: w.workerId,
            capacity: w.capacity,
            inflight: w.inflight,
            freeSlots: free.get(w.workerId) ?? Number.NaN,
          })),
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
