import * as path from 'node:path';
import type { RedisConnection } from './redis';
import { LedgerUnavailableError } from './errors';
import { controlKeys, type ControlKeys } from './keys';
import { LuaScripts, luaDir } from './script-loader';

/**
 * The instant rollback: a versioned override in Redis that every balancer applies as soon as it
 * is published, and acknowledges. Unleash keeps the same state durably (the control plane
 * switches the flag off too); this is the fast path, measured in milliseconds.
 */
export interface OverrideState {
  /** Only grows, even across a Redis data loss (at least Redis's clock in microseconds when written). */
  version: number;
  /** Every integration goes to the baseline cluster. */
  all: boolean;
  /** These integrations go to the baseline cluster (sorted). */
  integrations: string[];
  updatedAtUnixMs: number;
  actor: string;
}

/** The empty override: nothing rolled back. Version 0 loses to any written one. */
export const noOverride: OverrideState = Object.freeze({ version: 0, all: false, integrations: [], updatedAtUnixMs: 0, actor: '' }) as OverrideState;

export type OverrideChange =
  | { operation: 'rollback-all' | 'resume-all' }
  | { operation: 'rollback' | 'resume'; integration: string }
  | { operation: 'set'; all: boolean; integrations: readonly string[] };

export interface OverrideAck {
  balancerId: string;
  version: number;
  ackedAtUnixMs: number;
}

/** Tasks waiting at a balancer for a slot, by priority. */
export interface QueueDepth {
  userPresent: number;
  background: number;
}

/** What a balancer says of itself with each heartbeat. */
export interface BalancerInfo {
  /** Its gRPC address. */
  address: string;
  /** Its queues, all clusters together; null when it did not say. */
  queued: QueueDepth | null;
  /**
   * The candidate-cluster flag as its flag client has it (a TrafficSplit of @headroom/flags,
   * kept opaque here); null when it routes without flags or has none yet.
   */
  trafficFlag: unknown;
  /**
   * Tasks waiting on it because their integration is at its limit in a cluster, most first, at
   * most maxWaitingAtLimitReported entries; null when it did not say.
   */
  waitingAtLimit: IntegrationWaiting[] | null;
}

export interface IntegrationWaiting {
  cluster: string;
  integration: string;
  waiting: number;
}

/** What a balancer sends in its heartbeat: one that has no limits to speak of may leave waitingAtLimit out. */
export type BalancerHeartbeatInfo = Omit<BalancerInfo, 'waitingAtLimit'> & { waitingAtLimit?: IntegrationWaiting[] | null };

/** Most integrations a balancer reports waiting at their limit: the busiest, so that its record stays small. */
export const maxWaitingAtLimitReported = 50;

export interface BalancerRecord extends BalancerInfo {
  balancerId: string;
  lastHeartbeatUnixMs: number;
  /** The override version it last applied, if any. */
  ack: OverrideAck | undefined;
}

/** Most balancers one read returns; more than this many balancers is a configuration mistake. */
export const maxBalancerRecords = 10_000;

/** Reads and changes the override, and keeps the register of balancers and their acknowledgements. */
export class OverrideStore {
  readonly keys: ControlKeys;
  private readonly scripts = LuaScripts.of(path.join(luaDir, 'override'));

  constructor(
    private readonly redis: RedisConnection,
    keyPrefix: string,
  ) {
    this.keys = controlKeys(keyPrefix);
  }

  async read(): Promise<OverrideState | undefined> {
    const raw = await this.guard('read override', () => this.redis.get(this.keys.override));
    return raw === null ? undefined : parseOverride(raw);
  }

  /** Applies a change atomically and publishes the result to every balancer. */
  async change(change: OverrideChange, actor: string): Promise<OverrideState> {
    return (await this.changeFrom(change, actor)).state;
  }

  /** The same, also returning the override it replaced (undefined when there was none). */
  async changeFrom(change: OverrideChange, actor: string): Promise<{ state: OverrideState; previous: OverrideState | undefined }> {
    const argument =
      change.operation === 'rollback' || change.operation === 'resume'
        ? change.integration
        : change.operation === 'set'
          ? JSON.stringify({ all: change.all, integrations: [...change.integrations] })
          : '';
    const [raw, previous] = (await this.run('override-change', [this.keys.override, this.keys.overrideChangedChannel, change.operation, argument, actor])) as [
      string,
      string,
    ];
    return { state: parseOverride(raw), previous: previous === '' ? undefined : parseOverride(previous) };
  }

  /** A balancer's heartbeat; returns the current override (undefined when Redis has none). */
  async balancerHeartbeat(balancerId: string, info: BalancerHeartbeatInfo): Promise<OverrideState | undefined> {
    const raw = await this.run('balancer-heartbeat', [this.keys.balancers, this.keys.balancerInfo, this.keys.override, balancerId, JSON.stringify(info)]);
    return raw === null || raw === false ? undefined : parseOverride(String(raw));
  }

