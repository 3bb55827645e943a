export * from './app';
export * from './config';
export * from './errors';
export type { TrafficView, RollbackRecord, OverrideChangeRecord, DurableState, BalancerView } from './control-service';
export type { ClusterSummary, WorkerSummary } from './fleet-view';
export type { ProfileRecord, ProfileStatus } from './profiles/profile-store';
export type { ProfileSummary, FunctionSelfTime } from './profiles/cpuprofile';
