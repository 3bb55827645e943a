export { createBalancer, type Balancer, type BalancerDependencies, type BalancerStats } from './balancer';
export { balancerOptionsSchema, type BalancerOptions, type BalancerConfig } from './config';
export { balancerErrorCodes, grpcStatusOf } from './errors';
export { policyNames, type PolicyName, type SlotPolicy } from './policies';
export type { ClusterRouter, ClusterNames } from './routing/cluster-router';
export { StaticSplitRouter, bucketOf } from './routing/static-split';
export { validateSubmit, type ValidTask, type TaskLimits } from './task-validation';
