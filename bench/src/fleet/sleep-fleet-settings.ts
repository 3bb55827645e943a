import type { TaskTemplate } from '../load/protocol';
import type { SleepProfile } from './sleep-handlers';

/** The settings of a benchmark that offers a mix of integrations to fleets of sleep-handler workers. */
export interface SleepFleetSettings {
  /** Workers in each cluster. */
  workersPerCluster: number;
  maxParallelismPerWorker: number;
  /** The workers that queue locally (`--overflow queue`): tasks that may wait in one at once. */
  maxLocalQueuedTasksPerWorker: number;
  /** How long tasks take, drawn in the worker (fleet/sleep-handlers.ts). */
  sleep: SleepProfile;
  /** Integrations in a fixed cycle (its length coprime with the priority cycle's and the front count, so that no front or priority gets one integration only). */
  integrationMix: NonNullable<TaskTemplate['integrationMix']>;
  priorityMix: NonNullable<TaskTemplate['priorityMix']>;
  /** The capacity is measured first (measureCarriedTasksPerSecond), through Headroom's balancers, with this many times the cluster's slots in flight. */
  capacityProbe: { slotsMultiple: number; warmupMs: number; durationMs: number };
  repetitions: number;
  /** Load before the measured part: the queues of what ran before are gone and the fleet settles. */
  leadInMs: number;
  maxOutstanding: number;
}
