import type { Reservation } from '@headroom/fleet';
import type { PolicyContext, SlotPolicy, SlotRequest } from './slot-policy';

/** The default: the ledger picks, atomically, the worker with the most free slots in the cluster. */
export class LeastLoadedPolicy implements SlotPolicy {
  readonly name = 'least-loaded';
  readonly sharedCount = true;

  constructor(private readonly context: PolicyContext) {}

  reserve(cluster: string, request: SlotRequest): Promise<Reservation> {
    return this.context.ledger.reserve(cluster, { ...request, balancerId: this.context.balancerId });
  }

  finished(): void {}
}
