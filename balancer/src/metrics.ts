import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { BoundedLabelValues, maxLabelledIntegrations } from '@headroom/common';

/** Buckets for waits and dispatch overhead: 0.5 ms .. 30 s. */
const secondsBuckets = [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30];

/** How one task ended, for headroom_balancer_tasks_total: 'none' for cluster, integration and priority of a task refused before routing. */
export interface TaskOutcome {
  cluster: string;
  integration: string;
  priority: string;
  /** "ok", or the HR_ERR_* code. */
  outcome: string;
}

export interface BalancerMetrics {
  /** Counts a task's final outcome; its integration as `integrationLabel` gives it. */
  countTask(task: TaskOutcome): void;
  /** An integration's name as metrics and the balancer-error counts in Redis carry it: bounded, the rest "other". */
  integrationLabel(integration: string): string;
  queueWait: Histogram<'cluster' | 'priority'>;
  retries: Counter<'reason'>;
  workersEjected: Counter<'cluster' | 'reason'>;
  transportErrors: Counter<'cluster' | 'reason'>;
  ready: Gauge;
  rerouted: Counter;
  overrideVersion: Gauge;
  overrideActive: Gauge;
  dispatchOverhead: Histogram<'cluster'>;
}

/**
 * The balancer's metrics, registered on `registry` (never the global one). Queue depth,
 * shed and full-queue counts are read from the admission's own counters at scrape time.
 */
