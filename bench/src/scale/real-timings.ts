import { balancerOptionsSchema } from '@headroom/balancer';
import { workerOptionsSchema } from '@headroom/worker';

/**
 * The periods real workers and balancers use by default, read from their option schemas so that
 * the simulated fleet follows them: heartbeatIntervalMs, reportIntervalMs, latencyReportIntervalMs
 * (worker/src/worker.ts); heartbeatTimeoutMs, sweepIntervalMs, directoryRefreshIntervalMs,
 * queueRecheckIntervalMs, balancerHeartbeatIntervalMs (balancer/src/config.ts).
 */
export function realFleetTimings() {
  const worker = workerOptionsSchema.parse({ cluster: 'baseline' });
  const balancer = balancerOptionsSchema.parse({});
  return {
    heartbeatIntervalMs: worker.heartbeatIntervalMs,
    heartbeatTimeoutMs: balancer.heartbeatTimeoutMs,
    sweepIntervalMs: balancer.sweepIntervalMs,
    directoryRefreshIntervalMs: balancer.directoryRefreshIntervalMs,
    queueRecheckIntervalMs: balancer.queueRecheckIntervalMs,
    reportIntervalMs: worker.reportIntervalMs,
    latencyReportIntervalMs: worker.latencyReportIntervalMs,
    balancerHeartbeatIntervalMs: balancer.balancerHeartbeatIntervalMs,
  };
}
