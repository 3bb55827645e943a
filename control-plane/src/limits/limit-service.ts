import { HeadroomError, type Logger } from '@headroom/common';
import {
  decodeIntegrationLimit,
  defaultIntegrationLimit,
  encodeIntegrationLimit,
  InvalidIntegrationLimitError,
  limitInFlight,
  startsPerSecondOf,
  type IntegrationLimit,
  type IntegrationWaiting,
  type Ledger,
} from '@headroom/fleet';
import type { AuditLog } from '../audit';
import { apiErrorCodes, InvalidRequestError } from '../errors';
import type { ControlMetrics } from '../metrics';
import type { LimitStore } from './limit-store';
import type { AutoLimitEntry } from './auto-limiter';
import { decodeAutoLimit, encodeAutoLimit, isAutoLimit, type AutoLimit } from './auto-setting';

/** The balancers' code for a task refused at its integration's limit (balancer/src/errors.ts). */
const integrationAtLimitCode = 'HR_ERR_INTEGRATION_AT_LIMIT';

/** Integrations listed per cluster at most, and limits of their own per cluster at most (a bounded label set). */
export const maxIntegrationsPerCluster = 200;

export interface IntegrationLimitView {
  integration: string;
  /** 'own': set by an operator; 'default': the ledger's default applies. */
  source: 'own' | 'default';
  /** Its own limit (fixed, or auto: the auto limiter moves the count between its bounds), or the default's form. */
  limit: IntegrationLimit | AutoLimit | typeof defaultIntegrationLimit;
  /** Tasks in flight it may have now; null: no limit. */
  maxInFlight: number | null;
  /** The start rate it keeps to (its own, or the default's when it has no limit of its own); null: none. */
  maxStartsPerSecond: number | null;
  inflight: number;
  /** Tasks waiting on the live balancers because it is at its limit (as of their last heartbeats). */
  waiting: number;
  /** Tasks balancers refused at its limit over the last 10-20 s (their error counts in Redis). */
  refused: number | null;
}

/** One integration's limit, in flight and waiting now, as the limits' time series samples them. */
export interface LimitSample {
  cluster: string;
  integration: string;
  /** null: no limit. */
  maxInFlight: number | null;
  inflight: number;
  waiting: number;
}

export interface LimitSamples {
  samples: LimitSample[];
  /** Integrations past maxIntegrationsPerCluster left out, per cluster. */
  leftOut: Record<string, number>;
}

export interface ClusterLimitsView {
  cluster: string;
  role: 'baseline' | 'candidate';
  capacitySlots: number;
  integrations: IntegrationLimitView[];
}

export interface LimitsView {
  default: typeof defaultIntegrationLimit;
  clusters: ClusterLimitsView[];
}

export interface LimitServiceDeps {
  ledger: Ledger;
  store: LimitStore;
  audit: AuditLog;
  metrics: ControlMetrics;
  logger: Logger;
  clusters: { baseline: string; candidate: string };
  /** The integrations the control plane is configured with: listed even before their first task. */
  integrations: readonly string[];
  /** Integrations seen lately in the workers' latency histograms. */
  seenIntegrations(): Promise<string[]>;
  /** Tasks balancers refused at an integration's limit lately, per cluster and integration. */
  refusedCounts(): Promise<{ cluster: string; integration: string; code: string; count: number }[]>;
  /** Tasks waiting on the live balancers for an integration's limit, per cluster and integration. */
  waitingAtLimit(): Promise<IntegrationWaiting[]>;
  /** Slots of live workers per cluster. */
  capacity(): Promise<Record<string, number>>;
  /** Called when an integration leaves auto mode: the auto limiter forgets its state. */
  leftAuto(cluster: string, integration: string): Promise<void>;
}

/**
 * Per-integration limits for operators: PostgreSQL holds what they set, the ledger enforces it.
 * A change is written to both in one PostgreSQL transaction, so either both have it or neither.
 */
export class LimitService {
  constructor(private readonly deps: LimitServiceDeps) {}

