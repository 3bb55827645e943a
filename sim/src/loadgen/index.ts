export { startLoadGenerator, type LoadGenerator, type LoadGeneratorDependencies, type LoadReport, type PhaseFigures } from './load-generator';
export {
  loadGeneratorOptionsSchema,
  loadGeneratorOptionFields,
  defaultIntegrations,
  spikeProblems,
  type LoadGeneratorOptions,
  type LoadGeneratorConfig,
  type WeightedIntegration,
} from './options';
export { Workload, integrationProfiles, logNormal, skewedRank, type IntegrationProfile, type WorkloadOptions } from './workload';
export { SendSchedule, loadPhases, type LoadPhase, type ScheduleOptions } from './schedule';
export { LatencyHistogram, type LatencySummary } from './histogram';
export type { LoadFigures, ClusterFigures, PriorityFigures, TaskPriority } from './figures';
export { formatLoadReport, formatLoadRates, formatClusterLoad, formatPriorityLoad, formatLatency, formatCounts } from './format';
export {
  submitTask,
  classifySubmitAnswer,
  errorCodeOf,
  placementFigures,
  connectBalancer,
  callDeadlineMarginMs,
  type SubmitAnswer,
  type SubmitTaskOptions,
  type PlacementFigures,
} from './submit';
export { OpenLoop, maxOutstandingCallsLimit, type OpenLoopOptions, type OpenLoopSchedule, type DueCall, type DroppedCalls } from './open-loop';
export { ClosedLoop, maxLanes, type ClosedLoopOptions } from './closed-loop';
