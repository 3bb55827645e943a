import type { Logger } from '@headroom/common';
import type { Ledger } from '@headroom/fleet';

export interface KnownWorker {
  workerId: string;
  address: string;
}

/**
 * This balancer's copy of which workers each cluster has, checked against the ledger every
 * `refreshIntervalMs` and re-read only when a worker joined or left or an address changed (one
 * small read a period otherwise, whatever the fleet's size). Used where a local view is enough:
 * closing channels of workers that left, and the policies that choose without the ledger
 * (round-robin, random, power of two).
 */
export class WorkerDirectory {
  private readonly workersByCluster = new Map<string, KnownWorker[]>();
  private readonly versionByCluster = new Map<string, string>();
  private timer: NodeJS.Timeout | undefined;
  private readonly listeners: ((cluster: string, workers: readonly KnownWorker[]) => void)[] = [];

  constructor(
    private readonly ledger: Ledger,
    private readonly clusters: readonly string[],
    private readonly refreshIntervalMs: number,
    private readonly logger: Logger,
  ) {}

  async start(): Promise<void> {
    await this.refresh();
    const tick = () => {
      this.timer = setTimeout(() => void this.refresh().finally(tick), this.refreshIntervalMs);
      this.timer.unref();
    };
    tick();
  }

  stop(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  workers(cluster: string): readonly KnownWorker[] {
    return this.workersByCluster.get(cluster) ?? [];
  }

  onRefresh(listener: (cluster: string, workers: readonly KnownWorker[]) => void): void {
    this.listeners.push(listener);
  }

  async refresh(): Promise<void> {
    for (const cluster of this.clusters) {
      try {
        const read = await this.ledger.addressesIfChanged(cluster, this.versionByCluster.get(cluster));
        if (!read.changed) continue;
        const workers = [...read.addresses].map(([workerId, address]) => ({ workerId, address })).sort((a, b) => a.workerId.localeCompare(b.workerId));
        this.workersByCluster.set(cluster, workers);
        this.versionByCluster.set(cluster, read.version);
        for (const listener of this.listeners) listener(cluster, workers);
      } catch (error) {
        // Keep the last view; the next refresh tries again.
        this.logger.debug({ err: error, cluster }, 'worker directory refresh failed');
      }
    }
  }
}
