import { randomUUID } from 'node:crypto';
import type { RedisConnection } from './redis';
import { clusterKeys, integrationField, readIntegrationField, type ClusterKeys } from './keys';
import { leaseNonceOf } from './lease-id';
import { LuaScripts } from './script-loader';
import { LedgerUnavailableError } from './errors';
import {
  checkDefaultIntegrationLimit,
  checkIntegrationName,
  decodeIntegrationLimit,
  defaultIntegrationLimit,
  defaultLimitArgs,
  encodeIntegrationLimit,
  startsPerSecondOf,
  type DefaultIntegrationLimit,
  type IntegrationLimit,
} from './integration-limits';
import { InvalidIntegrationLimitError } from './errors';
import { LedgerBatcher, type ReleaseEntry, type ReservationEntry, type SettleReply } from './ledger-batcher';

export type LedgerPriority = 'user' | 'background';

export interface LedgerOptions {
  /** First part of every key, so several Headroom installations (or tests) share one Redis. @default 'hr' */
  keyPrefix?: string;
  /** How long a balancer counts as waiting after it last said so. @default 3000 */
  waiterTtlMs?: number;
  /** Share of each cluster's capacity kept for user-present tasks (0..1). @default 0.1 */
  keptForUserPresentShare?: number;
  /**
   * Releases and reservations are sent to Redis in batches, at most one call per cluster in
   * this many ms: a busy process pays for one call per window instead of one per lease, and a
   * lease waits at most this long (an idle process's calls go out at once). 0 sends each turn
   * of the event loop's requests at once. @default 2
   */
  batchWindowMs?: number;
  /**
   * A cluster of more workers than this spreads its heartbeats out: each worker's heartbeat
   * period (HeartbeatReply.heartbeatScale) and the sweep's timeout are multiplied by workers ÷
   * this, so a cluster's heartbeats cost Redis about this many calls per configured period
   * whatever its size (4,000 workers at the worker's 1 s default: one heartbeat each every 4 s).
   * Every process of an installation must use the same value; the CLIs keep the default.
   * @default 1000
   */
  workersAtFullHeartbeatRate?: number;
  /**
   * The in-flight limit of every integration with no limit of its own in the ledger
   * (`setIntegrationLimit`): on by default, so that one slow integration cannot hold every slot.
   * Every process of an installation should use the same value.
   * @default { shareOfCapacity: 0.5, minInFlight: 8 } (integration-limits.ts says why)
   */
  defaultIntegrationLimit?: DefaultIntegrationLimit;
}

export const ledgerDefaults: Required<LedgerOptions> = {
  keyPrefix: 'hr',
  waiterTtlMs: 3_000,
  keptForUserPresentShare: 0.1,
  batchWindowMs: 2,
  workersAtFullHeartbeatRate: 1000,
  defaultIntegrationLimit,
};

/** HeartbeatInput.dispatchGraceMs when not given: the worker's default heartbeat period. */
export const defaultDispatchGraceMs = 1000;

/** Most releases, and most reservations, in one call to Redis. */
export const maxLeasesPerCall = 64;
/** Most releases, and most reservations, waiting per cluster for a call; more are refused as the ledger being unavailable. */
export const maxLeasesWaiting = 10_000;

export interface HeartbeatInput {
  workerId: string;
  address: string;
  capacity: number;
  draining: boolean;
  /**
   * The leases the worker holds: tasks queued or running there, neither answered nor released by
   * the worker itself. The ledger drops the worker's other leases once they are `dispatchGraceMs`
   * old (nobody will release them) and writes back held ones it lost. Ids of other workers, or
   * not given out by the ledger, are ignored.
   */
  heldLeaseIds: Iterable<string>;
  /**
   * How long a lease the worker does not hold yet may still be on its way to it (reserved, not
   * yet arrived): a lease older than this that it does not hold is dropped. The worker's
   * heartbeat period is the natural value: longer keeps a lost slot away longer; shorter may drop
   * a slow dispatch's lease for one period (the worker's gate still refuses what it cannot run).
   * @default 1000
   */
  dispatchGraceMs?: number;
  /**
   * This process's previous heartbeat succeeded, with the same address: the ledger then skips
   * reading the address to compare (a registration Redis lost is written in full anyway).
   * @default false
   */
  addressUnchanged?: boolean;
}

