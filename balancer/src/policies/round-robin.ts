import type { Reservation } from '@headroom/fleet';
import { eligibleWorkers, maxLocalTries, reserveFirstFree, type PolicyContext, type SlotPolicy, type SlotRequest } from './slot-policy';

/** Each balancer walks its own list of workers in turn (what a plain L4/L7 proxy does). */
export class RoundRobinPolicy implements SlotPolicy {
  readonly name = 'round-robin';
  readonly sharedCount = true;
  private readonly cursorByCluster = new Map<string, number>();

  constructor(private readonly context: PolicyContext) {}

  reserve(cluster: string, request: SlotRequest): Promise<Reservation> {
    const workers = eligibleWorkers(this.context, cluster, request.skipWorkerIds);
    const cursor = this.cursorByCluster.get(cluster) ?? 0;
    this.cursorByCluster.set(cluster, cursor + 1);
    const tries = Math.min(maxLocalTries, workers.length);
    const candidates = Array.from({ length: tries }, (_, i) => workers[(cursor + i) % workers.length]!);
    return reserveFirstFree(this.context, cluster, candidates, request);
  }

  finished(): void {}
}
