import { performance } from 'node:perf_hooks';
import type { RedisConnection } from '@headroom/fleet';
import { parseAck, type BalancerRecord, type OverrideAck, type OverrideChange, type OverrideState, type OverrideStore } from '@headroom/fleet';

export interface Acknowledgement {
  balancerId: string;
  address: string;
  /** The version it applied (at least the one written). */
  version: number;
  /** From the start of the change to its acknowledgement, as the control plane measured it. */
  ackMs: number;
}

export interface PropagatedChange {
  override: OverrideState;
  /** The override it replaced (undefined when Redis had none). */
  previous: OverrideState | undefined;
  /** Balancers alive when the change was written. */
  expected: string[];
  acknowledged: Acknowledgement[];
  /** Expected balancers that did not acknowledge within the timeout. */
  missing: string[];
  /** To the last acknowledgement; null when no balancer was alive. */
  propagationMs: number | null;
}

interface Collector {
  version: number | undefined;
  readonly startedAt: number;
  /** Known once the balancers alive at the change were listed (after it was written). */
  expected: Set<string> | undefined;
  readonly seen: Map<string, { ack: OverrideAck; at: number }>;
  done(): void;
}

/**
 * Writes override changes and waits for every live balancer to acknowledge them, measuring the
 * time to the last acknowledgement. Acks arrive over pub/sub; any that were missed are read
 * from the acks hash at the end.
 */
export class OverrideControl {
  private readonly collectors = new Set<Collector>();
  private readonly onMessage = (channel: string, message: string) => {
    if (channel !== this.store.keys.overrideAckedChannel) return;
    const at = performance.now();
    let ack: OverrideAck;
    try {
      ack = parseAck(message);
    } catch {
      return;
    }
    for (const collector of this.collectors) {
      if (!collector.seen.has(ack.balancerId)) collector.seen.set(ack.balancerId, { ack, at });
      else if (collector.seen.get(ack.balancerId)!.ack.version < ack.version) collector.seen.set(ack.balancerId, { ack, at });
      maybeDone(collector);
    }
  };

  constructor(
    readonly store: OverrideStore,
    private readonly subscriber: RedisConnection,
    private readonly options: { balancerLiveWithinMs: number; ackTimeoutMs: number },
  ) {}

  async start(): Promise<void> {
    this.subscriber.on('message', this.onMessage);
    await this.subscriber.subscribe(this.store.keys.overrideAckedChannel);
  }

  stop(): void {
    this.subscriber.off('message', this.onMessage);
  }

  async liveBalancers(): Promise<BalancerRecord[]> {
    return this.store.liveBalancers(this.options.balancerLiveWithinMs);
  }

  /**
   * The write comes first, so nothing else delays it; the balancers to wait for are listed
   * right after (one that registers later read the override when it started, or gets the
   * message: it is subscribed before it reads).
   */
  async change(change: OverrideChange, actor: string): Promise<PropagatedChange> {
    const startedAt = performance.now();
    const startedAtUnixMs = Date.now();
    let finish!: () => void;
    const finished = new Promise<void>((resolve) => (finish = resolve));
    const collector: Collector = { version: undefined, startedAt, expected: undefined, seen: new Map(), done: finish };
    this.collectors.add(collector);
    let timer: NodeJS.Timeout | undefined;
    try {
      const { state: override, previous } = await this.store.changeFrom(change, actor);
      collector.version = override.version;
      timer = setTimeout(finish, this.options.ackTimeoutMs);
      timer.unref();
      const balancers = await this.liveBalancers();
      collector.expected = new Set(balancers.map((b) => b.balancerId));
      maybeDone(collector);
      await finished;
      const expected = collector.expected;
      // Acks that went by while we were not listening (or arrived just after the timeout).
      const missing = [...expected].filter((id) => !acked(collector, id));
      if (missing.length > 0) {
        for (const record of await this.liveBalancers()) {
          if (record.ack && record.ack.version >= override.version && !acked(collector, record.balancerId)) {
            collector.seen.set(record.balancerId, { ack: record.ack, at: startedAt + Math.max(0, record.ack.ackedAtUnixMs - startedAtUnixMs) });
          }
        }
      }
      const addresses = new Map(balancers.map((b) => [b.balancerId, b.address]));
      const acknowledged: Acknowledgement[] = [...expected]
        .filter((id) => acked(collector, id))
        .map((id) => {
          const { ack, at } = collector.seen.get(id)!;
          return { balancerId: id, address: addresses.get(id) ?? '', version: ack.version, ackMs: round(at - startedAt) };
        })
        .sort((a, b) => a.ackMs - b.ackMs);
      return {
        override,
        previous,
        expected: [...expected],
        acknowledged,
        missing: [...expected].filter((id) => !acked(collector, id)),
        propagationMs: acknowledged.length === 0 ? null : acknowledged[acknowledged.length - 1]!.ackMs,
      };
    } finally {
      clearTimeout(timer);
      this.collectors.delete(collector);
    }
  }
}

function acked(collector: Collector, balancerId: string): boolean {
  const seen = collector.seen.get(balancerId);
  return seen !== undefined && collector.version !== undefined && seen.ack.version >= collector.version;
}

function maybeDone(collector: Collector): void {
  if (collector.version === undefined || collector.expected === undefined) return;
  for (const id of collector.expected) if (!acked(collector, id)) return;
  collector.done();
}

function round(ms: number): number {
  return Math.round(ms * 100) / 100;
}
