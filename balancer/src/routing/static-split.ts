import type { ValidTask } from '../task-validation';
import type { ClusterNames, ClusterRouter } from './cluster-router';

export interface StaticSplit {
  /** Percent (0..100) of tasks sent to the candidate cluster when the integration has no entry. */
  candidatePercent: number;
  /** Percent per integration. */
  candidatePercentByIntegration: Readonly<Record<string, number>>;
}

/**
 * A fixed split from config, sticky on the task key: a key's bucket (0..99) never changes,
 * so raising the percentage only moves keys from baseline to candidate, never back.
 */
export class StaticSplitRouter implements ClusterRouter {
  constructor(
    private readonly clusters: ClusterNames,
    private readonly split: StaticSplit,
  ) {}

  chooseCluster(task: ValidTask): string {
    const percent = this.split.candidatePercentByIntegration[task.integration] ?? this.split.candidatePercent;
    if (percent <= 0) return this.clusters.baseline;
    if (percent >= 100) return this.clusters.candidate;
    return bucketOf(task.key) < percent ? this.clusters.candidate : this.clusters.baseline;
  }
}

/** FNV-1a over the key's UTF-16 code units, reduced to 0..99. */
export function bucketOf(key: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    hash ^= key.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return (hash >>> 0) % 100;
}
