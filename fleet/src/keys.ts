/**
 * Redis key names of one cluster's ledger. Every key carries the same hash tag
 * `{<prefix>:<cluster>}`, so each ledger script touches a single Redis Cluster slot.
 * The order is the KEYS order every script expects (see lua/includes/ledger.lua).
 */
export interface ClusterKeys {
  /** KEYS of every ledger script, in the order lua/includes/ledger.lua binds them. */
  readonly all: readonly string[];
  readonly free: string;
  /**
   * HASH of every registered worker: `<worker>` -> its max parallelism, and `<worker>|held` -> the
   * leases it held (tasks queued or running there) at its last heartbeat (lua/heartbeat-12.lua).
   */
  readonly workers: string;
  /** In-flight counts of the workers out of `free` (draining, marked unreachable); one in `free` holds its count in its score. */
  readonly inflight: string;
  readonly address: string;
  readonly heartbeat: string;
  readonly draining: string;
  /**
   * HASH `capacity`, `free`: sums over the workers that take tasks; and per integration the field
   * `integrationField(<integration>)`: what the ledger holds of it (see readIntegrationField), all
   * read by every settle call in one HMGET.
   */
  readonly totals: string;
  readonly waiting: string;
  readonly waitingUser: string;
  /** Workers balancers could not connect to, by the end of the mark (ms); see lua/unreachable-12.lua. */
  readonly unreachable: string;
  /**
   * HASH worker -> why it is marked ('unreachable' | 'failing'). Not in `all`, so the scripts keep
   * 12 keys: lua/includes/ledger.lua builds it from `unreachable`, with the same hash tag.
   */
  readonly ejectionReason: string;
  /**
   * Not a key: `integrationRatePrefix + integration` is the STRING of that integration's start
   * rate (its GCRA's theoretical arrival time, Redis's clock in µs), which expires when it falls
   * due (lua/settle-12.lua). Not in `all`: built from `totals` (lua/includes/ledger.lua).
   */
  readonly integrationRatePrefix: string;
  /** Redis's clock (µs) at the last change of the workers or their addresses. */
  readonly directoryVersion: string;
  /** Not a key: `leasesPrefix + workerId` is the hash of that worker's leases. */
  readonly leasesPrefix: string;
  /** Pub/sub channel on which scripts announce freed slots while balancers wait. */
  readonly slotFreedChannel: string;
}

/**
 * The layout of the ledger's keys and values, in every key's name: a version that reads them
 * otherwise (a score's meaning changed) uses keys of its own, so processes of two versions on
 * one prefix keep two ledgers apart (a balancer sees the workers of its own version) instead of
 * misreading each other's. Bump it whenever a script reads or writes a key differently.
 * 2: the free set's scores are free slots x 2^30 plus a turn (before: plus a fraction).
 * 3: a worker's count is its lease records, settled by the leases it holds (before: answer counts in `workers`).
 * 4: `workers` also holds "<worker>|held", the leases the worker held at its last heartbeat.
 * 5: a lease record's field names its integration ("<nonce>|<integration>"), counted per integration.
 * 6: a limit may carry a start rate ('max:<n>;rate:<r>', 'rate:<r>'; layout 5's settle would read
 *    'max:20;rate:5' as no limit), kept per integration in `integrationRatePrefix` keys.
 * 7: an integration's count, limit and user-present wait are fields of one hash, `integrations`
 *    (before: three hashes), so that settle reads them in one call.
 * 8: they are one field per integration of `totals` (before: three of `integrations`), so that
 *    settle reads the totals and its batch's integrations in one call, one field each.
 */
export const ledgerLayout = 8;

export function clusterKeys(prefix: string, cluster: string): ClusterKeys {
  const tag = `{${prefix}:${cluster}}`;
  const key = (name: string) => `${tag}:l${ledgerLayout}:${name}`;
  const named = {
    free: key('free'),
    workers: key('workers'),
    inflight: key('inflight'),
    address: key('address'),
    heartbeat: key('heartbeat'),
    draining: key('draining'),
    totals: key('totals'),
    waiting: key('waiting'),
    waitingUser: key('waiting-user'),
    unreachable: key('unreachable'),
    directoryVersion: key('directory-version'),
    leasesPrefix: key('leases:'),
  };
  return {
    ...named,
    all: Object.values(named),
    ejectionReason: `${named.unreachable}:reason`,
    integrationRatePrefix: `${named.totals}:integration-rate:`,
    slotFreedChannel: key('slot-freed'),
  };
}

