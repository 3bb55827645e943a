/**
 * The ledger's in-flight count of each worker, read while a case runs (FleetWatch with `ledger`)
 * next to what the worker itself runs, and checked against the bound docs/ledger.md states: a slot
 * lost for any reason is back within 3 heartbeat periods of its task's end.
 *
 * The ledger may count a slot its worker does not run: while its lease is on its way to the
 * worker, and after the worker let the task go, until the release arrives or, when none will
 * (the caller's deadline ended the call as the worker answered), until the worker's heartbeats
 * drop the lease. Every task ends by its deadline, so a slot is counted rightly only as a lease
 * reserved less than (task deadline + 3 heartbeat periods) ago: `leaseBoundMs`. A count beyond
 * those leases is a slot kept past the bound, whether as a lease nobody drops or as a count with no
 * lease behind it (when the count was repaired by answer counts, lease records were
 * cleared while the count stayed).
 */
import { clusterKeys, freeSlotsOfScore, type RedisConnection } from '@headroom/fleet';

/** One worker's figures, read at (about) the same moment from the ledger and from its /metrics. */
export interface LedgerSample {
  /** performance.now() when the reads began. */
  atMs: number;
  workerId: string;
  /** The ledger's count: max parallelism - free slots in `free`, or its entry in `inflight` when out of `free`. */
  countedInFlight: number;
  /** The worker's own count (headroom_worker_tasks_in_flight). */
  runningTasks: number;
  /** Its leases reserved less than `inTransitMs` ago: tasks that may not have reached it yet. */
  reservedRecently: number;
  /** Its leases reserved less than `leaseBoundMs` ago (a lease a heartbeat wrote back: first seen that long ago). */
  leasesWithinBound: number;
  /** How long the worker took to answer the scrape: the sample's two reads are this far apart at most. */
  scrapeMs: number;
}

export interface LedgerReadOptions {
  keyPrefix: string;
  /** A lease reserved less than this long ago may still be on its way to its worker. */
  inTransitMs: number;
  /** The longest a lease may rightly be counted: the task's deadline + 3 heartbeat periods. */
  leaseBoundMs: number;
}

export type WorkerLedgerCount = Pick<LedgerSample, 'countedInFlight' | 'reservedRecently' | 'leasesWithinBound'>;

/**
 * Reads workers' counts and lease records, one MULTI (one moment of Redis's state) per cluster.
 * A lease a heartbeat wrote back is dated 0: its age is counted from when this reader first saw it.
 */
export class LedgerReader {
  /** "<worker>|<lease>" -> Redis's clock when first seen, for leases dated 0; bounded by the leases in the ledger (pruned at each read). */
  private readonly writtenBackSeenAtMs = new Map<string, number>();

  constructor(
    private readonly redis: RedisConnection,
    private readonly options: LedgerReadOptions,
  ) {}

  /** A worker missing from the ledger (swept, not yet registered) is left out. */
  async read(cluster: string, workerIds: readonly string[]): Promise<Map<string, WorkerLedgerCount>> {
    const keys = clusterKeys(this.options.keyPrefix, cluster);
    let multi = this.redis.multi().time().hgetall(keys.workers).hgetall(keys.inflight).zrange(keys.free, 0, -1, 'WITHSCORES');
    for (const workerId of workerIds) multi = multi.hgetall(keys.leasesPrefix + workerId);
    const reply = await multi.exec();
    if (!reply) throw new Error('the ledger read (MULTI) was aborted');
    const values = reply.map(([error, value]) => {
      if (error) throw error;
      return value;
    });
    const [time, capacities, inflightOutOfFree, free] = values as [[string, string], Record<string, string>, Record<string, string>, string[]];
    const redisNowMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
    const freeSlots = new Map<string, number>();
    for (let i = 0; i < free.length; i += 2) freeSlots.set(free[i]!, freeSlotsOfScore(free[i + 1]!));
    const counts = new Map<string, WorkerLedgerCount>();
    workerIds.forEach((workerId, i) => {
      const capacity = capacities[workerId];
      if (capacity === undefined) return;
      const inFree = freeSlots.get(workerId);
      const countedInFlight = inFree === undefined ? Number(inflightOutOfFree[workerId] ?? 0) : Number(capacity) - inFree;
      counts.set(workerId, { countedInFlight, ...this.leaseAges(workerId, (values[4 + i] ?? {}) as Record<string, string>, redisNowMs) });
    });
    return counts;
  }

  private leaseAges(workerId: string, leases: Record<string, string>, redisNowMs: number): Pick<WorkerLedgerCount, 'reservedRecently' | 'leasesWithinBound'> {
    let reservedRecently = 0;
    let leasesWithinBound = 0;
    const seen = new Set<string>();
    for (const [leaseId, reservedAt] of Object.entries(leases)) {
      let reservedAtMs = Number(reservedAt);
      if (reservedAtMs === 0) {
        const key = `${workerId}|${leaseId}`;
        seen.add(key);
        reservedAtMs = this.writtenBackSeenAtMs.get(key) ?? redisNowMs;
        this.writtenBackSeenAtMs.set(key, reservedAtMs);
      } else if (redisNowMs - reservedAtMs < this.options.inTransitMs) {
        reservedRecently++;
      }
      if (redisNowMs - reservedAtMs <= this.options.leaseBoundMs) leasesWithinBound++;
    }
    for (const key of this.writtenBackSeenAtMs.keys()) if (key.startsWith(`${workerId}|`) && !seen.has(key)) this.writtenBackSeenAtMs.delete(key);
    return { reservedRecently, leasesWithinBound };
  }
}

/** Slots the ledger counted beyond its leases within the bound: kept past the bound in docs/ledger.md. */
export function countedPastBound(sample: LedgerSample): number {
  return sample.countedInFlight - sample.leasesWithinBound;
}

/** What the ledger counted beyond what the worker ran and what was on its way to it: transit, releases on their way back, lost ones not yet dropped. */
export function ledgerExcess(sample: LedgerSample): number {
  return sample.countedInFlight - sample.runningTasks - sample.reservedRecently;
}

/** The longest time between two samples of one worker. */
export function longestSampleGapMs(samples: readonly LedgerSample[]): number {
  const lastAtMs = new Map<string, number>();
  let longest = 0;
  for (const s of [...samples].sort((a, b) => a.atMs - b.atMs)) {
    const previous = lastAtMs.get(s.workerId);
    if (previous !== undefined) longest = Math.max(longest, s.atMs - previous);
    lastAtMs.set(s.workerId, s.atMs);
  }
  return Math.round(longest);
}