export interface HeartbeatReply {
  /** An operator asked this worker to drain. */
  drainRequested: boolean;
  /** Leases the ledger counts for the worker after this heartbeat. */
  inflight: number;
  /** Balancers could not connect to this worker (at the address it advertises) and take no slot on it for now. */
  markedUnreachable: boolean;
  /**
   * What the worker multiplies its heartbeat period by until its next heartbeat: 1 up to
   * `workersAtFullHeartbeatRate` workers in its cluster, workers ÷ that above (the sweep's
   * timeout grows alike).
   */
  heartbeatScale: number;
  /** Leases of the worker this heartbeat dropped: neither held by it nor released within `dispatchGraceMs`. */
  leasesDropped: number;
  /** Leases the worker holds that the ledger had lost (Redis lost data, or one was dropped while slow on its way), written back. */
  leasesRestored: number;
}

export interface ReserveRequest {
  priority: LedgerPriority;
  /** The balancer asking; recorded as waiting when `waitIfNone` and nothing is free. */
  balancerId: string;
  waitIfNone: boolean;
  /** Reserve on this worker only (policies other than least-loaded choose it themselves). */
  targetWorkerId?: string;
  /** Workers that just refused or could not be reached. At most 32. */
  skipWorkerIds?: readonly string[];
  /** The task's integration (a-z, 0-9, '.', '_', '-'), whose in-flight limit and start rate the reservation keeps to; none or '': no limit. */
  integration?: string;
}

export type NoSlotReason = 'no-workers' | 'full' | 'kept-for-user-present' | 'user-present-waiting' | 'target-full';

export type Reservation =
  | { ok: true; leaseId: string; workerId: string; address: string; freeSlotsBefore: number }
  | { ok: false; reason: NoSlotReason }
  /** The integration has `limit` tasks in flight in the cluster already: other integrations may still get slots. */
  | { ok: false; reason: 'integration-at-limit'; limit: number }
  /** The integration started as many tasks as its start rate allows; its next start is allowed in `retryAfterMs`. */
  | { ok: false; reason: 'integration-at-rate'; maxStartsPerSecond: number; retryAfterMs: number };

/** One integration's limit and tasks in flight in a cluster, as the ledger holds them. */
export interface IntegrationLimitState {
  integration: string;
  /** Its own limit; null: the default applies. */
  limit: IntegrationLimit | null;
  /** The limit in tasks at the cluster's capacity now (Infinity when off). */
  maxInFlight: number;
  /** The start rate it keeps to (its own, or the default's when it has no limit of its own); null: none. */
  maxStartsPerSecond: number | null;
  inflight: number;
}

/** Why balancers eject a worker: they cannot connect to it, or it fails far more than its peers. */
export type EjectionReason = 'unreachable' | 'failing';
export const ejectionReasons: readonly EjectionReason[] = ['unreachable', 'failing'];

export type UnreachableMark =
  | { result: 'marked'; untilMs: number }
  /** The cluster already has as many workers marked as `maxMarkedShare` allows. */
  | { result: 'too-many'; marked: number; workers: number }
  | { result: 'not-registered' };

export interface WorkerRecord {
  workerId: string;
  address: string;
  capacity: number;
  inflight: number;
  /** capacity - inflight; negative right after max parallelism was lowered below inflight. */
  freeSlots: number;
  draining: boolean;
  lastHeartbeatMs: number;
  /** Until when (ms, Redis's clock) balancers skip it (ejected: see `ejectedReason`); null when not marked. */
  unreachableUntilMs: number | null;
  /**
   * The leases the worker held (tasks queued or running there) at its last heartbeat: what it
   * runs, by its own count. `inflight` minus this is the ledger's drift, made good by its next
   * heartbeats (leases on their way to it, or answered with their release on its way, account
   * for a few). null when no heartbeat of this layout said.
   */
  heldAtHeartbeat: number | null;
  /** Why it is marked; null when not marked. */
  ejectedReason: EjectionReason | null;
}

