import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { Logger } from '@headroom/common';
import type { IntegrationHealthView } from './integration-health';

export interface ControlMetrics {
  flagChanges: Counter<'flag' | 'outcome'>;
  rollbacks: Counter<'scope' | 'outcome'>;
  observeRollback(propagationMs: number | null): void;
  /** A rollback's or resume's Unleash write, made after the answer. */
  observeUnleashWrite(kind: 'rollback' | 'resume', outcome: { ok: boolean; durationMs: number }): void;
  eventStreams: Gauge;
  /** Audit entries waiting in memory for PostgreSQL. */
  outboxDepth: Gauge;
  /** Audit entries dropped because the outbox was full. */
  outboxDropped: Counter;
  requests: Counter<'method' | 'status'>;
  /** Integration limit changes by operators. */
  limitChanges: Counter<'action' | 'outcome'>;
  /** Stored limits written back to a ledger that had lost them. */
  limitReapplies: Counter<'outcome'>;
  /** The limit in tasks per cluster and integration as last read (-1: none); names are validated and capped. */
  integrationLimit: Gauge<'cluster' | 'integration'>;
  integrationMaxStartsPerSecond: Gauge<'cluster' | 'integration'>;
  integrationWaitingAtLimit: Gauge<'cluster' | 'integration'>;
  autoLimitChanges: Counter<'cluster' | 'integration' | 'reason'>;
  autoLimitInFlight: Gauge<'cluster' | 'integration'>;
  /** Integrations past the cap that the limits' time series did not sample, per cluster. */
  limitSeriesLeftOut: Gauge<'cluster'>;
  /** Samples of the limits' time series, by outcome. */
  limitSeriesSamples: Counter<'outcome'>;
}

/** The control plane's metrics, on `registry` (never the global one). */
export function createControlMetrics(registry: Registry): ControlMetrics {
  const propagation = new Histogram({
    name: 'headroom_control_rollback_propagation_seconds',
    help: 'From a rollback request to the last balancer acknowledgement',
    buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
    registers: [registry],
  });
  const unleashWrites = new Histogram({
    name: 'headroom_control_override_unleash_write_seconds',
    help: "A rollback's or resume's Unleash write (made after the answer), by kind and outcome (ok, failed: in effect through Redis only)",
    labelNames: ['kind', 'outcome'],
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [registry],
  });
  return {
    flagChanges: new Counter({
      name: 'headroom_control_flag_changes_total',
      help: 'Changes written to Unleash, by flag and outcome',
      labelNames: ['flag', 'outcome'],
      registers: [registry],
    }),
    rollbacks: new Counter({
      name: 'headroom_control_rollbacks_total',
      help: 'Rollbacks by scope (all, integration) and outcome (ok; not-durable: in effect through Redis but Unleash failed)',
      labelNames: ['scope', 'outcome'],
      registers: [registry],
    }),
    observeRollback(propagationMs) {
      if (propagationMs !== null) propagation.observe(propagationMs / 1000);
    },
    observeUnleashWrite(kind, outcome) {
      unleashWrites.observe({ kind, outcome: outcome.ok ? 'ok' : 'failed' }, outcome.durationMs / 1000);
    },
    eventStreams: new Gauge({ name: 'headroom_control_event_streams', help: 'Open /api/v1/events streams', registers: [registry] }),
    outboxDepth: new Gauge({
      name: 'headroom_control_audit_outbox_entries',
      help: 'Audit entries of rollbacks, resumes, drains and profiles waiting in memory for PostgreSQL',
      registers: [registry],
    }),
    outboxDropped: new Counter({
      name: 'headroom_control_audit_outbox_dropped_total',
      help: 'Audit entries dropped because the outbox was full (auditOutboxMaxEntries) while PostgreSQL was away; each is logged at error level',
      registers: [registry],
    }),
    requests: new Counter({
      name: 'headroom_control_http_requests_total',
      help: 'API requests by method and status',
      labelNames: ['method', 'status'],
      registers: [registry],
    }),
    limitChanges: new Counter({
      name: 'headroom_control_integration_limit_changes_total',
      help: 'Integration limit changes by action (limit.set, limit.remove) and outcome',
      labelNames: ['action', 'outcome'],
      registers: [registry],
    }),
    limitReapplies: new Counter({
      name: 'headroom_control_integration_limit_reapplies_total',
      help: 'Limits stored in PostgreSQL written back to the ledger after Redis lost them, by outcome (failed: retried at the next check)',
      labelNames: ['outcome'],
      registers: [registry],
    }),
    integrationLimit: new Gauge({
      name: 'headroom_control_integration_limit_tasks',
      help: 'Tasks in flight an integration may have per cluster, as last read by the control plane (-1: no limit)',
      labelNames: ['cluster', 'integration'],
      registers: [registry],
    }),
    integrationMaxStartsPerSecond: new Gauge({
      name: 'headroom_control_integration_max_starts_per_second',
      help: 'Tasks an integration may start per second per cluster (its start rate), as last read by the control plane (-1: no rate)',
      labelNames: ['cluster', 'integration'],
      registers: [registry],
    }),
    integrationWaitingAtLimit: new Gauge({
      name: 'headroom_control_integration_waiting_at_limit_tasks',
      help: 'Tasks waiting on the live balancers because their integration is at its limit, per cluster, as last read by the control plane',
      labelNames: ['cluster', 'integration'],
      registers: [registry],
    }),
    autoLimitChanges: new Counter({
      name: 'headroom_control_auto_limit_changes_total',
      help: 'Limits in auto mode moved by the auto limiter, by why (in trouble, recovering, new normal, ...)',
      labelNames: ['cluster', 'integration', 'reason'],
      registers: [registry],
    }),
    autoLimitInFlight: new Gauge({
      name: 'headroom_control_auto_limit_tasks',
      help: 'The count the auto limiter set last per integration in auto mode',
      labelNames: ['cluster', 'integration'],
      registers: [registry],
    }),
    limitSeriesLeftOut: new Gauge({
      name: 'headroom_control_limit_series_left_out_integrations',
      help: 'Integrations past the cap of integrations per cluster that the limits time series did not sample at its last sample (the busiest are sampled first)',
      labelNames: ['cluster'],
      registers: [registry],
    }),
    limitSeriesSamples: new Counter({
      name: 'headroom_control_limit_series_samples_total',
      help: 'Samples of the limits time series written to Redis, by outcome',
      labelNames: ['outcome'],
      registers: [registry],
    }),
  };
}

