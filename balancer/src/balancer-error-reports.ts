import { isHeadroomError, type Logger } from '@headroom/common';
import { BalancerErrorRecorder, type RedisConnection } from '@headroom/fleet';
import type { DispatchResult } from './dispatch';
import { balancerErrorCodes } from './errors';

export interface BalancerErrorReportsOptions {
  redis: RedisConnection;
  keyPrefix: string;
  /** The clusters this engine serves: a failure before routing ('none') is no cluster's. */
  clusters: readonly string[];
  /** Bounds the integrations, as the metrics do. */
  integrationLabel(integration: string): string;
  /** How often the counts go to Redis. */
  flushIntervalMs: number;
  logger: Logger;
}

/**
 * Counts in Redis the tasks this engine failed before any worker started them (deadline passed in
 * the queue, queue full, shed, no worker took it, ...) as errors of their cluster and integration,
 * so that the control plane's figures include them: a worker counts only what fails on it. A
 * client's cancel is its own choice, not an error of the cluster.
 */
export class BalancerErrorReports {
  private readonly recorder: BalancerErrorRecorder;
  private readonly clusters: ReadonlySet<string>;
  private readonly timer: NodeJS.Timeout;

  constructor(private readonly options: BalancerErrorReportsOptions) {
    this.recorder = new BalancerErrorRecorder(options.redis, { keyPrefix: options.keyPrefix });
    this.clusters = new Set(options.clusters);
    this.timer = setInterval(() => void this.flush(), options.flushIntervalMs);
    this.timer.unref();
  }

  /** Counts `result` when it is a failure no worker counted. */
  noteResult(result: DispatchResult, integration: string): void {
    if (result.ok || result.workerStarted || !this.clusters.has(result.cluster)) return;
    const code = isHeadroomError(result.error) ? result.error.code : balancerErrorCodes.internal;
    if (code === balancerErrorCodes.cancelled) return;
    this.recorder.record(result.cluster, this.options.integrationLabel(integration), code);
  }

  /** Stops the timer and sends what is left (once; errors are logged, the counts are then lost). */
  async close(): Promise<void> {
    clearInterval(this.timer);
    await this.flush();
  }

  private flush(): Promise<void> {
    // Kept for the next flush when Redis is away (bounded by the recorder).
    return this.recorder
      .flush()
      .catch((error: unknown) => this.options.logger.debug({ err: error }, 'could not report balancer errors; kept for the next try'));
  }
}