export interface ClusterSnapshot {
  cluster: string;
  workers: WorkerRecord[];
  /** Sums over live workers that take tasks (not draining, not marked unreachable), as the reserve script sees them. */
  totalCapacity: number;
  totalFree: number;
  leases: number;
  waitingBalancers: string[];
  waitingUserPresentBalancers: string[];
}

const maxSkippedWorkers = 32;

/** One slot in a score of the cluster's `free` set (lua/includes/ledger.lua: turnPeriodUs). */
const scorePerSlot = 2 ** 30;

/**
 * A worker's free slots from its score in the cluster's `free` set: the score divided by 2^30,
 * rounded down (the rest only orders workers with as many free slots; see lua/includes/ledger.lua).
 */
export function freeSlotsOfScore(score: string | number): number {
  return Math.floor(Number(score) / scorePerSlot);
}

/**
 * How much longer than configured a cluster of `workers` waits between heartbeats (and before a
 * silent worker is swept): 1 up to `workersAtFullRate`, proportional above. The sweep script
 * computes the same (lua/sweep-12.lua).
 */
export function heartbeatScale(workers: number, workersAtFullRate: number): number {
  return Math.max(1, workers / workersAtFullRate);
}

/**
 * The slot ledger: the exact count of free slots per worker, shared in Redis by every
 * balancer and worker. All writes are Lua scripts (lua/*.lua), so each is atomic.
 */
export class Ledger {
  readonly options: Required<LedgerOptions>;
  private readonly keysByCluster = new Map<string, ClusterKeys>();
  private readonly batchers = new Map<string, LedgerBatcher>();
  /** The newest addresses this process read of each cluster, and their directory version: settle calls then answer without addresses. */
  private readonly directories = new Map<string, { version: string; addresses: Map<string, string> }>();
  /** Calls to Redis that carried releases and reservations, and how many of each: their ratio is the batch size. */
  readonly settleCounts = { calls: 0, releases: 0, reservations: 0 };
  private readonly scripts = LuaScripts.of();
  private get defaultLimitArgs(): [number, number, number] {
    return defaultLimitArgs(this.options.defaultIntegrationLimit);
  }

  constructor(
    readonly redis: RedisConnection,
    options: LedgerOptions = {},
  ) {
    this.options = { ...ledgerDefaults, ...stripUndefined(options) };
    checkDefaultIntegrationLimit(this.options.defaultIntegrationLimit, 'defaultIntegrationLimit');
  }

  keys(cluster: string): ClusterKeys {
    let keys = this.keysByCluster.get(cluster);
    if (!keys) {
      keys = clusterKeys(this.options.keyPrefix, cluster);
      // Bounded by the clusters a process is configured with; a handful in practice.
      if (this.keysByCluster.size < 1024) this.keysByCluster.set(cluster, keys);
    }
    return keys;
  }

  async heartbeat(cluster: string, input: HeartbeatInput): Promise<HeartbeatReply> {
    const args: (string | number)[] = [
      input.workerId,
      input.address,
      input.capacity,
      input.draining ? 1 : 0,
      input.dispatchGraceMs ?? defaultDispatchGraceMs,
      input.addressUnchanged ? 1 : 0,
    ];
    for (const leaseId of input.heldLeaseIds) {
      const nonce = leaseNonceOf(leaseId, input.workerId);
      if (nonce !== undefined) args.push(nonce);
    }
    const reply = (await this.run('heartbeat', cluster, args)) as [number, number, number, number, number, number];
    return {
      drainRequested: reply[0] === 1,
      inflight: reply[1],
      markedUnreachable: reply[2] === 1,
      heartbeatScale: heartbeatScale(reply[3], this.options.workersAtFullHeartbeatRate),
      leasesDropped: reply[4],
      leasesRestored: reply[5],
    };
  }

