import type { Redis } from 'ioredis';
import { HeadroomError, isHeadroomError, type Logger } from '@headroom/common';
import type { BalancerRecord, OverrideState, QueueDepth } from '@headroom/fleet';
import { parseTrafficSplit, sameTrafficSplit, type TrafficSplit } from '@headroom/flags';
import type { AuditAction, AuditLog } from './audit';
import { apiErrorCodes, UnleashFailedError } from './errors';
import type { ControlMetrics } from './metrics';
import type { OverrideControl, PropagatedChange } from './override-control';
import type { ParallelismByCluster, ParallelismFlag } from './unleash/parallelism-flag';
import type { TrafficChange, TrafficFlag, TrafficFlagState } from './unleash/traffic-flag';

export interface BalancerView {
  balancerId: string;
  address: string;
  lastHeartbeatUnixMs: number;
  /** Tasks waiting there for a slot, by priority, as of its last heartbeat. */
  queued: QueueDepth | null;
  /** Override version it applied; null when it has applied none. */
  ackedVersion: number | null;
  /** It applied the current override. */
  upToDate: boolean;
}

export interface TrafficBalancerView extends BalancerView {
  /**
   * Its flag client has the traffic flag as Unleash holds it now: a traffic change has reached
   * it (clients poll about every second). null when it routes without the flag.
   */
  trafficFlagUpToDate: boolean | null;
}

export interface TrafficView {
  flag: { name: string } & TrafficFlagState;
  /** Percent of each integration's keys that go to the candidate now, override and switch included. */
  effectivePercent: { default: number; integrations: Record<string, number> };
  override: OverrideState | null;
  /** The override and Unleash agree (a failed Unleash write during a rollback leaves them apart). */
  durable: boolean;
  balancers: TrafficBalancerView[];
  lastRollback: RollbackRecord | null;
}

export interface RollbackRecord {
  scope: string;
  actor: string;
  atUnixMs: number;
  overrideVersion: number;
  acknowledged: PropagatedChange['acknowledged'];
  missing: string[];
  propagationMs: number | null;
  durable: boolean;
}

export type RollbackScope = { integration?: string | undefined };

/** Changes that may wait their turn; more get HR_ERR_BUSY. */
export const maxPendingChanges = 32;

/**
 * What the REST API does, one change at a time: Unleash holds the flags (no copy here), Redis
 * holds the instant override, and every change lands in the audit log, failed ones included.
 */
export class ControlService {
  private queue: Promise<unknown> = Promise.resolve();
  private pendingChanges = 0;
  private readonly lastRollbackKey: string;

  constructor(
    private readonly deps: {
      redis: Redis;
      keyPrefix: string;
      traffic: TrafficFlag;
      parallelism: ParallelismFlag;
      override: OverrideControl;
      audit: AuditLog;
      metrics: ControlMetrics;
      logger: Logger;
    },
  ) {
    this.lastRollbackKey = `{${deps.keyPrefix}:control}:last-rollback`;
  }

  async traffic(): Promise<TrafficView> {
    const [flag, override, balancers, lastRollback] = await Promise.all([
      this.deps.traffic.read(),
      this.deps.override.store.read(),
      this.deps.override.liveBalancers(),
      this.deps.redis.get(this.lastRollbackKey).catch(() => null),
    ]);
    const coversAll = !flag.enabled || override?.all === true;
    const effective = (integration: string | undefined, percent: number, rolledBack: boolean) =>
      coversAll || rolledBack || (integration !== undefined && override?.integrations.includes(integration)) ? 0 : percent;
    const overrideIntegrations = new Set(override?.integrations ?? []);
    const flagIntegrations = new Set(Object.entries(flag.integrations).filter(([, t]) => t.rolledBack).map(([name]) => name));
    const durable = (override?.all ?? false) === !flag.enabled && [...overrideIntegrations].every((i) => flagIntegrations.has(i) || !(i in flag.integrations));
    return {
      flag: { name: this.deps.traffic.flagName, ...flag },
      effectivePercent: {
        default: effective(undefined, flag.defaultPercent, false),
        integrations: Object.fromEntries(Object.entries(flag.integrations).map(([name, t]) => [name, effective(name, t.percent, t.rolledBack)])),
      },
      override: override ?? null,
      durable,
      balancers: balancers.map((b) => {
        const seen = parseTrafficSplit(b.trafficFlag);
        return { ...toView(b, override), trafficFlagUpToDate: seen ? sameTrafficSplit(seen, splitOf(flag)) : null };
      }),
      lastRollback: lastRollback ? (JSON.parse(lastRollback) as RollbackRecord) : null,
    };
  }

