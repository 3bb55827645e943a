/**
 * Asks balancers where they route right now: each probe is one Balancer.Submit of a task that
 * does no work, always with the same key (the split is sticky per key), so the cluster that ran
 * it is the one the balancer's routing chose at that moment.
 */
import { performance } from 'node:perf_hooks';
import { sleep } from '@headroom/common';
import type { BalancerClient } from '@headroom/proto';
import { connectBalancer } from '@headroom/sim';
import { benchTask, submitBenchTask, waitForReady } from '../load/targets';

export interface RouteProbeOptions {
  integration: string;
  /** Time between two probes of one balancer. */
  intervalMs: number;
  /** Deadline of one probe. */
  probeTimeoutMs: number;
}

export class RouteProbe {
  private readonly clients: BalancerClient[];
  private sequence = 0;
  private readonly payload = Buffer.from('{}');

  constructor(
    addresses: readonly string[],
    private readonly options: RouteProbeOptions,
  ) {
    this.clients = addresses.map(connectBalancer);
  }

  async waitForReady(timeoutMs: number): Promise<void> {
    await Promise.all(this.clients.map((client) => waitForReady(client, timeoutMs)));
  }

  /** The cluster one balancer sent the probe to; undefined when the probe failed. */
  async clusterOf(balancer: number): Promise<string | undefined> {
    const task = benchTask(`probe-${process.pid}-${++this.sequence}`, 'probe', this.options.integration, this.payload);
    const outcome = await submitBenchTask(this.clients[balancer]!, task, this.options.probeTimeoutMs);
    return outcome.ok ? outcome.cluster : undefined;
  }

  /**
   * Probes every balancer until each has routed to `cluster`; resolves with, per balancer, the
   * milliseconds from `sinceMs` (a performance.now() time) to the answer that first showed it.
   * Rejects after `timeoutMs` or when `signal` aborts.
   */
  async untilAllRouteTo(cluster: string, sinceMs: number, timeoutMs: number, signal: AbortSignal): Promise<number[]> {
    const deadline = performance.now() + timeoutMs;
    return Promise.all(
      this.clients.map(async (_client, balancer) => {
        while (performance.now() < deadline) {
          signal.throwIfAborted();
          if ((await this.clusterOf(balancer)) === cluster) return performance.now() - sinceMs;
          await sleep(this.options.intervalMs, signal);
        }
        throw new Error(`balancer ${balancer + 1} did not route ${this.options.integration} to ${cluster} within ${timeoutMs} ms`);
      }),
    );
  }

  close(): void {
    for (const client of this.clients) client.close();
  }
}