  /**
   * Takes a slot, batched with this process's other calls for the cluster (see `batchWindowMs`).
   */
  async reserve(cluster: string, request: ReserveRequest): Promise<Reservation> {
    if (request.integration) checkIntegrationName(request.integration);
    const reply = await this.guard('reserve', () =>
      this.batcher(cluster).reserve({
        balancerId: request.balancerId,
        priority: request.priority,
        waitIfNone: request.waitIfNone,
        targetWorkerId: request.targetWorkerId ?? '',
        nonce: randomUUID(),
        integration: request.integration ?? '',
        skipWorkerIds: (request.skipWorkerIds ?? []).slice(0, maxSkippedWorkers),
      }),
    );
    if (reply[0] === 'ok') {
      return { ok: true, leaseId: reply[4]!, workerId: reply[1]!, address: reply[2]!, freeSlotsBefore: Number(reply[3]) };
    }
    if (reply[1] === 'integration-at-limit') return { ok: false, reason: 'integration-at-limit', limit: Number(reply[2]) };
    if (reply[1] === 'integration-at-rate')
      return { ok: false, reason: 'integration-at-rate', maxStartsPerSecond: Number(reply[2]), retryAfterMs: Number(reply[3]) };
    return { ok: false, reason: reply[1] as NoSlotReason };
  }

  /**
   * Sets one integration's limit in a cluster (null removes it: the default applies); settle
   * calls keep to it from the next one on. Throws InvalidIntegrationLimitError naming the field,
   * having written nothing, for a bad name or limit or a count above the cluster's capacity.
   */
  async setIntegrationLimit(cluster: string, integration: string, limit: IntegrationLimit | null): Promise<void> {
    const { spec } = limit === null ? { spec: '' } : encodeIntegrationLimit(integration, limit);
    if (limit === null) encodeIntegrationLimit(integration, { off: true });
    const reply = (await this.run('integration-limit', cluster, [integration, spec])) as [string, number?];
    if (reply[0] === 'above-capacity')
      throw new InvalidIntegrationLimitError(
        'limit.maxInFlight',
        `got ${/^max:(\d+)/.exec(spec)?.[1] ?? spec}, above the capacity of cluster ${cluster} (${reply[1]} slots)`,
      );
    if (reply[0] !== 'ok') throw new InvalidIntegrationLimitError('limit', `the ledger refused ${JSON.stringify(spec)}`);
  }

  /**
   * Every integration with a limit of its own or tasks in flight in the cluster (for metrics and
   * operators: reads one small hash, bounded by the integrations in use).
   */
  async integrationLimits(cluster: string): Promise<IntegrationLimitState[]> {
    const keys = this.keys(cluster);
    const fields = await this.guard('integration-limits', () => this.redis.hgetall(keys.totals));
    const capacitySlots = Number(fields.capacity ?? 0);
    const prefix = integrationField('');
    return Object.keys(fields)
      .filter((field) => field.startsWith(prefix))
      .sort()
      .map((field) => {
        const { inflight, limitSpec } = readIntegrationField(fields[field]!);
        const limit = limitSpec === null ? null : decodeIntegrationLimit(limitSpec);
        return {
          integration: field.slice(prefix.length),
          limit,
          maxInFlight: limitInFlight(limit, this.options.defaultIntegrationLimit, capacitySlots),
          maxStartsPerSecond: startsPerSecondOf(limit ?? this.options.defaultIntegrationLimit),
          inflight,
        };
      });
  }

  /** The cluster's slots as the ledger's totals count them: what a share of capacity is taken of. One HGET. */
  async totalCapacity(cluster: string): Promise<number> {
    const keys = this.keys(cluster);
    return Number((await this.guard('total-capacity', () => this.redis.hget(keys.totals, 'capacity'))) ?? 0);
  }

  /**
   * Gives a lease's slot back, batched like reservations; true if the lease was still held.
   * Idempotent. O(1): the lease id names its worker.
   */
  async release(cluster: string, leaseId: string): Promise<boolean> {
    return this.guard('release', () => this.batcher(cluster).release(leaseId));
  }

  /**
   * Removes workers silent for `heartbeatTimeoutMs` (times the cluster's heartbeat scale, see
   * `workersAtFullHeartbeatRate`), with their leases.
   */
  async sweep(cluster: string, heartbeatTimeoutMs: number, limit = 1000): Promise<{ workersRemoved: number }> {
    const [workersRemoved] = (await this.run('sweep', cluster, [heartbeatTimeoutMs, limit, this.options.workersAtFullHeartbeatRate])) as [number];
    return { workersRemoved };
  }

