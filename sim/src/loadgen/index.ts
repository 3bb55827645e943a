export { startLoadGenerator, type LoadGenerator, type LoadGeneratorDependencies, type LoadReport } from './load-generator';
export { loadGeneratorOptionsSchema, defaultIntegrations, type LoadGeneratorOptions, type LoadGeneratorConfig } from './options';
export { Workload, integrationProfiles, logNormal, type IntegrationProfile, type WorkloadOptions } from './workload';
export { LatencyHistogram, type LatencySummary } from './histogram';
export type { LoadFigures, ClusterFigures, TaskPriority } from './figures';
export { formatLoadReport, formatLoadRates, formatClusterLoad, formatLatency, formatCounts } from './format';