  async balancers(): Promise<BalancerView[]> {
    const [override, balancers] = await Promise.all([this.deps.override.store.read(), this.deps.override.liveBalancers()]);
    return balancers.map((b) => toView(b, override));
  }

  setTraffic(change: TrafficChange, actor: string): Promise<TrafficView> {
    return this.serialised(async () => {
      const target = [change.defaultPercent !== undefined ? 'default' : undefined, ...Object.keys(change.integrations ?? {})].filter(Boolean).join(',');
      try {
        const { before, after } = await this.deps.traffic.setPercents(change);
        await this.record('traffic.set', actor, target, before, after);
        this.deps.metrics.flagChanges.inc({ flag: 'traffic', outcome: 'ok' });
      } catch (error) {
        await this.recordFailure('traffic.set', actor, target, change, error);
        this.deps.metrics.flagChanges.inc({ flag: 'traffic', outcome: 'failed' });
        throw error;
      }
      return this.traffic();
    });
  }

  parallelism(): Promise<ParallelismByCluster> {
    return this.deps.parallelism.read();
  }

  setParallelism(change: ParallelismByCluster, actor: string): Promise<ParallelismByCluster> {
    return this.serialised(async () => {
      const target = Object.keys(change).join(',');
      try {
        const { before, after } = await this.deps.parallelism.set(change);
        await this.record('parallelism.set', actor, target, before, after);
        this.deps.metrics.flagChanges.inc({ flag: 'parallelism', outcome: 'ok' });
        return after;
      } catch (error) {
        await this.recordFailure('parallelism.set', actor, target, change, error);
        this.deps.metrics.flagChanges.inc({ flag: 'parallelism', outcome: 'failed' });
        throw error;
      }
    });
  }

  /**
   * Instant first (the Redis override, acknowledged by every live balancer), durable second (the
   * Unleash switch or the integration's strategy off). If Unleash fails the rollback still holds
   * through Redis, and the error says so.
   */
  rollback(scope: RollbackScope, actor: string): Promise<RollbackRecord> {
    return this.serialised(async () => {
      const target = scope.integration ?? 'all';
      const propagated = await this.deps.override.change(scope.integration ? { operation: 'rollback', integration: scope.integration } : { operation: 'rollback-all' }, actor);
      const before = propagated.previous;
      this.deps.metrics.observeRollback(propagated.propagationMs);
      const record: RollbackRecord = {
        scope: target,
        actor,
        atUnixMs: Date.now(),
        overrideVersion: propagated.override.version,
        acknowledged: propagated.acknowledged,
        missing: propagated.missing,
        propagationMs: propagated.propagationMs,
        durable: false,
      };
      try {
        if (scope.integration) await this.deps.traffic.setIntegrationRolledBack(scope.integration, true);
        else await this.deps.traffic.setEnabled(false);
        record.durable = true;
      } catch (error) {
        await this.saveRollback(record);
        await this.recordFailure('rollback', actor, target, { before, after: propagated.override, ...record }, error);
        this.deps.metrics.rollbacks.inc({ scope: scope.integration ? 'integration' : 'all', outcome: 'not-durable' });
        throw new UnleashFailedError(
          `the rollback is in effect through Redis (override version ${propagated.override.version}, acknowledged by ${propagated.acknowledged.length} of ${propagated.expected.length} balancers), but Unleash could not be updated, so it would not survive a loss of Redis data: ${messageOf(error)}. Roll back again to retry.`,
          {},
          error,
        );
      }
      await this.saveRollback(record);
      await this.record('rollback', actor, target, before ?? null, { override: propagated.override, propagationMs: propagated.propagationMs, acknowledged: propagated.acknowledged.length, missing: propagated.missing });
      this.deps.metrics.rollbacks.inc({ scope: scope.integration ? 'integration' : 'all', outcome: 'ok' });
      return record;
    });
  }