/** The field of `totals` that holds what the ledger holds of an integration (integration names hold no ':', so it meets no other field). */
export function integrationField(integration: string): string {
  return `i:${integration}`;
}

/** What the ledger holds of an integration, from its field of `totals`: "<count>" or "<count>|<user-present wait until, ms>|<its own limit>". */
export interface IntegrationField {
  /** Its lease records in the cluster: its tasks in flight. */
  inflight: number;
  /** Until when (Redis's clock, ms; 0: none) a user-present task waits at its limit on some balancer: none of its background tasks start until then. */
  userWaitUntilMs: number;
  /** Its own limit as stored ('max:<n>', 'share:<x>' or 'off', then ';rate:<r>', or 'rate:<r>' alone; see integration-limits.ts); null: none, the default applies. */
  limitSpec: string | null;
}

export function readIntegrationField(value: string): IntegrationField {
  const [count = '0', waitUntil = '0', spec = ''] = value.split('|');
  return { inflight: Number(count), userWaitUntilMs: Number(waitUntil), limitSpec: spec === '' ? null : spec };
}

/**
 * A SCAN or KEYS pattern that matches every key and pub/sub channel under `prefix`: each one
 * starts with a hash tag `{<prefix>:...}`. The prefix allows no glob characters, so it matches
 * itself only. (An ACL rule `~{<prefix>*` is wider: it also admits prefixes that extend this one.)
 */
export function keyspacePattern(prefix: string): string {
  return `{${prefix}:*`;
}

/**
 * Redis key names of the control state: the rollback override and the balancers that follow it,
 * and the control plane's audit announcements, last rollback and CPU profiles. Every key carries the hash
 * tag `{<prefix>:control}`, so each script on them stays in one Redis Cluster slot.
 */
export interface ControlKeys {
  /** Not a key: `{<prefix>:control}`, the start of every key here. */
  readonly hashTag: string;
  /** STRING: the rollback override, JSON `OverrideState` (written by lua/override/override-change-1.lua). */
  readonly override: string;
  /** ZSET: balancerId -> its last heartbeat (Redis's clock, ms). */
  readonly balancers: string;
  /** HASH: balancerId -> JSON `BalancerInfo`, as it said with its last heartbeat. */
  readonly balancerInfo: string;
  /** HASH: balancerId -> JSON `OverrideAck`, the override version it last applied. */
  readonly acks: string;
  /** Pub/sub channel: each new override (JSON `OverrideState`), for the balancers. */
  readonly overrideChangedChannel: string;
  /** Pub/sub channel: each acknowledgement (JSON `OverrideAck`), for the control planes. */
  readonly overrideAckedChannel: string;
  /** Pub/sub channel: each audit entry written (the log itself is in PostgreSQL), JSON with its id, for the live event streams. */
  readonly auditAppendedChannel: string;
  /** STRING: the latest rollback's record, JSON (the control plane's `RollbackRecord`). */
  readonly lastRollback: string;
  /**
   * Pub/sub channel: each rollback or resume record (the control plane's `OverrideChangeRecord`),
   * when it is answered and again once Unleash was written, so every control plane's event stream
   * gets it. Not `overrideChangedChannel`, which carries the override itself to the balancers.
   */
  readonly overrideChangeRecordsChannel: string;
  /** STRING with an expiry: the fleet-wide CPU-profiling lock, its holder's JSON (with a unique token). */
  readonly profileLock: string;
  /** ZSET: profileId -> its start (Unix ms), the index of the profiles kept. */
  readonly profiles: string;
  /** HASH with an expiry, one per profile: `record` -> JSON, `cpuprofile` -> the gzipped .cpuprofile JSON. */
  readonly profile: (profileId: string) => string;
  /** HASH: the current (or latest) rollout: `json` -> the control plane's `Rollout`, `version` -> bumped by each write (compare-and-set). */
  readonly rollout: string;
  /** LIST: finished rollouts' JSON, newest first, capped. */
  readonly rolloutHistory: string;
  /** STRING with an expiry: "<fence>:<owner>", the control plane whose autopilot may act. */
  readonly autopilotLease: string;
  /** STRING counter: the fencing token, raised at each new holder of the lease. */
  readonly autopilotFence: string;
  /** HASH: `<cluster>|<integration>` -> JSON of the auto limit's state (the control plane's `AutoLimitState` and its last decision). */
  readonly autoLimits: string;
  /** LIST per integration in auto mode: its decisions, newest first, capped (the Limits page's chart). */
  readonly autoLimitHistory: (cluster: string, integration: string) => string;
  /** STRING with an expiry: the control plane whose auto limiter acts. */
  readonly autoLimitLease: string;
}

