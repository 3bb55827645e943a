export { createBalancer, type Balancer, type BalancerDependencies, type BalancerStats } from './balancer';
export { balancerOptionsSchema, type BalancerOptions, type BalancerConfig } from './config';
export {
  createDispatchEngine,
  type DispatchEngine,
  type DispatchEngineConfig,
  type DispatchEngineDependencies,
  type DispatchEngineStats,
  type ManagedWorkerCalls,
  type WorkerCallsSource,
} from './engine';
export type { DispatchResult, WorkerCalls } from './dispatch';
export type { DispatchOutcome, WorkerChannelsOptions } from './worker-channels';
export { balancerErrorCodes, grpcStatusOf } from './errors';
export type { ServerTransport } from './submit-server';
export { policyNames, type PolicyName, type SlotPolicy } from './policies';
export type { ClusterRouter, ClusterNames } from './routing/cluster-router';
export { StaticSplitRouter, bucketOf } from './routing/static-split';
export { validateSubmit, validateTask, type ValidTask, type TaskLimits } from './task-validation';
