import type { Ledger, LedgerPriority, Reservation } from '@headroom/fleet';
import type { WorkerDirectory } from '../worker-directory';

export interface SlotRequest {
  priority: LedgerPriority;
  /** On failure, record this balancer as waiting so it hears when a slot frees. */
  waitIfNone: boolean;
  /** Workers this task must not go to (they refused it or could not be reached). */
  skipWorkerIds: readonly string[];
  /** The task's integration: the ledger keeps it to its in-flight limit in the cluster. */
  integration: string;
}

/**
 * How a balancer picks a worker and takes a slot on it. The policies with a shared count admit
 * through the ledger, so none can over-admit; they differ in what they know when they choose.
 * Those without (unshared.ts) take no slot: they are what teams run without Headroom, kept for
 * comparison.
 */
export interface SlotPolicy {
  readonly name: PolicyName;
  /** Whether its leases are slots in the ledger (given back there); false for the unshared policies. */
  readonly sharedCount: boolean;
  reserve(cluster: string, request: SlotRequest): Promise<Reservation>;
  /** A task this balancer placed on `workerId` ended or never started. */
  finished(cluster: string, workerId: string): void;
}

export const policyNames = ['least-loaded', 'round-robin', 'random', 'power-of-two', 'plain-round-robin', 'least-request', 'least-request-p2c'] as const;
export type PolicyName = (typeof policyNames)[number];

export interface PolicyContext {
  ledger: Ledger;
  balancerId: string;
  directory: WorkerDirectory;
}

/** Most workers a local policy tries in one reservation before it waits. */
export const maxLocalTries = 8;

/**
 * For the policies that choose locally: takes a slot on the first of `candidates` that has
 * one. Stops early when the answer holds for the whole cluster (priority rules).
 */
export async function reserveFirstFree(context: PolicyContext, cluster: string, candidates: readonly string[], request: SlotRequest): Promise<Reservation> {
  if (candidates.length === 0) {
    // The directory has not seen this cluster's workers yet: let the ledger choose.
    return context.ledger.reserve(cluster, { ...request, balancerId: context.balancerId });
  }
  let last: Reservation = { ok: false, reason: 'full' };
  for (const [i, workerId] of candidates.entries()) {
    const isLast = i === candidates.length - 1;
    last = await context.ledger.reserve(cluster, {
      priority: request.priority,
      balancerId: context.balancerId,
      waitIfNone: request.waitIfNone && isLast,
      targetWorkerId: workerId,
      integration: request.integration,
    });
    if (last.ok) return last;
    if (last.reason !== 'target-full') {
      if (request.waitIfNone && !isLast) return context.ledger.reserve(cluster, { ...request, balancerId: context.balancerId, targetWorkerId: workerId });
      return last;
    }
  }
  return last.ok ? last : { ok: false, reason: 'full' };
}

export function eligibleWorkers(context: PolicyContext, cluster: string, skip: readonly string[]): string[] {
  const all = context.directory.workers(cluster).map((w) => w.workerId);
  return skip.length === 0 ? all : all.filter((id) => !skip.includes(id));
}