  async drain(cluster: string, workerId: string): Promise<boolean> {
    return (await this.run('drain', cluster, [workerId])) === 1;
  }

  async deregister(cluster: string, workerId: string): Promise<boolean> {
    return (await this.run('deregister', cluster, [workerId])) === 1;
  }

  /**
   * Marks (ejects) a worker balancers cannot connect to, or one that fails far more than its
   * peers (`reason`): no balancer reserves a slot on it for `forMs` (Redis's clock), and its
   * slots leave the cluster totals. The mark ends when `clearUnreachable` is called or, once it
   * expired, at the worker's next heartbeat. A later end than the one held wins; the latest
   * reason is kept. Refused ('too-many') when another mark would pass
   * max(1, floor(maxMarkedShare x the cluster's workers)) marked at once, whatever the reasons.
   */
  async markUnreachable(
    cluster: string,
    workerId: string,
    forMs: number,
    maxMarkedShare: number,
    reason: EjectionReason = 'unreachable',
  ): Promise<UnreachableMark> {
    const reply = (await this.run('unreachable', cluster, [workerId, Math.max(1, Math.round(forMs)), maxMarkedShare, reason])) as [string, ...number[]];
    if (reply[0] === 'marked') return { result: 'marked', untilMs: Number(reply[1]) };
    if (reply[0] === 'too-many') return { result: 'too-many', marked: Number(reply[1]), workers: Number(reply[2]) };
    return { result: 'not-registered' };
  }

  /**
   * Ends the mark this process made (`markedUntilMs`, as markUnreachable answered), unless another
   * process renewed it since (a later end): 'kept', for that one to end. The worker then takes
   * tasks again unless draining.
   */
  async clearEjection(cluster: string, workerId: string, markedUntilMs: number): Promise<'cleared' | 'kept' | 'not-registered'> {
    const reply = (await this.run('unreachable', cluster, [workerId, 0, 1, markedUntilMs])) as [string];
    return reply[0] === 'cleared' || reply[0] === 'kept' ? reply[0] : 'not-registered';
  }

  /** Ends a worker's unreachable mark (a health check passed): it takes tasks again unless draining. False if it is not registered. */
  async clearUnreachable(cluster: string, workerId: string): Promise<boolean> {
    const reply = (await this.run('unreachable', cluster, [workerId, 0, 1])) as [string];
    return reply[0] === 'cleared';
  }

  /** Why the worker is marked, as the latest mark said; null when no reason is held (not marked, or marked by an older version). */
  async ejectionReason(cluster: string, workerId: string): Promise<EjectionReason | null> {
    const reason = await this.guard('ejection-reason', () => this.redis.hget(this.keys(cluster).ejectionReason, workerId));
    return parseEjectionReason(reason);
  }

  /** Stops saying this balancer waits for the cluster (for all tasks, or only user-present ones). */
  async stopWaiting(cluster: string, balancerId: string, which: 'all' | 'user'): Promise<void> {
    await this.run('waiting', cluster, [balancerId, which === 'all' ? 'stop' : 'stop-user', this.options.waiterTtlMs]);
  }

  /** Keeps this balancer's waiting entries alive while it still has tasks queued. */
  async stillWaiting(cluster: string, balancerId: string, userPresent: boolean): Promise<void> {
    await this.run('waiting', cluster, [balancerId, userPresent ? 'keep-user' : 'keep', this.options.waiterTtlMs]);
  }

  /** Worker addresses by id: what balancers need to keep their channels. */
  async addresses(cluster: string): Promise<Map<string, string>> {
    const all = await this.guard('addresses', () => this.redis.hgetall(this.keys(cluster).address));
    return new Map(Object.entries(all));
  }

