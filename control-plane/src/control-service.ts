import type { RedisConnection } from '@headroom/fleet';
import { HeadroomError, isHeadroomError, type Logger } from '@headroom/common';
import { controlKeys, type BalancerRecord, type OverrideChange, type OverrideState, type QueueDepth } from '@headroom/fleet';
import { parseTrafficSplit, sameTrafficSplit, type TrafficSplit } from '@headroom/flags';
import type { AuditLog } from './audit';
import type { AuditAction, NewAuditEntry } from './record/audit-entry';
import type { ChangeLock, ChangeUnit } from './record/change-lock';
import { controlScripts } from './control-scripts';
import { allIntegrations, DurableOverride } from './durable-override';
import { apiErrorCodes } from './errors';
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
  /** Unleash writes of rollbacks and resumes still queued or running in this control plane: while any, `durable` may be false for a moment. */
  unleashWritesPending: number;
  balancers: TrafficBalancerView[];
  lastRollback: RollbackRecord | null;
}

/** Where a rollback or resume stands in Unleash, the durable copy: written after the answer. */
export type DurableState = 'pending' | 'done' | 'failed';

/**
 * A rollback or resume: the answer of POST /rollback and /resume (durable "pending"), then the
 * `override-change` event once Unleash was written ("done" or "failed"); GET /traffic's
 * lastRollback keeps the latest rollback's.
 */
export interface OverrideChangeRecord {
  kind: 'rollback' | 'resume';
  /** "all", or the integration. */
  scope: string;
  actor: string;
  /** Why, as the operator gave it; null when not given. */
  reason: string | null;
  atUnixMs: number;
  overrideVersion: number;
  override: OverrideState;
  /** Balancers alive when the override was written. */
  expected: string[];
  acknowledged: PropagatedChange['acknowledged'];
  missing: string[];
  /** From the request to the last acknowledgement; null when no balancer was alive. */
  propagationMs: number | null;
  durable: DurableState;
  /** Why Unleash could not be written (durable "failed"), and what that leaves in effect. */
  durableError: string | null;
  /** When Unleash was written or failed; null while pending. */
  durableAtUnixMs: number | null;
}

export type RollbackRecord = OverrideChangeRecord & { kind: 'rollback' };

export type RollbackScope = { integration?: string | undefined; reason?: string | undefined };

/**
 * An actuator's caller that may call it again for the same change (the autopilot finishing an
 * intent another control plane began) names it: the change's `ok` entry is then written once.
 * A failed attempt's entry carries no key: it is its own event, and a retry that succeeds is recorded.
 */
export interface ChangeOptions {
  idempotencyKey?: string | undefined;
}

/** Changes that may wait their turn; more get HR_ERR_BUSY. */
export const maxPendingChanges = 32;

/**
 * What the REST API does, one change at a time: Unleash holds the flags (no copy here), Redis
 * holds the instant override, and every change lands in the audit log, failed ones included.
 */
export class ControlService {
  private queue: Promise<unknown> = Promise.resolve();
  private pendingChanges = 0;
  private overrideChangesRunning = 0;
  private readonly lastRollbackKey: string;
  private readonly overrideChangeRecordsChannel: string;
  private readonly durable: DurableOverride;
  private readonly scripts: ReturnType<typeof controlScripts>;

  constructor(
    private readonly deps: {
      redis: RedisConnection;
      keyPrefix: string;
      traffic: TrafficFlag;
      parallelism: ParallelismFlag;
      override: OverrideControl;
      audit: AuditLog;
      /** One control plane at a time changes Unleash (a PostgreSQL advisory lock); entries of changes are written under it. */
      changes: ChangeLock;
      metrics: ControlMetrics;
      logger: Logger;
    },
  ) {
    const keys = controlKeys(deps.keyPrefix);
    this.lastRollbackKey = keys.lastRollback;
    this.overrideChangeRecordsChannel = keys.overrideChangeRecordsChannel;
    this.durable = new DurableOverride({
      traffic: deps.traffic,
      store: deps.override.store,
      inTurn: (write) => this.inTurn(write),
      locked: (scope, write) => this.durableWrite(scope, write),
    });
    this.scripts = controlScripts(deps.redis);
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
    const flagIntegrations = new Set(
      Object.entries(flag.integrations)
        .filter(([, t]) => t.rolledBack)
        .map(([name]) => name),
    );
    const durable = (override?.all ?? false) === !flag.enabled && [...overrideIntegrations].every((i) => flagIntegrations.has(i) || !(i in flag.integrations));
    return {
      flag: { name: this.deps.traffic.flagName, ...flag },
      effectivePercent: {
        default: effective(undefined, flag.defaultPercent, false),
        integrations: Object.fromEntries(Object.entries(flag.integrations).map(([name, t]) => [name, effective(name, t.percent, t.rolledBack)])),
      },
      override: override ?? null,
      durable,
      unleashWritesPending: this.durable.pending,
      balancers: balancers.map((b) => {
        const seen = parseTrafficSplit(b.trafficFlag);
        return { ...toView(b, override), trafficFlagUpToDate: seen ? sameTrafficSplit(seen, splitOf(flag)) : null };
      }),
      lastRollback: lastRollback ? parseRollbackRecord(lastRollback) : null,
    };
  }