  async view(): Promise<LimitsView> {
    const [seen, capacity, errors, stored, waitingEntries] = await Promise.all([
      this.deps.seenIntegrations(),
      this.deps.capacity(),
      this.deps.refusedCounts(),
      this.deps.store.list(),
      this.deps.waitingAtLimit(),
    ]);
    const waiting = new Map<string, number>();
    for (const entry of waitingEntries) {
      const key = `${entry.cluster}/${entry.integration}`;
      waiting.set(key, (waiting.get(key) ?? 0) + entry.waiting);
    }
    const autoLimits = new Map(stored.flatMap((row) => (decodeAutoLimit(row.spec) ? [[`${row.cluster}/${row.integration}`, decodeAutoLimit(row.spec)!]] : [])));
    const refused = new Map(errors.filter((e) => e.code === integrationAtLimitCode).map((e) => [`${e.cluster}/${e.integration}`, e.count]));
    const clusters: ClusterLimitsView[] = [];
    for (const role of ['baseline', 'candidate'] as const) {
      const cluster = this.deps.clusters[role];
      const capacitySlots = capacity[cluster] ?? 0;
      const states = await this.deps.ledger.integrationLimits(cluster);
      const byName = new Map(states.map((s) => [s.integration, s]));
      const names = [...new Set([...states.map((s) => s.integration), ...this.deps.integrations, ...seen])].sort().slice(0, maxIntegrationsPerCluster);
      const integrations = names.map((integration): IntegrationLimitView => {
        const state = byName.get(integration);
        const limit = autoLimits.get(`${cluster}/${integration}`) ?? state?.limit ?? null;
        const max = state ? state.maxInFlight : limitInFlight(null, defaultIntegrationLimit, capacitySlots);
        const waitingHere = waiting.get(`${cluster}/${integration}`) ?? 0;
        this.deps.metrics.integrationLimit.set({ cluster, integration }, Number.isFinite(max) ? max : -1);
        this.deps.metrics.integrationWaitingAtLimit.set({ cluster, integration }, waitingHere);
        const rate = state ? state.maxStartsPerSecond : startsPerSecondOf(defaultIntegrationLimit);
        this.deps.metrics.integrationMaxStartsPerSecond.set({ cluster, integration }, rate ?? -1);
        return {
          integration,
          source: limit ? 'own' : 'default',
          limit: limit ?? defaultIntegrationLimit,
          maxInFlight: Number.isFinite(max) ? max : null,
          maxStartsPerSecond: rate,
          inflight: state?.inflight ?? 0,
          waiting: waitingHere,
          refused: refused.get(`${cluster}/${integration}`) ?? 0,
        };
      });
      clusters.push({ cluster, role, capacitySlots, integrations });
    }
    return { default: defaultIntegrationLimit, clusters };
  }

  /**
   * What the limits' time series samples: per cluster, the integrations the ledger holds (a limit
   * or tasks in flight), the configured ones and those waiting, at most maxIntegrationsPerCluster,
   * the busiest first. Reads Redis only (not PostgreSQL), so that it is cheap every few seconds.
   */
  async samples(): Promise<LimitSamples> {
    const waitingEntries = await this.deps.waitingAtLimit();
    const samples: LimitSample[] = [];
    const leftOut: Record<string, number> = {};
    for (const cluster of [this.deps.clusters.baseline, this.deps.clusters.candidate]) {
      const byName = new Map<string, LimitSample>();
      const defaultMax = limitInFlight(null, defaultIntegrationLimit, await this.deps.ledger.totalCapacity(cluster));
      const entry = (integration: string) => {
        let sample = byName.get(integration);
        if (!sample) {
          sample = { cluster, integration, maxInFlight: Number.isFinite(defaultMax) ? defaultMax : null, inflight: 0, waiting: 0 };
          byName.set(integration, sample);
        }
        return sample;
      };
      for (const state of await this.deps.ledger.integrationLimits(cluster)) {
        Object.assign(entry(state.integration), { maxInFlight: Number.isFinite(state.maxInFlight) ? state.maxInFlight : null, inflight: state.inflight });
      }
      for (const waiting of waitingEntries.filter((e) => e.cluster === cluster)) entry(waiting.integration).waiting += waiting.waiting;
      for (const integration of this.deps.integrations) entry(integration);
      const busiestFirst = [...byName.values()].sort(
        (a, b) => Number(b.inflight + b.waiting > 0) - Number(a.inflight + a.waiting > 0) || a.integration.localeCompare(b.integration),
      );
      samples.push(...busiestFirst.slice(0, maxIntegrationsPerCluster));
      leftOut[cluster] = Math.max(0, busiestFirst.length - maxIntegrationsPerCluster);
    }
    return { samples, leftOut };
  }

  /** Sets (or with null removes) one integration's own limit; validates first, changes nothing on error. */
  async set(cluster: string, integration: string, limit: unknown, actor: string, reason: string | undefined): Promise<LimitsView> {
    this.checkCluster(cluster);
    const spec =
      limit === null ? null : isAutoLimit(limit) ? encodeAutoLimit(limit, (await this.deps.capacity())[cluster] ?? 0) : this.encode(integration, limit);
    if (spec !== null && (await this.deps.store.count(cluster)) >= maxIntegrationsPerCluster) {
      const own = await this.deps.ledger.integrationLimits(cluster);
      if (!own.some((s) => s.integration === integration && s.limit))
        throw new InvalidRequestError([
          { field: 'path.integration', message: `cluster ${cluster} has ${maxIntegrationsPerCluster} limits of their own already; remove one first` },
        ]);
    }
    const decoded = spec === null ? null : ledgerLimitOf(spec);
    let written = false;
    let before: string | null = null;
    const action = spec === null ? 'limit.remove' : 'limit.set';
    try {
      before = await this.deps.store.change(cluster, integration, spec, async (stored) => {
        before = stored;
        await this.deps.ledger.setIntegrationLimit(cluster, integration, decoded);
        written = true;
      });
    } catch (error) {
      // The ledger has it but PostgreSQL did not commit: put the ledger back.
      if (written) await this.deps.ledger.setIntegrationLimit(cluster, integration, before === null ? null : ledgerLimitOf(before)).catch(() => undefined);
      this.deps.metrics.limitChanges.inc({ action, outcome: 'failed' });
      if (error instanceof InvalidIntegrationLimitError) throw new InvalidRequestError([{ field: fieldOf(error.field), message: stripField(error) }]);
      throw error;
    }
    this.deps.metrics.limitChanges.inc({ action, outcome: 'ok' });
    if (before !== null && decodeAutoLimit(before) && (spec === null || !decodeAutoLimit(spec))) {
      await this.deps.leftAuto(cluster, integration);
      // A tick that read it as auto before the change may have written its count since.
      await this.deps.ledger.setIntegrationLimit(cluster, integration, decoded);
    }
    await this.deps.audit.record({
      actor,
      action,
      target: `${cluster}/${integration}`,
      request: { limit },
      before: before === null ? null : settingOf(before),
      after: spec === null ? null : settingOf(spec),
      outcome: 'ok',
      ...(reason === undefined ? {} : { reason }),
    });
    return this.view();
  }