  /**
   * The addresses, unless they are as of `knownVersion` (then `changed` is false): a balancer
   * re-reads the whole list only when a worker joined or left or an address changed, not every
   * period. Versions are Redis's clock at the change, so they differ after a loss of data too.
   */
  async addressesIfChanged(
    cluster: string,
    knownVersion: string | undefined,
  ): Promise<{ changed: false } | { changed: true; version: string; addresses: Map<string, string> }> {
    const keys = this.keys(cluster);
    const version = (await this.guard('addresses', () => this.redis.get(keys.directoryVersion))) ?? 'none';
    if (version === knownVersion) return { changed: false };
    // Read after the version: a change in between shows at the next call.
    const addresses = await this.addresses(cluster);
    // Bounded like the keys: a handful of clusters per process.
    if (version !== 'none' && (this.directories.has(cluster) || this.directories.size < 1024)) this.directories.set(cluster, { version, addresses });
    return { changed: true, version, addresses };
  }

  /** The whole state of a cluster, for operators and tests (reads every worker: not for hot paths). */
  async snapshot(cluster: string): Promise<ClusterSnapshot> {
    const keys = this.keys(cluster);
    return this.guard('snapshot', async () => {
      const reply = await this.redis
        .multi()
        .hgetall(keys.workers)
        .hgetall(keys.inflight)
        .zrange(keys.free, 0, -1, 'WITHSCORES')
        .hgetall(keys.address)
        .zrange(keys.heartbeat, 0, -1, 'WITHSCORES')
        .smembers(keys.draining)
        .hgetall(keys.totals)
        .zrange(keys.waiting, 0, -1, 'WITHSCORES')
        .zrange(keys.waitingUser, 0, -1, 'WITHSCORES')
        .zrange(keys.unreachable, 0, -1, 'WITHSCORES')
        .hgetall(keys.ejectionReason)
        .time()
        .exec();
      if (!reply) throw new Error('transaction aborted');
      const values = reply.map(([error, value]) => {
        if (error) throw error;
        return value;
      });
      const [capacity, inflightOutOfFree, free, address, heartbeat, draining, totals, waiting, waitingUser, unreachable, reasons, time] = values as [
        Record<string, string>,
        Record<string, string>,
        string[],
        Record<string, string>,
        string[],
        string[],
        Record<string, string>,
        string[],
        string[],
        string[],
        Record<string, string>,
        [string, string],
      ];
      // Entries not yet expired, by Redis's clock (the one the scripts use).
      const redisNowMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
      const unexpired = (entries: string[]) => entries.filter((_, i) => i % 2 === 0 && Number(entries[i + 1]) > redisNowMs);
      const heartbeatMs = new Map<string, number>();
      for (let i = 0; i < heartbeat.length; i += 2) heartbeatMs.set(heartbeat[i]!, Number(heartbeat[i + 1]));
      const drainingSet = new Set(draining);
      // A worker that takes tasks holds its count in its score (capacity - free slots); others in `inflight`.
      const freeSlots = new Map<string, number>();
      for (let i = 0; i < free.length; i += 2) freeSlots.set(free[i]!, freeSlotsOfScore(free[i + 1]!));
      const unreachableUntilMs = new Map<string, number>();
      for (let i = 0; i < unreachable.length; i += 2) {
        // An expired mark lasts until the worker's next heartbeat; it is shown as over.
        if (Number(unreachable[i + 1]) > redisNowMs) unreachableUntilMs.set(unreachable[i]!, Number(unreachable[i + 1]));
      }
      const workers = Object.keys(capacity)
        // The hash holds each worker's held count too, under "<worker>|held".
        .filter((field) => !field.includes('|'))
        .sort()
        .map((workerId) => {
          const cap = Number(capacity[workerId]);
          const inFree = freeSlots.get(workerId);
          const used = inFree === undefined ? Number(inflightOutOfFree[workerId] ?? 0) : cap - inFree;
          const markedUntilMs = unreachableUntilMs.get(workerId) ?? null;
          return {
            workerId,
            address: address[workerId] ?? '',
            capacity: cap,
            inflight: used,
            freeSlots: cap - used,
            draining: drainingSet.has(workerId),
            lastHeartbeatMs: heartbeatMs.get(workerId) ?? 0,
            unreachableUntilMs: markedUntilMs,
            // A mark written by a version that kept no reason was for an unreachable worker.
            ejectedReason: markedUntilMs === null ? null : (parseEjectionReason(reasons[workerId]) ?? 'unreachable'),
            heldAtHeartbeat: numberOrNull(capacity[`${workerId}|held`]),
          };
        });
      return {
        cluster,
        workers,
        totalCapacity: Number(totals.capacity ?? 0),
        totalFree: Number(totals.free ?? 0),
        leases: workers.reduce((sum, w) => sum + w.inflight, 0),
        waitingBalancers: unexpired(waiting),
        waitingUserPresentBalancers: unexpired(waitingUser),
      };
    });
  }