  async balancers(): Promise<BalancerView[]> {
    const [override, balancers] = await Promise.all([this.deps.override.store.read(), this.deps.override.liveBalancers()]);
    return balancers.map((b) => toView(b, override));
  }

  /** Under the change lock: the flag is read, written and recorded while no other control plane changes it. */
  setTraffic(change: TrafficChange, actor: string, options: ChangeOptions = {}): Promise<TrafficView> {
    return this.serialised(async () => {
      const target = [change.defaultPercent !== undefined ? 'default' : undefined, ...Object.keys(change.integrations ?? {})].filter(Boolean).join(',');
      await this.deps.changes.run('a traffic change', async (unit) => {
        try {
          const { before, after } = await this.deps.traffic.setPercents(change);
          await unit.record({ actor, action: 'traffic.set', target, request: change, before, after, outcome: 'ok', ...keyed(options) });
          this.deps.metrics.flagChanges.inc({ flag: 'traffic', outcome: 'ok' });
        } catch (error) {
          await unit.record(failure('traffic.set', actor, target, change, error));
          this.deps.metrics.flagChanges.inc({ flag: 'traffic', outcome: 'failed' });
          throw error;
        }
      });
      return this.traffic();
    });
  }

  parallelism(): Promise<ParallelismByCluster> {
    return this.deps.parallelism.read();
  }

  setParallelism(change: ParallelismByCluster, actor: string, options: ChangeOptions = {}): Promise<ParallelismByCluster> {
    return this.serialised(() => {
      const target = Object.keys(change).join(',');
      return this.deps.changes.run('a parallelism change', async (unit: ChangeUnit) => {
        try {
          const { before, after } = await this.deps.parallelism.set(change);
          await unit.record({ actor, action: 'parallelism.set', target, request: { clusters: change }, before, after, outcome: 'ok', ...keyed(options) });
          this.deps.metrics.flagChanges.inc({ flag: 'parallelism', outcome: 'ok' });
          return after;
        } catch (error) {
          await unit.record(failure('parallelism.set', actor, target, { clusters: change }, error));
          this.deps.metrics.flagChanges.inc({ flag: 'parallelism', outcome: 'failed' });
          throw error;
        }
      });
    });
  }

  /**
   * Sends all integrations (or one) to the baseline: the Redis override, acknowledged by every
   * live balancer, answers; the Unleash write that makes it durable follows (see DurableOverride).
   */
  rollback(scope: RollbackScope, actor: string, options: ChangeOptions = {}): Promise<RollbackRecord> {
    return this.changeOverride('rollback', scope, actor, options) as Promise<RollbackRecord>;
  }

  /**
   * Lifts the override, then switches the flag (or the integration's strategy) on in Unleash.
   * Until Unleash has it, the flag still sends the scope to the baseline, so a resume whose
   * Unleash write fails leaves the traffic where the rollback put it.
   */
  async resume(scope: RollbackScope, actor: string): Promise<OverrideChangeRecord> {
    if (scope.integration && (await this.deps.override.store.read())?.all) {
      throw new HeadroomError(
        apiErrorCodes.conflict,
        `every integration is rolled back; resume all (POST /api/v1/resume with {}) before resuming ${scope.integration} alone`,
      );
    }
    return this.changeOverride('resume', scope, actor);
  }

  /** The drain took effect in Redis: recorded now, or through the outbox when PostgreSQL is away. */
  drainRecorded(actor: string, workerId: string, cluster: string, reason: string | undefined): Promise<void> {
    return this.deps.audit.record({
      actor,
      action: 'worker.drain',
      target: workerId,
      request: reason === undefined ? {} : { reason },
      before: null,
      after: { cluster, draining: true },
      outcome: 'ok',
      ...(reason ? { reason } : {}),
    });
  }

  /** Creates what is missing in Unleash, under the change lock (replicas starting together do not both add strategies). */
  ensureFlags(): Promise<string[]> {
    return this.deps.changes.run('setting up the flags', async () => [...(await this.deps.traffic.ensure()), ...(await this.deps.parallelism.ensure())]);
  }

