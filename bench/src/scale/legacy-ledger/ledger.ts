// FROZEN COPY of fleet/src/ledger.ts as it was before the ledger's redesign around lease records (the "old
// scripts"). Used only by the scale benchmark's fleet-scale mode to compare old against new in one
// run; not production code, never imported outside bench/src/scale/. Do not change or fix it.
import { randomInt, randomUUID } from 'node:crypto';
import type { Redis } from 'ioredis';
import { clusterKeys, type ClusterKeys } from './keys';
import { defineScripts } from './script-loader';
import { LedgerUnavailableError } from './errors';

export type LedgerPriority = 'user' | 'background';

export interface LedgerOptions {
  /** First part of every key, so several Headroom installations (or tests) share one Redis. @default 'hr' */
  keyPrefix?: string;
  /** How long a lease lives unless its worker renews it in a heartbeat: bounds how long a slot reserved by a balancer that died is lost. @default 3000 */
  leaseTtlMs?: number;
  /** How long a balancer counts as waiting after it last said so. @default 3000 */
  waiterTtlMs?: number;
  /** Share of each cluster's capacity kept for user-present tasks (0..1). @default 0.1 */
  keptForUserPresentShare?: number;
}

export const ledgerDefaults: Required<LedgerOptions> = {
  keyPrefix: 'hr',
  leaseTtlMs: 3_000,
  waiterTtlMs: 3_000,
  keptForUserPresentShare: 0.1,
};

export interface HeartbeatInput {
  workerId: string;
  address: string;
  capacity: number;
  draining: boolean;
  runningLeaseIds: readonly string[];
}

export interface HeartbeatReply {
  /** An operator asked this worker to drain. */
  drainRequested: boolean;
  /** Leases the ledger counts for the worker after this heartbeat. */
  inflight: number;
  /** Balancers could not connect to this worker (at the address it advertises) and take no slot on it for now. */
  markedUnreachable: boolean;
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
}

export type NoSlotReason = 'no-workers' | 'full' | 'kept-for-user-present' | 'user-present-waiting' | 'target-full';

export type Reservation = { ok: true; leaseId: string; workerId: string; address: string; freeSlotsBefore: number } | { ok: false; reason: NoSlotReason };

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
  /** Until when (ms, Redis's clock) balancers skip it because they could not connect to it; null when not marked. */
  unreachableUntilMs: number | null;
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

type ScriptFn = (...args: (string | number)[]) => Promise<unknown>;

/**
 * The slot ledger: the exact count of free slots per worker, shared in Redis by every
 * balancer and worker. All writes are Lua scripts (lua/*.lua), so each is atomic.
 */
export class Ledger {
  readonly options: Required<LedgerOptions>;
  private readonly keysByCluster = new Map<string, ClusterKeys>();

  constructor(
    readonly redis: Redis,
    options: LedgerOptions = {},
  ) {
    this.options = { ...ledgerDefaults, ...stripUndefined(options) };
    defineScripts(redis);
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
    const reply = (await this.run('heartbeat', cluster, [
      input.workerId,
      input.address,
      input.capacity,
      input.draining ? 1 : 0,
      this.options.leaseTtlMs,
      ...input.runningLeaseIds,
    ])) as [number, number, number];
    return { drainRequested: reply[0] === 1, inflight: reply[1], markedUnreachable: reply[2] === 1 };
  }

  async reserve(cluster: string, request: ReserveRequest): Promise<Reservation> {
    const leaseId = randomUUID();
    const skip = (request.skipWorkerIds ?? []).slice(0, maxSkippedWorkers);
    const reply = (await this.run('reserve', cluster, [
      request.priority,
      this.options.keptForUserPresentShare,
      leaseId,
      this.options.leaseTtlMs,
      randomInt(0, 2 ** 31),
      request.balancerId,
      this.options.waiterTtlMs,
      request.waitIfNone ? 1 : 0,
      request.targetWorkerId ?? '',
      ...skip,
    ])) as string[];
    if (reply[0] === 'ok') {
      return { ok: true, leaseId, workerId: reply[1]!, address: reply[2]!, freeSlotsBefore: Number(reply[3]) };
    }
    return { ok: false, reason: reply[1] as NoSlotReason };
  }

  /** Gives a lease's slot back; true if the lease was still held. Idempotent. */
  async release(cluster: string, leaseId: string): Promise<boolean> {
    return (await this.run('release', cluster, [leaseId])) === 1;
  }

  /** Removes workers silent for `heartbeatTimeoutMs` and ends expired leases. */
  async sweep(cluster: string, heartbeatTimeoutMs: number, limit = 1000): Promise<{ workersRemoved: number; leasesExpired: number }> {
    const [workersRemoved, leasesExpired] = (await this.run('sweep', cluster, [heartbeatTimeoutMs, limit])) as [number, number];
    return { workersRemoved, leasesExpired };
  }

  async drain(cluster: string, workerId: string): Promise<boolean> {
    return (await this.run('drain', cluster, [workerId])) === 1;
  }

