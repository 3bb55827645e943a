import type { RedisConnection } from './redis';
import { LedgerUnavailableError } from './errors';
import { latencyKeys } from './keys';
import { SlotCounts, latencyDefaults, slotCountsOptions, slotStartsWithin, type SlotSettings } from './time-slots';

/**
 * Tasks the balancers failed before any worker ran them: their deadline passed in the queue, the
 * queue was full, they were shed, no worker took them. Workers count the tasks that fail on them;
 * nobody else would count these, and a cluster whose tasks all expire in the queue would look
 * idle and healthy. They are counted per time slot in Redis, in the slots of the latency
 * summaries, by cluster, integration and HR_ERR_* code.
 */
export interface BalancerErrorCount {
  cluster: string;
  integration: string;
  code: string;
  count: number;
}

export interface BalancerErrorRecorderOptions extends SlotSettings {
  keyPrefix: string;
}

/** What separates cluster, integration and code in a field: none of them holds it. */
const separator = '\t';

/**
 * A balancer's side: counts in memory, adds to Redis on flush(). Bounded by slots pending x
 * clusters x integrations (the caller bounds those) x codes.
 */
export class BalancerErrorRecorder {
  private readonly counts: SlotCounts;

  constructor(redis: RedisConnection, options: BalancerErrorRecorderOptions) {
    const keys = latencyKeys(options.keyPrefix);
    this.counts = new SlotCounts(
      redis,
      slotCountsOptions(options, (slotStartMs) => keys.balancerErrorSlot(slotStartMs), 'balancer errors flush'),
    );
  }

  /** Errors dropped because Redis was away for longer than maxPendingSlots slots. */
  get dropped(): number {
    return this.counts.dropped;
  }

  record(cluster: string, integration: string, code: string, atUnixMs = Date.now()): void {
    this.counts.add(atUnixMs, [cluster, integration, code].join(separator));
  }

  /** Adds what was counted to Redis; on failure keeps it for the next flush. */
  flush(): Promise<void> {
    return this.counts.flush();
  }
}

/** The counts of one slot's hash; fields of another shape are skipped. */
export function parseBalancerErrors(fields: Record<string, string>): BalancerErrorCount[] {
  const counts: BalancerErrorCount[] = [];
  for (const [field, value] of Object.entries(fields)) {
    const [cluster, integration, code, ...rest] = field.split(separator);
    const count = Number(value);
    if (cluster === undefined || integration === undefined || code === undefined || rest.length > 0 || !(count > 0)) continue;
    counts.push({ cluster, integration, code, count });
  }
  return counts;
}

export interface BalancerErrorRates {
  /** The time the counts cover: from the start of the oldest slot read to now. */
  seconds: number;
  /** Summed over the slots, by cluster, integration and code. */
  counts: BalancerErrorCount[];
}

/**
 * The balancers' errors of the slots that overlap the last `windowMs` (so between windowMs and
 * windowMs + one slot), and the time they cover: a rate is count / seconds.
 */
export async function readBalancerErrors(
  redis: RedisConnection,
  keyPrefix: string,
  windowMs: number,
  options: { slotMs?: number; nowUnixMs?: number } = {},
): Promise<BalancerErrorRates> {
  const slotMs = options.slotMs ?? latencyDefaults.slotMs;
  const now = options.nowUnixMs ?? Date.now();
  const keys = latencyKeys(keyPrefix);
  const starts = slotStartsWithin(windowMs, now, slotMs);
  let slots: Record<string, string>[];
  try {
    const pipeline = redis.pipeline();
    for (const start of starts) pipeline.hgetall(keys.balancerErrorSlot(start));
    slots = ((await pipeline.exec()) ?? []).map(([error, value]) => {
      if (error) throw error;
      return value as Record<string, string>;
    });
  } catch (error) {
    throw new LedgerUnavailableError('balancer errors read', error);
  }
  const summed = new Map<string, BalancerErrorCount>();
  for (const entry of slots.flatMap(parseBalancerErrors)) {
    const id = [entry.cluster, entry.integration, entry.code].join(separator);
    const known = summed.get(id);
    if (known) known.count += entry.count;
    else summed.set(id, { ...entry });
  }
  return { seconds: Math.max(0.001, (now - starts[0]!) / 1000), counts: [...summed.values()] };
}
