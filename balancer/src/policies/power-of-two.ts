import type { Reservation } from '@headroom/fleet';
import { sample } from './random';
import { LocalInflight } from './unshared';
import { eligibleWorkers, reserveFirstFree, type PolicyContext, type SlotPolicy, type SlotRequest } from './slot-policy';

/**
 * Power of two choices with this balancer's own in-flight counts: what Envoy's
 * least_request and HAProxy's leastconn do. Other balancers' tasks are invisible to it.
 */
export class PowerOfTwoPolicy implements SlotPolicy {
  readonly name = 'power-of-two';
  readonly sharedCount = true;
  private readonly localInflight = new LocalInflight();

  constructor(private readonly context: PolicyContext) {}

  async reserve(cluster: string, request: SlotRequest): Promise<Reservation> {
    const pair = sample(eligibleWorkers(this.context, cluster, request.skipWorkerIds), 2);
    pair.sort((a, b) => this.localInflight.count(cluster, a) - this.localInflight.count(cluster, b));
    const reservation = await reserveFirstFree(this.context, cluster, pair, request);
    if (reservation.ok) this.localInflight.add(cluster, reservation.workerId);
    return reservation;
  }

  finished(cluster: string, workerId: string): void {
    this.localInflight.remove(cluster, workerId);
  }
}
