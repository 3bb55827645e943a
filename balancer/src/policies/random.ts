import type { Reservation } from '@headroom/fleet';
import { eligibleWorkers, maxLocalTries, reserveFirstFree, type PolicyContext, type SlotPolicy, type SlotRequest } from './slot-policy';

/** A worker at random, then others at random if it is full. */
export class RandomPolicy implements SlotPolicy {
  readonly name = 'random';
  readonly sharedCount = true;

  constructor(private readonly context: PolicyContext) {}

  reserve(cluster: string, request: SlotRequest): Promise<Reservation> {
    const workers = eligibleWorkers(this.context, cluster, request.skipWorkerIds);
    return reserveFirstFree(this.context, cluster, sample(workers, maxLocalTries), request);
  }

  finished(): void {}
}

/** Up to `count` distinct elements in random order (partial Fisher-Yates). */
export function sample<T>(items: readonly T[], count: number): T[] {
  const copy = [...items];
  const n = Math.min(count, copy.length);
  for (let i = 0; i < n; i++) {
    const j = i + Math.floor(Math.random() * (copy.length - i));
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy.slice(0, n);
}
