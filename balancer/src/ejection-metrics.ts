import { Counter, Gauge, type Registry } from 'prom-client';
import { maxFailureSeries, type FailureRate } from './failure-rate';

export interface EjectionMetrics {
  workersReturned: Counter<'cluster' | 'reason' | 'return'>;
}

/**
 * Metrics of ejection beyond headroom_balancer_workers_ejected_total (metrics.ts): how ejected
 * workers came back, and the size of the failure window, read from it at scrape time.
 */
export function createEjectionMetrics(registry: Registry, failureRate: Pick<FailureRate, 'series' | 'untracked'>): EjectionMetrics {
  new Gauge({
    name: 'headroom_balancer_failure_window_series',
    help: `Series (integrations of a cluster, and workers within them) the failure-rate window follows now; at most ${maxFailureSeries}`,
    registers: [registry],
    collect() {
      this.set(failureRate.series);
    },
  });
  new Counter({
    name: 'headroom_balancer_failure_window_untracked_total',
    help: 'Task outcomes the failure-rate window did not count because it followed as many series as it may',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(failureRate.untracked);
    },
  });
  return {
    workersReturned: new Counter({
      name: 'headroom_balancer_workers_returned_total',
      help: 'Ejected workers this balancer let back, by reason of the ejection and how: probe (a health check passed) or backoff (the back-off ended)',
      labelNames: ['cluster', 'reason', 'return'],
      registers: [registry],
    }),
  };
}
