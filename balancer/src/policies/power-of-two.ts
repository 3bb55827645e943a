import type { Reservation } from '@headroom/fleet';
import { sample } from './random';
import { eligibleWorkers, reserveFirstFree, type PolicyContext, type SlotPolicy, type SlotRequest } from './slot-policy';

/**
 * Power of two choices with this balancer's own in-flight counts: what Envoy's
 * least_request and HAProxy's leastconn do. Other balancers' tasks are invisible to it.
 */
export class PowerOfTwoPolicy implements SlotPolicy {
  readonly name = 'power-of-two';
  // Bounded by the workers in the directory; entries at 0 are deleted.
  private readonly localInflight = new Map<string, number>();

  constructor(private readonly context: PolicyContext) {}

  async reserve(cluster: string, request: SlotRequest): Promise<Reservation> {
    const pair = sample(eligibleWorkers(this.context, cluster, request.skipWorkerIds), 2);
    pair.sort((a, b) => this.count(cluster, a) - this.count(cluster, b));
    const reservation = await reserveFirstFree(this.context, cluster, pair, request);
    if (reservation.ok) this.localInflight.set(key(cluster, reservation.workerId), this.count(cluster, reservation.workerId) + 1);
    return reservation;
  }

  finished(cluster: string, workerId: string): void {
    const n = this.count(cluster, workerId) - 1;
    if (n <= 0) this.localInflight.delete(key(cluster, workerId));
    else this.localInflight.set(key(cluster, workerId), n);
  }

  private count(cluster: string, workerId: string): number {
    return this.localInflight.get(key(cluster, workerId)) ?? 0;
  }
}

function key(cluster: string, workerId: string): string {
  return `${cluster}\u0000${workerId}`;
}