/**
 * headroom_control_ledger_drift_slots{cluster}: slots the ledger counts in flight minus the tasks
 * the workers held at their last heartbeats, read from Redis at each scrape. Every control plane
 * reports the same figure. When Redis cannot be read the gauge has no series for that scrape.
 */
export function registerLedgerDriftGauge(
  registry: Registry,
  readDrift: () => Promise<{ cluster: string; ledgerDriftSlots: number }[]>,
  logger: Logger,
): Gauge<'cluster'> {
  return new Gauge({
    name: 'headroom_control_ledger_drift_slots',
    help: "Slots the ledger counts in flight minus the tasks the workers held at their last heartbeats, per cluster: a few are tasks on their way; more is the ledger's error, which the workers' next heartbeats correct",
    labelNames: ['cluster'],
    registers: [registry],
    async collect() {
      this.reset();
      try {
        for (const { cluster, ledgerDriftSlots } of await readDrift()) this.set({ cluster }, ledgerDriftSlots);
      } catch (error) {
        logger.debug({ err: error }, 'could not read the ledger drift for the metrics');
      }
    },
  });
}

/**
 * The verdicts of integration-health.ts, read from Redis at each scrape (one read for the three
 * gauges). Only what the control plane computes: the integrations' latency and errors themselves
 * are the workers' and balancers' metrics. Labelled by the integrations the Overview shows, at
 * most its cap (8), so the label set stays bounded however many integrations run.
 */
export function registerIntegrationTroubleGauges(registry: Registry, readHealth: () => Promise<IntegrationHealthView>, logger: Logger): void {
  let last: { atMs: number; health: Promise<IntegrationHealthView | null> } | null = null;
  const health = () => {
    if (!last || Date.now() - last.atMs > 1000) {
      const read = readHealth().catch((error: unknown) => {
        logger.debug({ err: error }, 'could not read the integrations’ health for the metrics');
        return null;
      });
      last = { atMs: Date.now(), health: read };
    }
    return last.health;
  };
  const gauge = (name: string, help: string, value: (item: IntegrationHealthView['integrations'][number]) => number | null) =>
    new Gauge({
      name,
      help,
      labelNames: ['integration'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const item of (await health())?.integrations ?? []) {
          const figure = value(item);
          if (figure !== null) this.set({ integration: item.integration }, figure);
        }
      },
    });
  gauge(
    'headroom_control_integration_in_trouble',
    "1 when an integration's recent p99 or error share crossed its line against its own previous 10 minutes (both clusters together), else 0; no series without enough tasks",
    (item) => (item.verdict.state === 'not-enough-data' ? null : item.verdict.state === 'trouble' ? 1 : 0),
  );
  gauge(
    'headroom_control_integration_p99_vs_own_baseline_ratio',
    "An integration's p99 over the last minute divided by its p99 over the 10 minutes before, both clusters together",
    (item) => item.verdict.p99Ratio,
  );
  gauge(
    'headroom_control_integration_error_ratio',
    "Failed / all tasks of an integration over the last minute, both clusters together, the balancers' failures included",
    (item) => item.verdict.errorShare,
  );
}
