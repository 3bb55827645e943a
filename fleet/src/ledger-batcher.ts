/**
 * Collects one process's releases and reservations for one cluster and sends them to the ledger
 * together (lua/settle-12.lua): what Redis spends on a call (reading, parsing and answering the
 * request, starting the script) is paid once per batch instead of once per lease.
 *
 * A call goes out at once when none went out in the last `batchWindowMs`; otherwise the batch
 * waits until that much time has passed since the previous one. So an idle or lightly loaded
 * balancer adds no delay (each reservation goes out in the same turn of the event loop), and a
 * busy one makes at most one call per window, each carrying everything that came meanwhile:
 * batches grow with the load, and no lease waits more than the window.
 */
/** A release: the id of the lease to end. */
export type ReleaseEntry = string;

export interface ReservationEntry {
  priority: string;
  /** The balancer asking; recorded as waiting when `waitIfNone` and nothing is free. */
  balancerId: string;
  waitIfNone: boolean;
  targetWorkerId: string;
  nonce: string;
  /** '' for none. */
  integration: string;
  skipWorkerIds: readonly string[];
}

/** What one settle call returned: per release whether a lease was released, per reservation the script's reply. */
export interface SettleReply {
  released: number[];
  reservations: string[][];
}

export interface LedgerBatcherOptions {
  batchWindowMs: number;
  /** Most releases, and most reservations, sent in one call (the rest go in the next). */
  maxPerCall: number;
  /** Most releases, and most reservations, waiting for a call; beyond it they are refused. */
  maxWaiting: number;
}

interface Pending<E, R> {
  entry: E;
  resolve: (value: R) => void;
  reject: (error: unknown) => void;
}

export class BatchFullError extends Error {
  constructor(what: string, limit: number) {
    super(`${limit} ${what} already wait for the ledger (maxWaiting); Redis is not keeping up`);
    this.name = 'BatchFullError';
  }
}

export class LedgerBatcher {
  private releases: Pending<ReleaseEntry, boolean>[] = [];
  private reservations: Pending<ReservationEntry, string[]>[] = [];
  private timer: NodeJS.Timeout | NodeJS.Immediate | undefined;
  private lastCallAtMs = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly send: (releases: readonly ReleaseEntry[], reservations: readonly ReservationEntry[]) => Promise<SettleReply>,
    private readonly options: LedgerBatcherOptions,
  ) {}

  /** Entries refused because maxWaiting were waiting already. */
  refused = 0;

  /** Entries waiting for a call (for a gauge). */
  get waiting(): number {
    return this.releases.length + this.reservations.length;
  }

  release(entry: ReleaseEntry): Promise<boolean> {
    return this.enqueue(this.releases, entry, 'releases');
  }

  reserve(entry: ReservationEntry): Promise<string[]> {
    return this.enqueue(this.reservations, entry, 'reservations');
  }

  private enqueue<E, R>(list: Pending<E, R>[], entry: E, what: string): Promise<R> {
    if (list.length >= this.options.maxWaiting) {
      this.refused++;
      return Promise.reject(new BatchFullError(what, this.options.maxWaiting));
    }
    return new Promise<R>((resolve, reject) => {
      list.push({ entry, resolve, reject });
      this.schedule();
    });
  }

  private schedule(): void {
    if (this.timer) return;
    const waitMs = this.lastCallAtMs + this.options.batchWindowMs - performance.now();
    // setImmediate: whatever else this turn of the event loop asks for goes in the same call.
    this.timer = waitMs <= 0 ? setImmediate(this.flush) : setTimeout(this.flush, Math.ceil(waitMs));
  }

  private readonly flush = (): void => {
    this.timer = undefined;
    const releases = this.releases.splice(0, this.options.maxPerCall);
    const reservations = this.reservations.splice(0, this.options.maxPerCall);
    if (releases.length === 0 && reservations.length === 0) return;
    this.lastCallAtMs = performance.now();
    this.send(
      releases.map((p) => p.entry),
      reservations.map((p) => p.entry),
    ).then(
      (reply) => {
        releases.forEach((p, i) => p.resolve(reply.released[i] === 1));
        reservations.forEach((p, i) => p.resolve(reply.reservations[i]!));
      },
      (error: unknown) => {
        for (const p of releases) p.reject(error);
        for (const p of reservations) p.reject(error);
      },
    );
    if (this.releases.length > 0 || this.reservations.length > 0) this.schedule();
  };
}