export function createBalancerMetrics(
  registry: Registry,
  readQueue: () => {
    byCluster: Record<string, { userPresent: number; background: number }>;
    queuedBytes: number;
    shed: number;
    refusedQueueFull: number;
    refusedAtLimit: number;
    refusedAtRate: number;
    integrationMarksDropped: number;
    handoffs: number;
    maxQueued: number;
    maxQueuedBytes: number;
  },
  readLedger: () => { calls: number; releases: number; reservations: number; waiting: number; refused: number; maxWaiting: number },
): BalancerMetrics {
  // The ledger's batches (fleet/src/ledger-batcher.ts): leases per call is what Redis is spared.
  new Counter({
    name: 'headroom_balancer_ledger_calls_total',
    help: 'Calls to the slot ledger that carried releases and reservations (each a batch)',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(readLedger().calls);
    },
  });
  new Counter({
    name: 'headroom_balancer_ledger_leases_total',
    help: 'Releases and reservations sent to the slot ledger, by kind',
    labelNames: ['kind'],
    registers: [registry],
    collect() {
      const ledger = readLedger();
      this.reset();
      this.inc({ kind: 'release' }, ledger.releases);
      this.inc({ kind: 'reservation' }, ledger.reservations);
    },
  });
  new Gauge({
    name: 'headroom_balancer_ledger_leases_waiting',
    help: 'Releases and reservations waiting for the next call to the slot ledger',
    registers: [registry],
    collect() {
      this.set(readLedger().waiting);
    },
  });
  new Gauge({
    name: 'headroom_balancer_ledger_leases_waiting_limit',
    help: 'Most releases, and most reservations, that may wait per cluster for a call to the slot ledger',
    registers: [registry],
    collect() {
      this.set(readLedger().maxWaiting);
    },
  });
  new Counter({
    name: 'headroom_balancer_ledger_leases_refused_total',
    help: 'Releases and reservations refused because the limit of those waiting for the slot ledger was reached (Redis not keeping up)',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(readLedger().refused);
    },
  });
  new Gauge({
    name: 'headroom_balancer_queue_depth',
    help: 'Tasks waiting for a slot on this balancer',
    labelNames: ['cluster', 'priority'],
    registers: [registry],
    collect() {
      for (const [cluster, depth] of Object.entries(readQueue().byCluster)) {
        this.set({ cluster, priority: 'user_present' }, depth.userPresent);
        this.set({ cluster, priority: 'background' }, depth.background);
      }
    },
  });
  new Gauge({
    name: 'headroom_balancer_queue_limit',
    help: 'Most tasks that may wait on this balancer (maxQueuedTasks)',
    registers: [registry],
    collect() {
      this.set(readQueue().maxQueued);
    },
  });
  new Gauge({
    name: 'headroom_balancer_queue_bytes',
    help: 'Payload bytes held by the tasks waiting on this balancer',
    registers: [registry],
    collect() {
      this.set(readQueue().queuedBytes);
    },
  });
  new Gauge({
    name: 'headroom_balancer_queue_limit_bytes',
    help: 'Most payload bytes the waiting tasks may hold (maxQueuedBytes)',
    registers: [registry],
    collect() {
      this.set(readQueue().maxQueuedBytes);
    },
  });
  new Counter({
    name: 'headroom_balancer_shed_total',
    help: 'Background tasks dropped from a full queue to make room for user-present ones',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(readQueue().shed);
    },
  });
  new Counter({
    name: 'headroom_balancer_queue_full_total',
    help: 'Tasks refused because the queue was full',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(readQueue().refusedQueueFull);
    },
  });
  new Counter({
    name: 'headroom_balancer_refused_at_limit_total',
    help: 'Tasks refused because their integration was at its in-flight limit (reason "in-flight") or its start rate ("rate") and its share of the queue was full (by integration: headroom_balancer_tasks_total\'s outcome HR_ERR_INTEGRATION_AT_LIMIT)',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      this.reset();
      const { refusedAtLimit, refusedAtRate } = readQueue();
      this.inc({ reason: 'in-flight' }, refusedAtLimit - refusedAtRate);
      this.inc({ reason: 'rate' }, refusedAtRate);
    },
  });
  new Counter({
    name: 'headroom_balancer_integration_marks_dropped_total',
    help: 'Integrations at their limit or rate not marked so (their waiting tasks then wait in turn) because 10,000 were marked in the cluster already',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(readQueue().integrationMarksDropped);
    },
  });
  new Counter({
    name: 'headroom_balancer_queue_handoffs_total',
    help: 'Releases that found tasks waiting on this balancer and asked for their slots in the same ledger call',
    registers: [registry],
    collect() {
      this.reset();
      this.inc(readQueue().handoffs);
    },
  });
  const tasks = new Counter({
    name: 'headroom_balancer_tasks_total',
    help: `Submitted tasks by cluster, integration (the first ${maxLabelledIntegrations} seen; the rest "other"), priority and final outcome ("ok", or the HR_ERR_* code: errors in the queue too, such as a deadline passed there)`,
    labelNames: ['cluster', 'integration', 'priority', 'outcome'],
    registers: [registry],
  });
  const integrationLabels = new BoundedLabelValues(maxLabelledIntegrations);
  const integrationLabel = (integration: string) => integrationLabels.of(integration);
  return {
    countTask: ({ cluster, integration, priority, outcome }) => tasks.inc({ cluster, integration: integrationLabel(integration), priority, outcome }),
    integrationLabel,
    queueWait: new Histogram({
      name: 'headroom_balancer_queue_wait_seconds',
      help: 'Time tasks waited for a slot',
      labelNames: ['cluster', 'priority'],
      buckets: secondsBuckets,
      registers: [registry],
    }),
    retries: new Counter({
      name: 'headroom_balancer_dispatch_retries_total',
      help: "Tasks tried on another worker: refused, unreachable, own_fault (this balancer's TLS or credentials failed), or lost (idempotent only)",
      labelNames: ['reason'],
      registers: [registry],
    }),
    workersEjected: new Counter({
      name: 'headroom_balancer_workers_ejected_total',
      help: 'Workers this balancer marked ejected in the ledger (every balancer skips them), by reason: unreachable (consecutive connection failures, or a failed health check) or failing (far more failures than the other workers on an integration)',
      labelNames: ['cluster', 'reason'],
      registers: [registry],
    }),
    transportErrors: new Counter({
      name: 'headroom_balancer_transport_errors_total',
      help: "Calls to workers that failed on this balancer's own side, by reason: tls (its certificate, CA or the name it expects) or auth (the worker's side turned its credentials away). They eject no worker",
      labelNames: ['cluster', 'reason'],
      registers: [registry],
    }),
    ready: new Gauge({
      name: 'headroom_balancer_ready',
      help: "1 while it takes tasks (a balancer's gRPC health says SERVING); 0 while its calls to workers all fail on its own TLS or credentials, and once it stops",
      registers: [registry],
    }),
    rerouted: new Counter({
      name: 'headroom_balancer_rerouted_tasks_total',
      help: 'Tasks moved from the candidate to the baseline cluster by a rollback before they were dispatched',
      registers: [registry],
    }),
    overrideVersion: new Gauge({
      name: 'headroom_balancer_override_version',
      help: 'Version of the rollback override this balancer applied (0: none)',
      registers: [registry],
    }),
    overrideActive: new Gauge({
      name: 'headroom_balancer_override_active',
      help: '1 while the rollback override this balancer applied sends some integration (or all) to the baseline',
      registers: [registry],
    }),
    dispatchOverhead: new Histogram({
      name: 'headroom_balancer_dispatch_overhead_seconds',
      help: "Time a successful task spent in the balancer itself: the whole Submit minus the wait for a slot and the handler's run (validation, routing, reservation, the gRPC hops)",
      labelNames: ['cluster'],
      buckets: secondsBuckets,
      registers: [registry],
    }),
  };
}
