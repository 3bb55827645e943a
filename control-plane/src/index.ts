export * from './app';
export * from './config';
export * from './errors';
export type { TrafficView, RollbackRecord, BalancerView } from './control-service';
export type { ClusterSummary, WorkerSummary } from './fleet-view';
