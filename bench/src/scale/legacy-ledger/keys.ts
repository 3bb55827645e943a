// FROZEN COPY of fleet/src/keys.ts as it was before the ledger's redesign around lease records (the "old
// scripts"). Used only by the scale benchmark's fleet-scale mode to compare old against new in one
// run; not production code, never imported outside bench/src/scale/. Do not change or fix it.
/**
 * Redis key names of one cluster's ledger. Every key carries the same hash tag
 * `{<prefix>:<cluster>}`, so each ledger script touches a single Redis Cluster slot.
 * The order is the KEYS order every script expects (see lua/includes/set-worker.lua).
 */
export interface ClusterKeys {
  readonly all: readonly string[];
  readonly free: string;
  readonly capacity: string;
  readonly inflight: string;
  readonly address: string;
  readonly heartbeat: string;
  readonly draining: string;
  readonly leases: string;
  readonly leaseWorker: string;
  readonly totals: string;
  readonly waiting: string;
  readonly waitingUser: string;
  readonly workerLeases: string;
  /** Workers balancers could not connect to, by the end of the mark (ms); see lua/unreachable-13.lua. */
  readonly unreachable: string;
  /** Pub/sub channel on which scripts announce freed slots while balancers wait. */
  readonly slotFreedChannel: string;
}

export function clusterKeys(prefix: string, cluster: string): ClusterKeys {
  const tag = `{${prefix}:${cluster}}`;
  const key = (name: string) => `${tag}:${name}`;
  const named = {
    free: key('free'),
    capacity: key('capacity'),
    inflight: key('inflight'),
    address: key('address'),
    heartbeat: key('heartbeat'),
    draining: key('draining'),
    leases: key('leases'),
    leaseWorker: key('lease-worker'),
    totals: key('totals'),
    waiting: key('waiting'),
    waitingUser: key('waiting-user'),
    workerLeases: key('worker-leases'),
    unreachable: key('unreachable'),
  };
  return { ...named, all: Object.values(named), slotFreedChannel: key('slot-freed') };
}