  async deregister(cluster: string, workerId: string): Promise<boolean> {
    return (await this.run('deregister', cluster, [workerId])) === 1;
  }

  /**
   * Marks a worker balancers cannot connect to: no balancer reserves a slot on it for `forMs`
   * (Redis's clock), and its slots leave the cluster totals. The mark ends when
   * `clearUnreachable` is called or, once it expired, at the worker's next heartbeat. A later
   * end than the one held wins. Refused ('too-many') when another mark would pass
   * max(1, floor(maxMarkedShare x the cluster's workers)) marked at once.
   */
  async markUnreachable(cluster: string, workerId: string, forMs: number, maxMarkedShare: number): Promise<UnreachableMark> {
    const reply = (await this.run('unreachable', cluster, [workerId, Math.max(1, Math.round(forMs)), maxMarkedShare])) as [string, ...number[]];
    if (reply[0] === 'marked') return { result: 'marked', untilMs: Number(reply[1]) };
    if (reply[0] === 'too-many') return { result: 'too-many', marked: Number(reply[1]), workers: Number(reply[2]) };
    return { result: 'not-registered' };
  }

  /** Ends a worker's unreachable mark (a health check passed): it takes tasks again unless draining. False if it is not registered. */
  async clearUnreachable(cluster: string, workerId: string): Promise<boolean> {
    const reply = (await this.run('unreachable', cluster, [workerId, 0, 1])) as [string];
    return reply[0] === 'cleared';
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

  /** The whole state of a cluster, for operators and tests (reads every worker: not for hot paths). */
  async snapshot(cluster: string): Promise<ClusterSnapshot> {
    const keys = this.keys(cluster);
    return this.guard('snapshot', async () => {
      const reply = await this.redis
        .multi()
        .hgetall(keys.capacity)
        .hgetall(keys.inflight)
        .hgetall(keys.address)
        .zrange(keys.heartbeat, 0, -1, 'WITHSCORES')
        .smembers(keys.draining)
        .hgetall(keys.totals)
        .zcard(keys.leases)
        .zrange(keys.waiting, 0, -1, 'WITHSCORES')
        .zrange(keys.waitingUser, 0, -1, 'WITHSCORES')
        .zrange(keys.unreachable, 0, -1, 'WITHSCORES')
        .time()
        .exec();
      if (!reply) throw new Error('transaction aborted');
      const values = reply.map(([error, value]) => {
        if (error) throw error;
        return value;
      });
      const [capacity, inflight, address, heartbeat, draining, totals, leases, waiting, waitingUser, unreachable, time] = values as [
        Record<string, string>,
        Record<string, string>,
        Record<string, string>,
        string[],
        string[],
        Record<string, string>,
        number,
        string[],
        string[],
        string[],
        [string, string],
      ];
      // Entries not yet expired, by Redis's clock (the one the scripts use).
      const redisNowMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
      const unexpired = (entries: string[]) => entries.filter((_, i) => i % 2 === 0 && Number(entries[i + 1]) > redisNowMs);
      const heartbeatMs = new Map<string, number>();
      for (let i = 0; i < heartbeat.length; i += 2) heartbeatMs.set(heartbeat[i]!, Number(heartbeat[i + 1]));
      const drainingSet = new Set(draining);
      const unreachableUntilMs = new Map<string, number>();
      for (let i = 0; i < unreachable.length; i += 2) {
        // An expired mark lasts until the worker's next heartbeat; it is shown as over.
        if (Number(unreachable[i + 1]) > redisNowMs) unreachableUntilMs.set(unreachable[i]!, Number(unreachable[i + 1]));
      }
      const workers = Object.keys(capacity)
        .sort()
        .map((workerId) => {
          const cap = Number(capacity[workerId]);
          const used = Number(inflight[workerId] ?? 0);
          return {
            workerId,
            address: address[workerId] ?? '',
            capacity: cap,
            inflight: used,
            freeSlots: cap - used,
            draining: drainingSet.has(workerId),
            lastHeartbeatMs: heartbeatMs.get(workerId) ?? 0,
            unreachableUntilMs: unreachableUntilMs.get(workerId) ?? null,
          };
        });
      return {
        cluster,
        workers,
        totalCapacity: Number(totals.capacity ?? 0),
        totalFree: Number(totals.free ?? 0),
        leases,
        waitingBalancers: unexpired(waiting),
        waitingUserPresentBalancers: unexpired(waitingUser),
      };
    });
  }

  private run(script: string, cluster: string, args: (string | number)[]): Promise<unknown> {
    const keys = this.keys(cluster);
    const fn = (this.redis as unknown as Record<string, ScriptFn>)[script]!;
    return this.guard(script, () => fn.call(this.redis, ...keys.all, keys.slotFreedChannel, ...args));
  }

  private async guard<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      throw new LedgerUnavailableError(operation, error);
    }
  }
}

function stripUndefined<T extends object>(value: T): Partial<T> {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== undefined)) as Partial<T>;
}