export function controlKeys(prefix: string): ControlKeys {
  const hashTag = `{${prefix}:control}`;
  const key = (name: string) => `${hashTag}:${name}`;
  return {
    hashTag,
    override: key('override'),
    balancers: key('balancers'),
    balancerInfo: key('balancer-info'),
    acks: key('override-acks'),
    overrideChangedChannel: key('override-changed'),
    overrideAckedChannel: key('override-acked'),
    auditAppendedChannel: key('audit-appended'),
    lastRollback: key('last-rollback'),
    overrideChangeRecordsChannel: key('override-changes'),
    profileLock: key('profile-lock'),
    profiles: key('profiles'),
    profile: (profileId) => key(`profile:${profileId}`),
    rollout: key('rollout'),
    rolloutHistory: key('rollout-history'),
    autopilotLease: key('autopilot-lease'),
    autopilotFence: key('autopilot-fence'),
    autoLimits: key('auto-limits'),
    autoLimitHistory: (cluster, integration) => key(`auto-limit-history:${cluster}|${integration}`),
    autoLimitLease: key('auto-limit-lease'),
  };
}

/** Redis key names of the workers' reports, under the hash tag `{<prefix>:reports}`: reading many is one MGET, on Redis Cluster too. */
export interface ReportKeys {
  /** Not a key: `{<prefix>:reports}`, the start of every key here. */
  readonly hashTag: string;
  /** STRING with an expiry, one per worker: its latest `WorkerReport` as JSON. */
  readonly worker: (workerId: string) => string;
}

export function reportKeys(prefix: string): ReportKeys {
  const hashTag = `{${prefix}:reports}`;
  return { hashTag, worker: (workerId) => `${hashTag}:worker:${workerId}` };
}

/** Redis key names of the rolling latency summaries, under the hash tag `{<prefix>:latency}`. */
export interface LatencyKeys {
  /** Not a key: `{<prefix>:latency}`, the start of every key here. */
  readonly hashTag: string;
  /**
   * HASH with an expiry, one per time slot (its start in Unix ms, a multiple of the slot length):
   * `<cluster>\t<integration>\t<bucket>` -> tasks that succeeded in that latency bucket, and
   * `<cluster>\t<integration>\tfailed` -> tasks that failed.
   */
  readonly slot: (slotStartMs: number) => string;
  /**
   * HASH with an expiry, one per time slot like `slot`: `<cluster>\t<integration>\t<code>` -> tasks
   * the balancers failed in that slot before any worker ran them (balancer-errors.ts).
   */
  readonly balancerErrorSlot: (slotStartMs: number) => string;
  /**
   * HASH with an expiry, one per time slot like `slot`: `<cluster>\t<integration>\t<figure>` -> the
   * control plane's figures of that integration's limit in the slot (figures: limit, inflight,
   * waiting, refused, tasks, p50, p99; the control plane's limit-series.ts).
   */
  readonly limitSeriesSlot: (slotStartMs: number) => string;
}

export function latencyKeys(prefix: string): LatencyKeys {
  const hashTag = `{${prefix}:latency}`;
  return {
    hashTag,
    slot: (slotStartMs) => `${hashTag}:${slotStartMs}`,
    balancerErrorSlot: (slotStartMs) => `${hashTag}:balancer-errors:${slotStartMs}`,
    limitSeriesSlot: (slotStartMs) => `${hashTag}:limit-series:${slotStartMs}`,
  };
}