  /** Durable first (Unleash on again: if that fails nothing changed), then the override lifted. */
  resume(scope: RollbackScope, actor: string): Promise<PropagatedChange> {
    return this.serialised(async () => {
      const target = scope.integration ?? 'all';
      const before = await this.deps.override.store.read();
      if (scope.integration) {
        const flag = await this.deps.traffic.read();
        if (before?.all || !flag.enabled) {
          throw new HeadroomError(apiErrorCodes.conflict, `every integration is rolled back; resume all (POST /api/v1/resume with {}) before resuming ${scope.integration} alone`);
        }
      }
      try {
        if (scope.integration) await this.deps.traffic.setIntegrationRolledBack(scope.integration, false);
        else await this.deps.traffic.setEnabled(true);
      } catch (error) {
        await this.recordFailure('resume', actor, target, before ?? null, error);
        throw error;
      }
      const propagated = await this.deps.override.change(scope.integration ? { operation: 'resume', integration: scope.integration } : { operation: 'resume-all' }, actor);
      await this.record('resume', actor, target, before ?? null, propagated.override);
      return propagated;
    });
  }

  drainRecorded(actor: string, workerId: string, cluster: string): Promise<void> {
    return this.record('worker.drain', actor, workerId, null, { cluster, draining: true });
  }

  /**
   * Writes the override from what Unleash durably says when Redis has none: at start (a new
   * key prefix has none yet), and after Redis lost its data, so balancers that start later see
   * it too. Returns true when it wrote one.
   */
  async rebuildOverrideIfLost(when: 'start' | 'check'): Promise<boolean> {
    const current = await this.deps.override.store.read();
    if (current) return false;
    return this.serialised(async () => {
      if (await this.deps.override.store.read()) return false;
      const flag = await this.deps.traffic.read();
      const integrations = Object.entries(flag.integrations).filter(([, t]) => t.rolledBack).map(([name]) => name);
      const rebuilt = await this.deps.override.store.change({ operation: 'set', all: !flag.enabled, integrations }, 'control-plane');
      if (when === 'start') {
        this.deps.logger.info({ override: rebuilt }, 'no override in Redis yet: wrote the one Unleash implies');
      } else {
        await this.record('override.rebuild', 'control-plane', 'all', null, rebuilt);
        this.deps.logger.warn({ override: rebuilt }, 'the override was missing in Redis: rebuilt from Unleash');
      }
      return true;
    });
  }

  private async saveRollback(record: RollbackRecord): Promise<void> {
    await this.deps.redis.set(this.lastRollbackKey, JSON.stringify(record)).catch(() => undefined);
  }

  private async record(action: AuditAction, actor: string, target: string, before: unknown, after: unknown): Promise<void> {
    await this.deps.audit.append({ actor, action, target, before, after, outcome: 'ok' }).catch((error: unknown) => this.deps.logger.error({ err: error, action, target }, 'could not write the audit log'));
  }

  private async recordFailure(action: AuditAction, actor: string, target: string, attempted: unknown, error: unknown): Promise<void> {
    await this.deps.audit
      .append({ actor, action, target, before: null, after: attempted, outcome: 'failed', error: messageOf(error) })
      .catch((auditError: unknown) => this.deps.logger.error({ err: auditError, action, target }, 'could not write the audit log'));
  }

  /** One change at a time: each reads Unleash, then writes it. */
  private serialised<T>(fn: () => Promise<T>): Promise<T> {
    if (this.pendingChanges >= maxPendingChanges) {
      return Promise.reject(new HeadroomError(apiErrorCodes.busy, `${maxPendingChanges} changes already wait their turn; nothing was changed, try again`, { retryAfterMs: 1000 }));
    }
    this.pendingChanges++;
    const run = this.queue.then(fn, fn).finally(() => this.pendingChanges--);
    this.queue = run.catch(() => undefined);
    return run;
  }
}

function toView(record: BalancerRecord, override: OverrideState | undefined): BalancerView {
  const ackedVersion = record.ack?.version ?? null;
  return {
    balancerId: record.balancerId,
    address: record.address,
    lastHeartbeatUnixMs: record.lastHeartbeatUnixMs,
    queued: record.queued,
    ackedVersion,
    upToDate: override === undefined || (ackedVersion !== null && ackedVersion >= override.version),
  };
}

/** The flag as a balancer's client sees it: integrations whose strategy is switched off are absent. */
function splitOf(flag: TrafficFlagState): TrafficSplit {
  return {
    enabled: flag.enabled,
    defaultPercent: flag.defaultPercent,
    integrations: Object.fromEntries(Object.entries(flag.integrations).filter(([, t]) => !t.rolledBack).map(([name, t]) => [name, t.percent])),
  };
}

function messageOf(error: unknown): string {
  if (isHeadroomError(error)) return error.message;
  return error instanceof Error ? error.message : String(error);
}
