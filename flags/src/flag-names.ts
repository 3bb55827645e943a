/**
 * How Headroom's state is laid out in Unleash. The control plane writes it (Admin API);
 * balancers and workers read it (unleash-client, evaluated locally).
 */
export interface FlagNames {
  /**
   * On for a task = it runs on the candidate cluster. flexibleRollout strategies, sticky on
   * `taskKey`: one per integration (constraint integration IN [name]) and a default
   * (integration NOT_IN [those names]). Environment switched off = everything to the baseline.
   */
  candidateCluster: string;
  /**
   * Max parallelism per cluster: one strategy per cluster (constraint cluster IN [name]) whose
   * only variant carries the JSON payload {"maxParallelism": N}.
   */
  maxParallelism: string;
}

/** @default names of the flags Headroom creates */
export const defaultFlagNames: FlagNames = Object.freeze({
  candidateCluster: 'headroom.candidate-cluster',
  maxParallelism: 'headroom.max-parallelism',
});

/** Context fields the strategies use; the control plane creates them in Unleash. */
export const contextFieldNames = Object.freeze({
  /** The task's key (account, item): the stickiness of the traffic split. */
  taskKey: 'taskKey',
  integration: 'integration',
  cluster: 'cluster',
});

/** The variant payload of the max-parallelism flag. */
export interface ParallelismPayload {
  maxParallelism: number;
}

/** Highest max parallelism Headroom accepts anywhere. */
export const maxParallelismLimit = 10_000;

/** Reads a variant payload; undefined when it is not a valid {"maxParallelism": 1..10000}. */
export function parseParallelismPayload(value: string): ParallelismPayload | undefined {
  try {
    const parsed = JSON.parse(value) as { maxParallelism?: unknown };
    const n = parsed.maxParallelism;
    if (typeof n === 'number' && Number.isInteger(n) && n >= 1 && n <= maxParallelismLimit) return { maxParallelism: n };
  } catch {
    // Not JSON: the caller logs it.
  }
  return undefined;
}