  /**
   * Writes every stored limit the ledger lacks or holds otherwise (Redis lost its data, or was
   * replaced). Limits in the ledger that PostgreSQL does not hold are left alone. Returns how
   * many were re-applied.
   */
  async reapply(why: 'start' | 'check'): Promise<number> {
    const stored = await this.deps.store.list();
    let reapplied = 0;
    for (const cluster of [this.deps.clusters.baseline, this.deps.clusters.candidate]) {
      const inLedger = new Map((await this.deps.ledger.integrationLimits(cluster)).map((s) => [s.integration, s.limit]));
      for (const row of stored.filter((r) => r.cluster === cluster && r.spec !== '')) {
        const held = inLedger.get(row.integration);
        if (held && holds(row.integration, held, row.spec)) continue;
        const limit = ledgerLimitOf(row.spec);
        if (!limit) continue;
        try {
          await this.deps.ledger.setIntegrationLimit(cluster, row.integration, limit);
        } catch (error) {
          // Above a capacity that shrank (workers gone): retried on the next check.
          this.deps.metrics.limitReapplies.inc({ outcome: 'failed' });
          this.deps.logger.warn({ err: error, cluster, integration: row.integration }, 'could not re-apply a stored integration limit to the ledger');
          continue;
        }
        reapplied++;
        this.deps.metrics.limitReapplies.inc({ outcome: 'ok' });
        this.deps.logger.warn({ cluster, integration: row.integration, spec: row.spec, why }, 're-applied a stored integration limit the ledger had lost');
        await this.deps.audit.record({
          actor: 'control-plane',
          action: 'limit.reapply',
          target: `${cluster}/${row.integration}`,
          before: held ?? null,
          after: limit,
          outcome: 'ok',
        });
      }
    }
    return reapplied;
  }

  /** The integrations in auto mode, for the auto limiter. */
  async autoEntries(): Promise<AutoLimitEntry[]> {
    return (await this.deps.store.list()).flatMap((row) => {
      const auto = decodeAutoLimit(row.spec);
      return auto ? [{ cluster: row.cluster, integration: row.integration, setting: auto.auto }] : [];
    });
  }

  private checkCluster(cluster: string): void {
    const { baseline, candidate } = this.deps.clusters;
    if (cluster !== baseline && cluster !== candidate)
      throw new HeadroomError(
        apiErrorCodes.notFound,
        `no cluster ${JSON.stringify(cluster.slice(0, 80))}; accepted: ${baseline}, ${candidate}; nothing was changed`,
      );
  }

  private encode(integration: string, limit: unknown): string {
    try {
      return encodeIntegrationLimit(integration, limit).spec;
    } catch (error) {
      if (error instanceof InvalidIntegrationLimitError) throw new InvalidRequestError([{ field: fieldOf(error.field), message: stripField(error) }]);
      throw error;
    }
  }
}

/** What the ledger is given for a stored spec: an auto limit starts at its maximum. */
function ledgerLimitOf(spec: string): IntegrationLimit | null {
  const auto = decodeAutoLimit(spec);
  return auto ? { maxInFlight: auto.auto.maxInFlight } : decodeIntegrationLimit(spec);
}

/** The setting as operators see it (the audit's before and after). */
function settingOf(spec: string): IntegrationLimit | AutoLimit | null {
  return decodeAutoLimit(spec) ?? decodeIntegrationLimit(spec);
}

/** Whether the ledger's limit is what the stored spec asks: for auto, any count between its bounds. */
function holds(integration: string, held: IntegrationLimit, spec: string): boolean {
  const auto = decodeAutoLimit(spec);
  if (!auto) return encodeIntegrationLimit(integration, held).spec === spec;
  return 'maxInFlight' in held && held.maxInFlight >= auto.auto.minInFlight && held.maxInFlight <= auto.auto.maxInFlight;
}

/** The ledger names 'integration' and 'limit.x'; the API names where they came from. */
function fieldOf(field: string): string {
  return field === 'integration' ? 'path.integration' : `body.${field}`;
}

function stripField(error: InvalidIntegrationLimitError): string {
  return `${error.message.slice(error.field.length + 2)}; nothing was changed`;
}