  /** Releases and reservations waiting for a call, and those refused because `maxLeasesWaiting` waited already, over all clusters. */
  batchState(): { waiting: number; refused: number } {
    let waiting = 0;
    let refused = 0;
    for (const batcher of this.batchers.values()) {
      waiting += batcher.waiting;
      refused += batcher.refused;
    }
    return { waiting, refused };
  }

  private batcher(cluster: string): LedgerBatcher {
    let batcher = this.batchers.get(cluster);
    if (!batcher) {
      batcher = new LedgerBatcher((releases, reservations) => this.settle(cluster, releases, reservations), {
        batchWindowMs: this.options.batchWindowMs,
        maxPerCall: maxLeasesPerCall,
        maxWaiting: maxLeasesWaiting,
      });
      // Bounded like the keys: a handful of clusters per process.
      if (this.batchers.size < 1024) this.batchers.set(cluster, batcher);
    }
    return batcher;
  }

  private async settle(cluster: string, releases: readonly ReleaseEntry[], reservations: readonly ReservationEntry[]): Promise<SettleReply> {
    const directory = this.directories.get(cluster);
    const args: (string | number)[] = [
      this.options.keptForUserPresentShare,
      this.options.waiterTtlMs,
      directory?.version ?? '',
      ...this.defaultLimitArgs,
      releases.length,
    ];
    args.push(...releases);
    args.push(reservations.length);
    for (const r of reservations)
      args.push(r.priority, r.balancerId, r.waitIfNone ? 1 : 0, r.targetWorkerId, r.nonce, r.integration, r.skipWorkerIds.length, ...r.skipWorkerIds);
    this.settleCounts.calls++;
    this.settleCounts.releases += releases.length;
    this.settleCounts.reservations += reservations.length;
    const [released, results] = (await this.call('settle', cluster, args)) as [number[], string[][]];
    for (const result of results) {
      // '': the version sent is current, so the directory read with it has the address.
      if (result[0] === 'ok' && result[2] === '')
        result[2] = directory?.addresses.get(result[1]!) ?? (await this.redis.hget(this.keys(cluster).address, result[1]!)) ?? '';
    }
    return { released, reservations: results };
  }

  private run(script: string, cluster: string, args: (string | number)[]): Promise<unknown> {
    return this.guard(script, () => this.call(script, cluster, args));
  }

  private call(script: string, cluster: string, args: (string | number)[]): Promise<unknown> {
    const keys = this.keys(cluster);
    return this.scripts.run(this.redis, script, [...keys.all, keys.slotFreedChannel, ...args]);
  }

  private async guard<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      throw new LedgerUnavailableError(operation, error);
    }
  }
}

/** An integration's limit in tasks at a cluster capacity, as settle-12.lua computes it (a start rate alone keeps the default's). */
export function limitInFlight(limit: IntegrationLimit | null, fallback: DefaultIntegrationLimit, capacitySlots: number): number {
  if (limit !== null && 'off' in limit) return Infinity;
  if (limit !== null && 'maxInFlight' in limit) return limit.maxInFlight;
  if (limit !== null && 'shareOfCapacity' in limit) return Math.ceil(limit.shareOfCapacity * capacitySlots);
  return 'off' in fallback ? Infinity : Math.max(Math.ceil(fallback.shareOfCapacity * capacitySlots), fallback.minInFlight);
}

function numberOrNull(value: string | undefined): number | null {
  return value === undefined ? null : Number(value);
}

function parseEjectionReason(value: string | null | undefined): EjectionReason | null {
  return ejectionReasons.find((reason) => reason === value) ?? null;
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