  /** Resolves when the Unleash writes under way (rollbacks' and resumes' included) have ended, or after `timeoutMs`. */
  async settle(timeoutMs: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<void>((resolve) => (timer = setTimeout(resolve, timeoutMs)));
    await Promise.race([this.queue.then(() => undefined), timeout]);
    clearTimeout(timer);
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
      const integrations = Object.entries(flag.integrations)
        .filter(([, t]) => t.rolledBack)
        .map(([name]) => name);
      const rebuilt = await this.deps.override.store.change({ operation: 'set', all: !flag.enabled, integrations }, 'control-plane');
      if (when === 'start') {
        this.deps.logger.info({ override: rebuilt }, 'no override in Redis yet: wrote the one Unleash implies');
      } else {
        await this.deps.audit.record({ actor: 'control-plane', action: 'override.rebuild', target: 'all', before: null, after: rebuilt, outcome: 'ok' });
        this.deps.logger.warn({ override: rebuilt }, 'the override was missing in Redis: rebuilt from Unleash');
      }
      return true;
    });
  }

  /**
   * The override first, answered once every live balancer acknowledged it (or the timeout
   * passed); Unleash next, in turn with other changes, announced when it is done or failed.
   * Override changes do not wait behind Unleash writes: a rollback must not queue behind a
   * slow traffic change.
   */
  private async changeOverride(kind: 'rollback' | 'resume', scope: RollbackScope, actor: string, options: ChangeOptions = {}): Promise<OverrideChangeRecord> {
    if (this.overrideChangesRunning >= maxPendingChanges) {
      throw new HeadroomError(apiErrorCodes.busy, `${maxPendingChanges} rollbacks and resumes are being acknowledged already; nothing was changed, try again`, {
        retryAfterMs: 1000,
      });
    }
    this.overrideChangesRunning++;
    let propagated: PropagatedChange;
    try {
      const operation: OverrideChange = scope.integration
        ? { operation: kind, integration: scope.integration }
        : { operation: kind === 'rollback' ? 'rollback-all' : 'resume-all' };
      propagated = await this.deps.override.change(operation, actor);
    } finally {
      this.overrideChangesRunning--;
    }
    const target = scope.integration ?? allIntegrations;
    const record: OverrideChangeRecord = {
      kind,
      scope: target,
      actor,
      reason: scope.reason ?? null,
      atUnixMs: Date.now(),
      overrideVersion: propagated.override.version,
      override: propagated.override,
      expected: propagated.expected,
      acknowledged: propagated.acknowledged,
      missing: propagated.missing,
      propagationMs: propagated.propagationMs,
      durable: 'pending',
      durableError: null,
      durableAtUnixMs: null,
    };
    if (kind === 'rollback') {
      this.deps.metrics.observeRollback(propagated.propagationMs);
      // Not awaited: the answer need not wait for it, and the durable outcome's conditional
      // update, sent later on the same connection, reaches Redis after it.
      void this.saveRollback(record);
    }
    this.announce(record);
    void this.makeDurable(record, propagated.previous, options);
    return record;
  }

  private async makeDurable(answered: OverrideChangeRecord, previous: OverrideState | undefined, options: ChangeOptions): Promise<void> {
    const outcome = await this.durable.sync(answered.scope, answered.override);
    this.deps.metrics.observeUnleashWrite(answered.kind, outcome);
    const record: OverrideChangeRecord = {
      ...answered,
      durable: outcome.ok ? 'done' : 'failed',
      durableError: outcome.ok ? null : durableFailure(answered, outcome.error),
      durableAtUnixMs: Date.now(),
    };
    if (record.kind === 'rollback') {
      await this.saveRollback(record, { onlyIfVersion: record.overrideVersion });
      this.deps.metrics.rollbacks.inc({ scope: record.scope === allIntegrations ? 'all' : 'integration', outcome: outcome.ok ? 'ok' : 'not-durable' });
    }
    const after = {
      override: record.override,
      propagationMs: record.propagationMs,
      acknowledged: record.acknowledged.length,
      missing: record.missing,
      durable: record.durable,
    };
    await this.deps.audit.record({
      actor: record.actor,
      action: record.kind,
      target: record.scope,
      request: { ...(record.scope === allIntegrations ? {} : { integration: record.scope }), ...(record.reason ? { reason: record.reason } : {}) },
      before: previous ?? null,
      after,
      outcome: outcome.ok ? 'ok' : 'failed',
      ...(record.durableError ? { error: record.durableError } : {}),
      ...(record.reason ? { reason: record.reason } : {}),
      ...(outcome.ok ? keyed(options) : {}),
    });
    if (!outcome.ok)
      this.deps.logger.warn(
        { kind: record.kind, scope: record.scope, overrideVersion: record.overrideVersion, error: outcome.error },
        'a rollback or resume is in effect through Redis but not in Unleash',
      );
    this.announce(record);
  }

  /** To every control plane's event streams (`override-change`), through Redis. */
  private announce(record: OverrideChangeRecord): void {
    this.deps.redis
      .publish(this.overrideChangeRecordsChannel, JSON.stringify(record))
      .catch((error: unknown) => this.deps.logger.debug({ err: error }, 'could not announce an override change'));
  }

  /** Keeps the latest rollback's record; its durable state only replaces the same rollback's. */
  private async saveRollback(record: OverrideChangeRecord, condition?: { onlyIfVersion: number }): Promise<void> {
    const json = JSON.stringify(record);
    try {
      if (!condition) await this.deps.redis.set(this.lastRollbackKey, json);
      else await this.scripts('last-rollback-update', [this.lastRollbackKey, json, String(condition.onlyIfVersion)]);
    } catch (error) {
      this.deps.logger.debug({ err: error }, 'could not keep the last rollback');
    }
  }

  /**
   * A rollback's or resume's Unleash write, under the change lock. When PostgreSQL cannot be
   * reached, "all" is written without it: that write is one switch of the flag's environment
   * (no read, nothing another change could interleave with), and the rollback it makes durable
   * has already taken effect. One integration's write rewrites its whole strategy from a read, so
   * it needs the lock: it fails, and rolling back again once PostgreSQL is back retries it.
   */
  private async durableWrite<T>(scope: string, write: () => Promise<T>): Promise<T> {
    try {
      return await this.deps.changes.run(`the Unleash write of a rollback or resume of ${scope}`, write);
    } catch (error) {
      if (scope !== allIntegrations || !isHeadroomError(error, apiErrorCodes.databaseUnavailable)) throw error;
      this.deps.logger.warn({ err: error }, 'PostgreSQL away: switching the flag for all integrations without the change lock (a single write)');
      return write();
    }
  }

  /** One change at a time (each reads Unleash, then writes it); at most maxPendingChanges wait. */
  private serialised<T>(fn: () => Promise<T>): Promise<T> {
    if (this.pendingChanges >= maxPendingChanges) {
      return Promise.reject(
        new HeadroomError(apiErrorCodes.busy, `${maxPendingChanges} changes already wait their turn; nothing was changed, try again`, { retryAfterMs: 1000 }),
      );
    }
    this.pendingChanges++;
    return this.inTurn(fn).finally(() => this.pendingChanges--);
  }

  /** In turn with the other Unleash writes, without the bound (DurableOverride bounds its own). */
  private inTurn<T>(fn: () => Promise<T>): Promise<T> {
    const run = this.queue.then(fn, fn);
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
    integrations: Object.fromEntries(
      Object.entries(flag.integrations)
        .filter(([, t]) => !t.rolledBack)
        .map(([name, t]) => [name, t.percent]),
    ),
  };
}

