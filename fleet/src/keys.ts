/**
 * Redis key names of one cluster's ledger. Every key carries the same hash tag
 * `{<prefix>:<cluster>}`, so each ledger script touches a single Redis Cluster slot.
 * The order is the KEYS order every script expects (see lua/includes/ledger.lua).
 */
export interface ClusterKeys {
  /** KEYS of every ledger script, in the order lua/includes/ledger.lua binds them. */
  readonly all: readonly string[];
  readonly free: string;
  readonly capacity: string;
  readonly inflight: string;
  readonly address: string;
  readonly heartbeat: string;
  readonly draining: string;
  readonly totals: string;
  readonly waiting: string;
  readonly waitingUser: string;
  /** Workers balancers could not connect to, by the end of the mark (ms); see lua/unreachable-13.lua. */
  readonly unreachable: string;
  /** Leases reserved on each worker since its last heartbeat, and in the period before. */
  readonly reserved: string;
  /** Redis's clock (µs) at the last change of the workers or their addresses. */
  readonly directoryVersion: string;
  /** Not a key: `leasesPrefix + workerId` is the hash of that worker's leases. */
  readonly leasesPrefix: string;
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
    totals: key('totals'),
    waiting: key('waiting'),
    waitingUser: key('waiting-user'),
    unreachable: key('unreachable'),
    reserved: key('reserved'),
    directoryVersion: key('directory-version'),
    leasesPrefix: key('leases:'),
  };
  return { ...named, all: Object.values(named), slotFreedChannel: key('slot-freed') };
}
