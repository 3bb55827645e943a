import { HeadroomError, type Logger } from '@headroom/common';
import type { ExecuteRequest, SubmitResponse } from '@headroom/proto';
import type { Admission } from './admission';
import { balancerErrorCodes } from './errors';
import type { Lease } from './lease';
import type { BalancerMetrics } from './metrics';
import type { ClusterNames, ClusterRouter } from './routing/cluster-router';
import { UnstartedDispatches } from './routing/unstarted-dispatches';
import type { ValidTask } from './task-validation';
import type { DispatchOutcome } from './worker-channels';

/** Calls to workers: WorkerChannels in the balancer. */
export interface WorkerCalls {
  /** `onStartedOrEnded` runs once: when the worker says the task started, or when the call ends. */
  execute(address: string, request: ExecuteRequest, deadlineUnixMs: number, signal: AbortSignal, onStartedOrEnded?: () => void): Promise<DispatchOutcome>;
}

/** How each call to a worker ended, for the task's integration: WorkerEjection in the balancer (reachability and failure rate). */
export interface DispatchReports {
  dispatchEnded(cluster: string, workerId: string, address: string, integration: string, outcome: DispatchOutcome): void;
}

/** The rollback override as this balancer applied it. */
export interface RollbackOverride {
  /** Whether it sends this integration to the baseline cluster. */
  covers(integration: string): boolean;
}

export interface DispatcherOptions {
  clusters: ClusterNames;
  /** Workers one task is offered to before it fails (refusals, unreachable workers, idempotent tasks lost). */
  maxDispatchAttempts: number;
  /** Longest a rollback's acknowledgement waits for dispatches to the candidate to start. */
  rollbackSettleTimeoutMs: number;
}

export interface DispatcherDependencies {
  admission: Admission;
  /** Workers the balancer knows in a cluster: once a task was refused by as many for want of a handler, none can run it. */
  workerCount(cluster: string): number;
  workers: WorkerCalls;
  reports: DispatchReports;
  /** The cluster choice when no rollback covers the task (flags or the static split). */
  router: ClusterRouter;
  override: RollbackOverride;
  metrics: Pick<BalancerMetrics, 'queueWait' | 'retries' | 'rerouted'>;
  logger: Logger;
}

/**
 * How one task ended, and in which cluster: a rollback may have moved it to the baseline on the
 * way. A failure says whether a worker started the task: if so, the worker counts the failure in
 * its own figures; if not (it failed in the queue, or no worker took it), only the balancer can.
 */
export type DispatchResult = { ok: true; cluster: string; answer: SubmitResponse } | { ok: false; cluster: string; error: unknown; workerStarted: boolean };

/**
 * Takes one task from its cluster choice to its final answer: a lease through admission, the
 * call to the worker, another worker when one refused or could not be reached (or lost an
 * idempotent task). The rollback override is decided here (`routeOf`), for new tasks, for
 * leases reserved while it arrived, and for tasks waiting in the candidate's queue (`rollBack`).
 */
export class Dispatcher {
  private retryCount = 0;
  private reroutedCount = 0;
  private readonly unstartedOnCandidate = new UnstartedDispatches();

  constructor(
    private readonly options: DispatcherOptions,
    private readonly deps: DispatcherDependencies,
  ) {}

  /** Tasks offered to another worker after one refused, could not be reached, or lost an idempotent task. */
  get retries(): number {
    return this.retryCount;
  }

  /** Tasks moved from the candidate to the baseline cluster by a rollback before they were dispatched. */
  get rerouted(): number {
    return this.reroutedCount;
  }

