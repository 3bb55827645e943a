import type { FlagClient } from '@headroom/flags';
import type { ValidTask } from '../task-validation';
import type { ClusterNames, ClusterRouter } from './cluster-router';

/**
 * The cluster from the Unleash candidate-cluster flag, evaluated locally with the task's
 * integration and key (sticky: a key stays put while the percentage only grows). Before the
 * first fetch, and with the flag's environment off, every task goes to the baseline.
 */
export class FlagRouter implements ClusterRouter {
  constructor(
    private readonly clusters: ClusterNames,
    private readonly flags: FlagClient,
  ) {}

  chooseCluster(task: ValidTask): string {
    return this.flags.routesToCandidate(task.integration, task.key) ? this.clusters.candidate : this.clusters.baseline;
  }
}
