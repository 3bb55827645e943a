import type { ValidTask } from '../task-validation';

/** Decides which cluster runs a task: the baseline (old fleet) or the candidate (parallel). */
export interface ClusterRouter {
  chooseCluster(task: ValidTask): string;
}

export interface ClusterNames {
  /** The old fleet: one task per worker. */
  baseline: string;
  /** The new fleet: parallel workers. */
  candidate: string;
}
