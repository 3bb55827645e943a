import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { protectionReasons, type SelfProtection } from './self-protection';

/** Task run times: 1 ms .. 10 min (a full data pull can take minutes). */
const runSecondsBuckets = [0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600];

export interface WorkerMetrics {
  taskDuration: Histogram<'cluster' | 'integration' | 'outcome'>;
  refusals: Counter<'reason'>;
  localQueueWait: Histogram;
  handlerErrors: Counter<'integration' | 'code'>;
  ledgerRepairs: Counter<'repair'>;
}

/** The worker's metrics, registered on `registry` (never the global one). */
export function createWorkerMetrics(registry: Registry, read: () => GateFigures, protection: SelfProtection): WorkerMetrics {
  registerSelfProtectionMetrics(registry, protection);
  registerGateGauges(registry, read);
  return {
    taskDuration: new Histogram({
      name: 'headroom_worker_task_duration_seconds',
      help: 'Handler run time by cluster and integration (the max parallelism in force is headroom_worker_max_parallelism)',
      labelNames: ['cluster', 'integration', 'outcome'],
      buckets: runSecondsBuckets,
      registers: [registry],
    }),
    refusals: new Counter({
      name: 'headroom_worker_refusals_total',
      help: 'Tasks refused before they started: all slots busy ("full"), the local queue full ("queue_full"), draining, given up while they waited in it ("cancelled", "deadline"), or for an integration it has no handler for ("no_handler")',
      labelNames: ['reason'],
      registers: [registry],
    }),
    localQueueWait: new Histogram({
      name: 'headroom_worker_local_queue_wait_seconds',
      help: 'Time tasks waited in the worker for a slot before they started (--overflow queue only)',
      buckets: runSecondsBuckets,
      registers: [registry],
    }),
    handlerErrors: new Counter({
      name: 'headroom_worker_handler_errors_total',
      help: 'Tasks whose handler failed, by integration and HR_ERR_* code',
      labelNames: ['integration', 'code'],
      registers: [registry],
    }),
    ledgerRepairs: new Counter({
      name: 'headroom_worker_ledger_lease_repairs_total',
      help: 'Leases of this worker its heartbeats put right in the ledger: "dropped" (counted, but neither held here nor released: an answer whose release was lost or never sent), "restored" (held here, but lost by the ledger)',
      labelNames: ['repair'],
      registers: [registry],
    }),
  };
}

/** What the gate gauges read at each scrape (ParallelismGate has them). */
export interface GateFigures {
  inflight: number;
  maxParallelism: number;
  highWaterMark: number;
  queued: number;
  queueLimit: number;
}

function registerSelfProtectionMetrics(registry: Registry, protection: SelfProtection): void {
  new Gauge({
    name: 'headroom_worker_self_protection_slot_share',
    help: 'Share of its slots the worker advertises (1: all; 0.5, 0.25, ...: its event loop stalled or its heap neared the limit, see headroom_worker_self_protection_active)',
    registers: [registry],
    collect() {
      this.set(protection.current?.slotShare ?? 1);
    },
  });
  new Gauge({
    name: 'headroom_worker_self_protection_active',
    help: 'Whether the worker advertises fewer slots to protect itself, by the figure that crossed its line (event-loop-delay, heap)',
    labelNames: ['reason'],
    registers: [registry],
    collect() {
      for (const reason of protectionReasons) this.set({ reason }, protection.current?.reason === reason ? 1 : 0);
    },
  });
  new Counter({
    name: 'headroom_worker_self_protection_episodes_total',
    help: 'Times the worker began advertising fewer slots to protect itself, by the figure that crossed its line first',
    labelNames: ['reason'],
    registers: [registry],
    // The worker keeps the count; each scrape reads it (0 included, so the series exist from the start).
    collect() {
      this.reset();
      for (const reason of protectionReasons) this.inc({ reason }, protection.episodesOf(reason));
    },
  });
}

function registerGateGauges(registry: Registry, read: () => GateFigures): void {
  new Gauge({
    name: 'headroom_worker_tasks_in_flight',
    help: 'Tasks running now',
    registers: [registry],
    collect() {
      this.set(read().inflight);
    },
  });
  new Gauge({
    name: 'headroom_worker_max_parallelism',
    help: 'Tasks this worker runs at once at most (its slots)',
    registers: [registry],
    collect() {
      this.set(read().maxParallelism);
    },
  });
  new Gauge({
    name: 'headroom_worker_tasks_in_flight_high_water',
    help: 'Most tasks ever running at once',
    registers: [registry],
    collect() {
      this.set(read().highWaterMark);
    },
  });
  new Gauge({
    name: 'headroom_worker_local_queue_depth',
    help: 'Tasks waiting in the worker for a slot (--overflow queue only)',
    registers: [registry],
    collect() {
      this.set(read().queued);
    },
  });
  new Gauge({
    name: 'headroom_worker_local_queue_limit',
    help: 'Tasks that may wait in the worker for a slot (maxQueuedTasks; 0: none wait, a full worker refuses)',
    registers: [registry],
    collect() {
      this.set(read().queueLimit);
    },
  });
}
