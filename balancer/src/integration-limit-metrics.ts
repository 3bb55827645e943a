import { Gauge, type Registry } from 'prom-client';
import type { IntegrationLimitState } from '@headroom/fleet';

/** What the metrics read of the ledger at scrape time: its integrations with a limit of their own or tasks in flight. */
export interface IntegrationLimitSource {
  integrationLimits(cluster: string): Promise<IntegrationLimitState[]>;
}

/**
 * The ledger's per-integration counts and limits, read from Redis at each scrape (two small
 * hashes per cluster). They are the fleet's numbers, not this process's: every balancer reports
 * the same values (take max() across balancers). Integrations are labelled as the balancer's
 * other metrics label them (the first maxLabelledIntegrations seen, the rest "other", whose
 * tasks in flight are summed and whose limit is not shown), so the series stay bounded.
 */
export function createIntegrationLimitMetrics(
  registry: Registry,
  ledger: IntegrationLimitSource,
  clusters: readonly string[],
  integrationLabel: (integration: string) => string,
): void {
  const read = async () =>
    (await Promise.all(clusters.map(async (cluster) => ({ cluster, states: await ledger.integrationLimits(cluster) })))).filter(
      ({ states }) => states.length > 0,
    );
  new Gauge({
    name: 'headroom_ledger_integration_inflight',
    help: 'Tasks of each integration in flight in each cluster, as the slot ledger counts them (all balancers and proxyless clients together)',
    labelNames: ['cluster', 'integration'],
    registers: [registry],
    async collect() {
      this.reset();
      for (const { cluster, states } of await read()) {
        for (const state of states) this.inc({ cluster, integration: integrationLabel(state.integration) }, state.inflight);
      }
    },
  });
  // The limit and the start rate: integrations labelled as themselves only ("other" sums counts, not limits).
  const ownGauge = (name: string, help: string, valueOf: (state: IntegrationLimitState) => number | null) =>
    new Gauge({
      name,
      help,
      labelNames: ['cluster', 'integration'],
      registers: [registry],
      async collect() {
        this.reset();
        for (const { cluster, states } of await read()) {
          for (const state of states) {
            const value = valueOf(state);
            if (integrationLabel(state.integration) === state.integration && value !== null) this.set({ cluster, integration: state.integration }, value);
          }
        }
      },
    });
  ownGauge(
    'headroom_ledger_integration_limit',
    'Most tasks of each integration in flight in each cluster (+Inf: no limit), for integrations with a limit of their own or tasks in flight',
    (state) => state.maxInFlight,
  );
  ownGauge(
    'headroom_ledger_integration_max_starts_per_second',
    'Most tasks of each integration started per second in each cluster (its start rate), for integrations with a rate and a limit of their own or tasks in flight',
    (state) => state.maxStartsPerSecond,
  );
}
