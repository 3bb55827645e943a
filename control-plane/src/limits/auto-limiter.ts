/**
 * Runs the auto limits (auto-limit.ts decides): each tick, for every integration an operator put
 * in auto mode, it reads the integration's run time on the workers and its tasks in flight, and
 * writes the limit the decision gives to the ledger, where every balancer's next settle keeps it.
 *
 * Every control plane runs one; only the holder of a lease in Redis acts, so that two do not
 * move the same limit twice a tick. The state lives in Redis with the limits, so another control
 * plane carries on where this one left off. A change of limit is audited (actor `auto-limit`),
 * logged and counted; every decision goes to a capped list per integration for the Limits page.
 */
import { randomUUID } from 'node:crypto';
import type { Counter, Gauge } from 'prom-client';
import type { Logger } from '@headroom/common';
import { controlKeys, readLatency, type IntegrationLimitState, type Ledger, type RedisConnection } from '@headroom/fleet';
import type { AuditLog } from '../audit';
import {
  defaultAutoLimitTuning,
  initialAutoLimitState,
  nextAutoLimit,
  type AutoLimitDecision,
  type AutoLimitSetting,
  type AutoLimitState,
  type AutoLimitTuning,
} from './auto-limit';

export const autoLimitActor = 'auto-limit';

/** One integration of one cluster in auto mode. */
export interface AutoLimitEntry {
  cluster: string;
  integration: string;
  setting: AutoLimitSetting;
}

/** One decision as kept for the Limits page. */
export interface AutoLimitPoint {
  atUnixMs: number;
  limitInFlight: number;
  inFlight: number;
  runTimeP50Ms: number | null;
  baselineMs: number | null;
  reason: AutoLimitDecision['reason'];
}

export interface AutoLimiterOptions {
  tickMs: number;
  /** The run-time window each tick reads (the workers publish their histograms every 5 s). */
  windowMs: number;
  /** Fewer tasks than this ended in the window: too few to judge, the limit stays. */
  minSamples: number;
  leaseMs: number;
  /** Decisions kept per integration (at one a tick, 720 are an hour at 5 s). */
  historyLength: number;
  tuning: AutoLimitTuning;
}

export const defaultAutoLimiterOptions: AutoLimiterOptions = Object.freeze({
  tickMs: 5_000,
  windowMs: 10_000,
  minSamples: 20,
  leaseMs: 15_000,
  historyLength: 720,
  tuning: defaultAutoLimitTuning,
});

export interface AutoLimiterMetrics {
  limitChanges: Counter<'cluster' | 'integration' | 'reason'>;
  limitInFlight: Gauge<'cluster' | 'integration'>;
}

export interface AutoLimiterDeps {
  redis: RedisConnection;
  keyPrefix: string;
  ledger: Ledger;
  /** The integrations in auto mode now (bounded by the limits' store). */
  entries(): Promise<AutoLimitEntry[]>;
  audit: Pick<AuditLog, 'record'>;
  metrics: AutoLimiterMetrics;
  logger: Logger;
  options: AutoLimiterOptions;
}

/** Renews the lease if this owner holds it, else takes it if free: 1 when held after the call. */
const leaseScript = `
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
return 0`;

export class AutoLimiter {
  private readonly owner = randomUUID();
  private readonly keys;
  private timer: NodeJS.Timeout | undefined;
  private ticking: Promise<void> | undefined;

  constructor(private readonly deps: AutoLimiterDeps) {
    this.keys = controlKeys(deps.keyPrefix);
  }