  /** Never rejects: every failure, expected or not, comes back with the cluster the task was in. */
  async dispatch(task: ValidTask, signal: AbortSignal): Promise<DispatchResult> {
    // 'none' until routed, as for tasks refused before routing.
    let cluster = 'none';
    try {
      cluster = this.routeOf(task, this.deps.router.chooseCluster(task));
      const priority = task.priority === 'USER_PRESENT' ? 'user' : 'background';
      const skipWorkerIds: string[] = [];
      let queueWaitMs = 0;
      let attempt = 1;
      while (attempt <= this.options.maxDispatchAttempts) {
        const acquired = await this.deps.admission.acquire(cluster, {
          priority,
          integration: task.integration,
          deadlineUnixMs: task.deadlineUnixMs,
          skipWorkerIds: [...skipWorkerIds],
          signal,
          payloadBytes: task.payload.length,
        });
        if (!acquired.ok) return { ok: false, cluster: acquired.cluster, error: acquired.error, workerStarted: false };
        const { lease } = acquired;
        if (lease.cluster !== cluster) {
          // A rollback moved the waiting task; the workers it skipped were in the other cluster.
          cluster = lease.cluster;
          skipWorkerIds.length = 0;
        }
        const routed = this.routeOf(task, cluster);
        if (routed !== cluster) {
          // The override arrived while the slot was being reserved: nothing is dispatched to
          // the candidate cluster after this balancer applied (and acknowledged) a rollback.
          await lease.abandon();
          this.countRerouted(1);
          cluster = routed;
          skipWorkerIds.length = 0;
          continue;
        }
        queueWaitMs += acquired.queueWaitMs;
        this.deps.metrics.queueWait.observe(
          { cluster, priority: task.priority === 'USER_PRESENT' ? 'user_present' : 'background' },
          acquired.queueWaitMs / 1000,
        );
        const outcome = await this.call(task, lease, signal);
        const placement = { cluster, workerId: lease.workerId, queueWaitMs, runMs: 0, attempts: attempt, workerQueueWaitMs: 0 };
        switch (outcome.kind) {
          case 'done': {
            const { response } = outcome;
            placement.runMs = response.runMs;
            placement.workerQueueWaitMs = response.queueWaitMs;
            const answer: SubmitResponse = { taskId: task.id, placement };
            if (response.error) answer.error = response.error;
            else answer.result = response.result ?? Buffer.alloc(0);
            return { ok: true, cluster, answer };
          }
          case 'not-started':
            skipWorkerIds.push(lease.workerId);
            // Waiting would not help a task no worker left has a handler for: say so now, as not run.
            if (outcome.code === balancerErrorCodes.noHandler && skipWorkerIds.length >= this.deps.workerCount(cluster)) {
              return {
                ok: false,
                cluster,
                workerStarted: false,
                error: new HeadroomError(
                  balancerErrorCodes.noHandler,
                  `no worker of cluster ${cluster} took integration ${JSON.stringify(task.integration)}: the last said "${outcome.message}"; the task did not run`,
                ),
              };
            }
            this.countRetry(outcome.ownFault ? 'own_fault' : outcome.unreachable ? 'unreachable' : 'refused');
            this.deps.logger.debug({ workerId: lease.workerId, code: outcome.code, message: outcome.message }, 'worker did not take the task');
            attempt++;
            continue;
          case 'lost':
            if (task.idempotent && attempt < this.options.maxDispatchAttempts) {
              skipWorkerIds.push(lease.workerId);
              this.countRetry('lost');
              attempt++;
              continue;
            }
            return {
              ok: false,
              cluster,
              workerStarted: true,
              error: new HeadroomError(
                balancerErrorCodes.workerLost,
                `worker ${lease.workerId} was lost after the task started (${outcome.message}); it may have run in part. Mark idempotent tasks as such to have them retried.`,
                { retryAfterMs: 1000 },
              ),
            };
          case 'cancelled':
            return {
              ok: false,
              cluster,
              workerStarted: outcome.started,
              error: new HeadroomError(balancerErrorCodes.cancelled, 'the client cancelled the task'),
            };
          case 'deadline':
            return {
              ok: false,
              cluster,
              workerStarted: outcome.started,
              error: new HeadroomError(
                balancerErrorCodes.deadlineExceeded,
                `the deadline passed while worker ${lease.workerId} ${outcome.started ? 'ran' : 'was given'} the task`,
              ),
            };
        }
      }
      return {
        ok: false,
        cluster,
        workerStarted: false,
        error: new HeadroomError(
          balancerErrorCodes.noWorkerTookIt,
          `no worker took the task in ${this.options.maxDispatchAttempts} attempts (maxDispatchAttempts)`,
          { retryAfterMs: 500 },
        ),
      };
    } catch (error) {
      // Nothing throws once a worker has the task: the call's outcomes come back as values.
      return { ok: false, cluster, error, workerStarted: false };
    }
  }

  /**
   * Applies a rollback that `covers` these integrations: the covered tasks waiting for a
   * candidate slot move to the baseline queue (running ones finish). Resolves true once the
   * covered tasks already on their way to a candidate worker have started there (what the
   * acknowledgement waits for), false after rollbackSettleTimeoutMs.
   */
  rollBack(covers: (integration: string) => boolean): Promise<boolean> {
    this.countRerouted(this.deps.admission.reroute(this.options.clusters.candidate, this.options.clusters.baseline, covers));
    return this.unstartedOnCandidate.settled(covers, this.options.rollbackSettleTimeoutMs);
  }

  /** The cluster a task routed to `cluster` goes to now: the baseline while the rollback override covers it. */
  private routeOf(task: ValidTask, cluster: string): string {
    return this.deps.override.covers(task.integration) ? this.options.clusters.baseline : cluster;
  }

  /** Calls the worker, then ends the lease: whoever owns it once the call is over gives it back. */
  private async call(task: ValidTask, lease: Lease, signal: AbortSignal): Promise<DispatchOutcome> {
    const { cluster, workerId, address, leaseId } = lease;
    const settled = cluster === this.options.clusters.candidate ? this.unstartedOnCandidate.begin(task.integration) : undefined;
    const outcome = await this.deps.workers.execute(address, { task, leaseId, cluster, workerId }, task.deadlineUnixMs, signal, settled);
    this.deps.reports.dispatchEnded(cluster, workerId, address, task.integration, outcome);
    if (outcome.kind === 'done') {
      // The worker answered and let go of the lease; the slot is ours to give back (batched).
      void lease.abandon();
    } else if (outcome.kind === 'lost' || (outcome.kind !== 'not-started' && outcome.started)) {
      // The task started and no answer came: the worker may still run it and releases the lease
      // itself when it sees the call gone, or its heartbeat drops it once it no longer holds it
      // (it may have answered as the call ended); if it died, the sweep takes its leases.
      lease.leaveToWorker();
    } else {
      // The worker never took the lease over (refused, unreachable, or the call ended first).
      void lease.abandon();
    }
    return outcome;
  }

  private countRetry(reason: 'unreachable' | 'refused' | 'own_fault' | 'lost'): void {
    this.retryCount++;
    this.deps.metrics.retries.inc({ reason });
  }

  private countRerouted(tasks: number): void {
    this.reroutedCount += tasks;
    this.deps.metrics.rerouted.inc(tasks);
  }
}