/** What the answer (and the audit log) says an Unleash write failure leaves in effect. */
function durableFailure(record: OverrideChangeRecord, error: string): string {
  const acknowledged = `acknowledged by ${record.acknowledged.length} of ${record.expected.length} balancers`;
  return record.kind === 'rollback'
    ? `the rollback is in effect through Redis (override version ${record.overrideVersion}, ${acknowledged}), but Unleash could not be updated, so it would not survive a loss of Redis data: ${error}. Roll back again to retry.`
    : `the override was lifted (version ${record.overrideVersion}, ${acknowledged}), but Unleash could not be updated, so its flag still sends ${record.scope === allIntegrations ? 'every integration' : record.scope} to the baseline: ${error}. Resume again to retry.`;
}

/** A record kept by this or an earlier version (whose `durable` was a boolean). */
function parseRollbackRecord(json: string): RollbackRecord {
  const record = JSON.parse(json) as Partial<Omit<RollbackRecord, 'durable'>> & { durable?: DurableState | boolean };
  const durable: DurableState = record.durable === true ? 'done' : record.durable === false ? 'failed' : (record.durable ?? 'pending');
  return { kind: 'rollback', reason: null, expected: [], durableError: null, durableAtUnixMs: null, ...record, durable } as RollbackRecord;
}

/** The idempotency key of a change's `ok` entry, when its caller gave one. */
function keyed(options: ChangeOptions): { idempotencyKey?: string } {
  return options.idempotencyKey === undefined ? {} : { idempotencyKey: options.idempotencyKey };
}

/** The entry of a change that failed: what was asked, and why it failed. */
function failure(action: AuditAction, actor: string, target: string, attempted: unknown, error: unknown): NewAuditEntry {
  return { actor, action, target, request: attempted, before: null, after: attempted, outcome: 'failed', error: messageOf(error) };
}

function messageOf(error: unknown): string {
  if (isHeadroomError(error)) return error.message;
  return error instanceof Error ? error.message : String(error);
}