  async acknowledge(balancerId: string, version: number): Promise<OverrideAck> {
    const raw = await this.run('override-ack', [this.keys.acks, this.keys.overrideAckedChannel, balancerId, version]);
    return parseAck(String(raw));
  }

  /** A balancer that stops leaves the register, so nobody waits for its acknowledgement. */
  async leave(balancerId: string): Promise<void> {
    await this.guard('leave', () =>
      this.redis.multi().zrem(this.keys.balancers, balancerId).hdel(this.keys.balancerInfo, balancerId).hdel(this.keys.acks, balancerId).exec(),
    );
  }

  /**
   * The balancers that sent a heartbeat within `liveWithinMs` (by Redis's clock), with what they
   * acknowledged. Forgets the others.
   */
  async liveBalancers(liveWithinMs: number): Promise<BalancerRecord[]> {
    return this.guard('list balancers', async () => {
      const time = await this.redis.time();
      const nowMs = Number(time[0]) * 1000 + Math.floor(Number(time[1]) / 1000);
      const cutoff = nowMs - liveWithinMs;
      const stale = await this.redis.zrangebyscore(this.keys.balancers, '-inf', `(${cutoff}`, 'LIMIT', 0, maxBalancerRecords);
      if (stale.length > 0) {
        await this.redis
          .multi()
          .zrem(this.keys.balancers, ...stale)
          .hdel(this.keys.balancerInfo, ...stale)
          .hdel(this.keys.acks, ...stale)
          .exec();
      }
      const live = await this.redis.zrangebyscore(this.keys.balancers, cutoff, '+inf', 'WITHSCORES', 'LIMIT', 0, maxBalancerRecords);
      const ids: string[] = [];
      const seen = new Map<string, number>();
      for (let i = 0; i < live.length; i += 2) {
        ids.push(live[i]!);
        seen.set(live[i]!, Number(live[i + 1]));
      }
      if (ids.length === 0) return [];
      const [infos, acks] = await Promise.all([this.redis.hmget(this.keys.balancerInfo, ...ids), this.redis.hmget(this.keys.acks, ...ids)]);
      return ids.map((balancerId, i) => ({
        balancerId,
        ...readInfo(infos[i] ?? null),
        lastHeartbeatUnixMs: seen.get(balancerId)!,
        ack: acks[i] ? parseAck(acks[i]!) : undefined,
      }));
    });
  }

  private run(script: string, args: (string | number)[]): Promise<unknown> {
    return this.guard(script, () => this.scripts.run(this.redis, script, args));
  }

  private async guard<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      throw new LedgerUnavailableError(operation, error);
    }
  }
}

/** Parses an override published or stored by override-change.lua. */
export function parseOverride(raw: string): OverrideState {
  const value = JSON.parse(raw) as Partial<OverrideState>;
  return {
    version: Number(value.version ?? 0),
    all: value.all === true,
    integrations: Array.isArray(value.integrations) ? value.integrations.map(String) : [],
    updatedAtUnixMs: Number(value.updatedAtUnixMs ?? 0),
    actor: String(value.actor ?? ''),
  };
}

export function parseAck(raw: string): OverrideAck {
  const value = JSON.parse(raw) as Partial<OverrideAck>;
  return { balancerId: String(value.balancerId ?? ''), version: Number(value.version ?? 0), ackedAtUnixMs: Number(value.ackedAtUnixMs ?? 0) };
}

/** Whether the override sends this integration's tasks to the baseline cluster. */
export function overrideCovers(state: OverrideState, integration: string): boolean {
  return state.all || state.integrations.includes(integration);
}

function readInfo(raw: string | null): BalancerInfo {
  let parsed: { address?: unknown; queued?: { userPresent?: unknown; background?: unknown } | null; trafficFlag?: unknown; waitingAtLimit?: unknown } = {};
  try {
    parsed = raw ? JSON.parse(raw) : {};
  } catch {
    // Written by a balancer of another version: say nothing rather than fail the whole list.
  }
  const queued = parsed.queued;
  return {
    address: String(parsed.address ?? ''),
    queued:
      queued && Number.isFinite(queued.userPresent) && Number.isFinite(queued.background)
        ? { userPresent: Number(queued.userPresent), background: Number(queued.background) }
        : null,
    trafficFlag: parsed.trafficFlag ?? null,
    waitingAtLimit: readWaitingAtLimit(parsed.waitingAtLimit),
  };
}

function readWaitingAtLimit(raw: unknown): IntegrationWaiting[] | null {
  if (!Array.isArray(raw)) return null;
  return raw
    .slice(0, maxWaitingAtLimitReported)
    .filter(
      (entry: Partial<IntegrationWaiting>): entry is IntegrationWaiting =>
        typeof entry?.cluster === 'string' && typeof entry.integration === 'string' && Number.isInteger(entry.waiting) && entry.waiting! > 0,
    );
}