  start(): void {
    this.timer = setInterval(() => {
      if (this.ticking) return;
      this.ticking = this.tick(Date.now())
        .catch((error: unknown) => this.deps.logger.warn({ err: error }, 'auto limits: a tick failed; the limits stay as they are'))
        .finally(() => (this.ticking = undefined));
    }, this.deps.options.tickMs);
    this.timer.unref();
  }

  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.ticking;
    await this.deps.redis
      .eval("if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0", 1, this.keys.autoLimitLease, this.owner)
      .catch(() => undefined);
  }

  /** One round over the integrations in auto mode; public so that tests drive the clock. */
  async tick(nowUnixMs: number): Promise<void> {
    const held = Number(await this.deps.redis.eval(leaseScript, 1, this.keys.autoLimitLease, this.owner, this.deps.options.leaseMs));
    if (held !== 1) return;
    const entries = await this.deps.entries();
    if (entries.length === 0) return;
    const latency = await readLatency(this.deps.redis, this.deps.keyPrefix, this.deps.options.windowMs, { nowUnixMs });
    const states = await this.deps.redis.hgetall(this.keys.autoLimits);
    const ledgerLimits = new Map<string, Map<string, IntegrationLimitState>>();
    for (const cluster of new Set(entries.map((entry) => entry.cluster))) {
      const limits = await this.deps.ledger.integrationLimits(cluster);
      ledgerLimits.set(cluster, new Map(limits.map((limit) => [limit.integration, limit])));
    }
    for (const entry of entries) {
      const histogram = latency.get(entry.cluster)?.get(entry.integration);
      const runTimeP50Ms = histogram && histogram.total >= this.deps.options.minSamples ? (histogram.quantileMs(0.5) ?? null) : null;
      const inLedger = ledgerLimits.get(entry.cluster)?.get(entry.integration);
      const reading = { nowMs: nowUnixMs, runTimeP50Ms, inFlight: inLedger?.inflight ?? 0 };
      const before = parseState(states[`${entry.cluster}|${entry.integration}`]) ?? initialAutoLimitState(entry.setting);
      const decision = nextAutoLimit(entry.setting, before, reading, this.deps.options.tuning);
      await this.apply(entry, inLedger?.limit ?? null, before, decision, reading, nowUnixMs);
    }
  }

  private async apply(
    entry: AutoLimitEntry,
    current: IntegrationLimitState['limit'],
    before: AutoLimitState,
    decision: AutoLimitDecision,
    reading: { runTimeP50Ms: number | null; inFlight: number },
    nowUnixMs: number,
  ): Promise<void> {
    const { cluster, integration } = entry;
    const limitInFlight = decision.state.limitInFlight;
    if (!current || !('maxInFlight' in current) || current.maxInFlight !== limitInFlight) {
      await this.deps.ledger.setIntegrationLimit(cluster, integration, { maxInFlight: limitInFlight });
      this.deps.metrics.limitChanges.inc({ cluster, integration, reason: decision.reason });
      this.deps.logger.info(
        { cluster, integration, limitInFlight, before: current ?? null, reason: decision.reason, latencyRatio: decision.latencyRatio },
        'auto limits: changed a limit',
      );
      await this.deps.audit.record({
        actor: autoLimitActor,
        action: 'limit.auto',
        target: `${cluster}/${integration}`,
        before: current ?? null,
        after: { maxInFlight: limitInFlight },
        outcome: 'ok',
        reason: `${decision.reason}: run time p50 ${reading.runTimeP50Ms === null ? '-' : Math.round(reading.runTimeP50Ms)} ms, baseline ${Math.round(before.baselineMs ?? 0)} ms`,
      });
    }
    this.deps.metrics.limitInFlight.set({ cluster, integration }, limitInFlight);
    const point: AutoLimitPoint = {
      atUnixMs: nowUnixMs,
      limitInFlight,
      inFlight: reading.inFlight,
      runTimeP50Ms: reading.runTimeP50Ms,
      baselineMs: decision.state.baselineMs,
      reason: decision.reason,
    };
    const historyKey = this.keys.autoLimitHistory(cluster, integration);
    await this.deps.redis
      .multi()
      .hset(this.keys.autoLimits, `${cluster}|${integration}`, JSON.stringify(decision.state))
      .lpush(historyKey, JSON.stringify(point))
      .ltrim(historyKey, 0, this.deps.options.historyLength - 1)
      .exec();
  }

  /** The decisions kept for one integration, oldest first. */
  async history(cluster: string, integration: string): Promise<AutoLimitPoint[]> {
    const raw = await this.deps.redis.lrange(this.keys.autoLimitHistory(cluster, integration), 0, -1);
    return raw.map((line) => JSON.parse(line) as AutoLimitPoint).reverse();
  }

  /**
   * Forgets an integration that left auto mode (its state and history), once the tick under way
   * (which may have read it as auto still) is over: the caller then writes its own limit again.
   */
  async forget(cluster: string, integration: string): Promise<void> {
    await this.ticking;
    await this.deps.redis.multi().hdel(this.keys.autoLimits, `${cluster}|${integration}`).del(this.keys.autoLimitHistory(cluster, integration)).exec();
  }
}

function parseState(raw: string | undefined): AutoLimitState | null {
  if (raw === undefined) return null;
  try {
    const state = JSON.parse(raw) as AutoLimitState;
    return Number.isFinite(state.limitInFlight) ? state : null;
  } catch {
    return null;
  }
}
