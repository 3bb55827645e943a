import type { Reservation } from '@headroom/fleet';
import type { KnownWorker } from '../worker-directory';
import { sample } from './random';
import { eligibleWorkers, type PolicyContext, type SlotPolicy, type SlotRequest } from './slot-policy';

/**
 * The policies teams run without Headroom, for comparison (the routing benchmark): no shared
 * count of free slots, no slot in the ledger, no waiting in the balancer. The task goes at once to
 * a worker chosen from this balancer's own view, and a worker that is busy queues it
 * (`headroom-worker --overflow queue`, as a single-task worker of the old kind does); a worker
 * that refuses it (queue full, draining) makes the balancer try another. No Redis call per task.
 */
abstract class UnsharedPolicy implements SlotPolicy {
  abstract readonly name: 'plain-round-robin' | 'least-request' | 'least-request-p2c';
  readonly sharedCount = false;
  private leaseSeq = 0;

  constructor(protected readonly context: PolicyContext) {}

  async reserve(cluster: string, request: SlotRequest): Promise<Reservation> {
    const candidates = eligibleWorkers(this.context, cluster, request.skipWorkerIds);
    if (candidates.length === 0) return { ok: false, reason: 'no-workers' };
    const chosen = this.choose(cluster, candidates);
    const worker = this.context.directory.workers(cluster).find((w) => w.workerId === chosen)!;
    this.started(cluster, worker);
    // An id of this balancer's own: the worker counts it as no ledger lease, and nothing releases it.
    return {
      ok: true,
      leaseId: `${this.context.balancerId}|local|${++this.leaseSeq}`,
      workerId: worker.workerId,
      address: worker.address,
      freeSlotsBefore: Number.NaN,
    };
  }

  finished(_cluster: string, _workerId: string): void {}

  protected abstract choose(cluster: string, workerIds: readonly string[]): string;

  protected started(_cluster: string, _worker: KnownWorker): void {}
}

/** Each balancer sends to its workers in turn, whatever they run: a Kubernetes Service, a gRPC round_robin client. */
export class PlainRoundRobinPolicy extends UnsharedPolicy {
  readonly name = 'plain-round-robin';
  private readonly cursorByCluster = new Map<string, number>();

  protected choose(cluster: string, workerIds: readonly string[]): string {
    const cursor = this.cursorByCluster.get(cluster) ?? 0;
    this.cursorByCluster.set(cluster, cursor + 1);
    return workerIds[cursor % workerIds.length]!;
  }
}

/**
 * Least outstanding requests by this balancer's own count, as HAProxy's leastconn does (ties
 * in turn); with `twoChoices`, the less busy of two workers drawn at random, as Envoy's
 * LEAST_REQUEST does. Other balancers' tasks are invisible to it.
 */
export class LeastRequestPolicy extends UnsharedPolicy {
  readonly name: 'least-request' | 'least-request-p2c';
  readonly localInflight = new LocalInflight();
  private tieBreak = 0;

  constructor(
    context: PolicyContext,
    private readonly twoChoices: boolean,
  ) {
    super(context);
    this.name = twoChoices ? 'least-request-p2c' : 'least-request';
  }

  protected choose(cluster: string, workerIds: readonly string[]): string {
    const pool = this.twoChoices ? sample(workerIds, 2) : workerIds;
    const offset = this.tieBreak++;
    let best = pool[offset % pool.length]!;
    for (let i = 1; i < pool.length; i++) {
      const workerId = pool[(offset + i) % pool.length]!;
      if (this.localInflight.count(cluster, workerId) < this.localInflight.count(cluster, best)) best = workerId;
    }
    return best;
  }

  protected override started(cluster: string, worker: KnownWorker): void {
    this.localInflight.add(cluster, worker.workerId);
  }

  override finished(cluster: string, workerId: string): void {
    this.localInflight.remove(cluster, workerId);
  }
}

/** Tasks this balancer has placed on each worker and not yet seen end. Bounded by the workers in the directory: entries at 0 are deleted. */
export class LocalInflight {
  private readonly counts = new Map<string, number>();

  count(cluster: string, workerId: string): number {
    return this.counts.get(key(cluster, workerId)) ?? 0;
  }

  add(cluster: string, workerId: string): void {
    this.counts.set(key(cluster, workerId), this.count(cluster, workerId) + 1);
  }

  remove(cluster: string, workerId: string): void {
    const n = this.count(cluster, workerId) - 1;
    if (n <= 0) this.counts.delete(key(cluster, workerId));
    else this.counts.set(key(cluster, workerId), n);
  }
}

function key(cluster: string, workerId: string): string {
  return `${cluster}\u0000${workerId}`;
}
