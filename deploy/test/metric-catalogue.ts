/**
 * The metrics Headroom's processes expose, by name and type: what rules and dashboards may
 * use. The scrape test (prometheus-scrape.test.ts) checks the names against what the
 * processes really expose; this list lets the static test catch a typo without running them.
 */
export type MetricType = 'counter' | 'gauge' | 'histogram';

export const metricCatalogue: Readonly<Record<string, MetricType>> = {
  // Every process: prom-client's default metrics (the ones the deploy files may use) and ours.
  nodejs_heap_size_used_bytes: 'gauge',
  nodejs_heap_size_total_bytes: 'gauge',
  nodejs_gc_duration_seconds: 'histogram',
  nodejs_eventloop_lag_p50_seconds: 'gauge',
  nodejs_eventloop_lag_p90_seconds: 'gauge',
  nodejs_eventloop_lag_p99_seconds: 'gauge',
  process_resident_memory_bytes: 'gauge',
  process_cpu_seconds_total: 'counter',
  nodejs_active_handles_total: 'gauge',
  headroom_eventloop_utilization_ratio: 'gauge',
  headroom_heap_limit_bytes: 'gauge',
  headroom_heap_after_major_gc_bytes: 'gauge',
  headroom_heap_code_after_major_gc_bytes: 'gauge',
  headroom_heap_objects_after_major_gc_bytes: 'gauge',
  // Worker.
  headroom_worker_task_duration_seconds: 'histogram',
  headroom_worker_tasks_in_flight: 'gauge',
  headroom_worker_max_parallelism: 'gauge',
  headroom_worker_tasks_in_flight_high_water: 'gauge',
  headroom_worker_refusals_total: 'counter',
  headroom_worker_handler_errors_total: 'counter',
  headroom_worker_upstream_connections: 'gauge',
  headroom_worker_ledger_lease_repairs_total: 'counter',
  // Balancer.
  headroom_balancer_tasks_total: 'counter',
  headroom_balancer_queue_depth: 'gauge',
  headroom_balancer_queue_wait_seconds: 'histogram',
  headroom_balancer_dispatch_overhead_seconds: 'histogram',
  headroom_balancer_dispatch_retries_total: 'counter',
  headroom_balancer_shed_total: 'counter',
  headroom_balancer_queue_full_total: 'counter',
  headroom_balancer_queue_handoffs_total: 'counter',
  headroom_balancer_rerouted_tasks_total: 'counter',
  headroom_balancer_override_version: 'gauge',
  headroom_balancer_override_active: 'gauge',
  // Flag clients (balancers and workers started with --unleash-url).
  headroom_flags_unleash_reachable: 'gauge',
  headroom_flags_synchronized: 'gauge',
  headroom_flags_seconds_since_fetch: 'gauge',
  headroom_flags_fetch_failures_total: 'counter',
  // Control plane.
  headroom_control_flag_changes_total: 'counter',
  headroom_control_rollbacks_total: 'counter',
  headroom_control_rollback_propagation_seconds: 'histogram',
  headroom_control_event_streams: 'gauge',
  headroom_control_audit_outbox_entries: 'gauge',
  headroom_control_audit_outbox_dropped_total: 'counter',
  headroom_control_ledger_drift_slots: 'gauge',
  headroom_control_integration_in_trouble: 'gauge',
  headroom_control_integration_p99_vs_own_baseline_ratio: 'gauge',
  headroom_control_integration_error_ratio: 'gauge',
};

/** The series names a metric gives Prometheus: a histogram's _bucket, _sum and _count. */
export function seriesNames(name: string, type: MetricType): string[] {
  return type === 'histogram' ? [`${name}_bucket`, `${name}_sum`, `${name}_count`] : [name];
}

export const knownSeriesNames: ReadonlySet<string> = new Set(Object.entries(metricCatalogue).flatMap(([name, type]) => seriesNames(name, type)));
