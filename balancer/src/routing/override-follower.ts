import type { RedisConnection } from '@headroom/fleet';
import type { Logger } from '@headroom/common';
import { noOverride, overrideCovers, parseOverride, type BalancerHeartbeatInfo, type OverrideState, type OverrideStore } from '@headroom/fleet';

export interface OverrideFollowerOptions {
  store: OverrideStore;
  /** The balancer's pub/sub connection (shared with the admission queue). */
  subscriber: RedisConnection;
  balancerId: string;
  /** Heartbeats register the balancer and catch up on a missed override. */
  heartbeatIntervalMs: number;
  /**
   * Called synchronously when a newer override is applied; the version is acknowledged when
   * what it returns resolves (the balancer waits for tasks already on their way to start).
   */
  onApplied(state: OverrideState): Promise<void> | void;
  /** What the balancer says of itself with each heartbeat besides its address: its queues, the traffic flag it has. */
  describe(): Omit<BalancerHeartbeatInfo, 'address'>;
  logger: Logger;
}

/**
 * Keeps this balancer's copy of the rollback override: reads it before the balancer routes
 * anything, applies every newer version as soon as it is published, and acknowledges each
 * applied version to the control plane. A missed message (Redis restart, reconnect) is caught
 * up by the next heartbeat. When Redis has lost the override, the last one applied stays.
 */
export class OverrideFollower {
  private state: OverrideState = noOverride;
  private ackedVersion = 0;
  /** The newest version whose onApplied finished: the one that may be acknowledged. */
  private settledVersion = 0;
  private address = '';
  private timer: NodeJS.Timeout | undefined;
  private closed = false;
  // After a reconnect, messages published meanwhile are lost: read the override at once.
  private readonly onReconnected = () => {
    this.options.store
      .read()
      .then((stored) => stored && this.offer(stored))
      .catch((error: unknown) => this.options.logger.debug({ err: error }, 'could not read the override after reconnecting'));
  };
  private readonly onMessage = (channel: string, message: string) => {
    if (channel !== this.options.store.keys.overrideChangedChannel) return;
    try {
      this.offer(parseOverride(message));
    } catch (error) {
      this.options.logger.warn({ err: error, message }, 'ignoring an override message that is not valid');
    }
  };

  constructor(private readonly options: OverrideFollowerOptions) {}

  get current(): OverrideState {
    return this.state;
  }

  /** Whether the override sends this integration to the baseline cluster. */
  covers(integration: string): boolean {
    return overrideCovers(this.state, integration);
  }

  /**
   * Subscribes, then reads the current override (so no change falls between the two). Call
   * before the balancer routes anything.
   */
  async start(): Promise<void> {
    this.options.subscriber.on('message', this.onMessage);
    this.options.subscriber.on('ready', this.onReconnected);
    await this.options.subscriber.subscribe(this.options.store.keys.overrideChangedChannel);
    const stored = await this.options.store.read();
    if (stored) this.offer(stored);
  }

  /** Registers the balancer (with the address clients dial) and keeps it registered. */
  async register(address: string): Promise<void> {
    this.address = address;
    await this.heartbeat();
    const tick = () => {
      this.timer = setTimeout(() => {
        void this.heartbeat()
          .catch((error: unknown) => this.options.logger.debug({ err: error }, 'balancer heartbeat failed'))
          .finally(() => {
            if (!this.closed) tick();
          });
      }, this.options.heartbeatIntervalMs);
      this.timer.unref();
    };
    tick();
  }

  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.timer);
    this.options.subscriber.off('message', this.onMessage);
    this.options.subscriber.off('ready', this.onReconnected);
    await this.options.store
      .leave(this.options.balancerId)
      .catch((error: unknown) => this.options.logger.debug({ err: error }, 'could not leave the balancer register'));
  }

  private async heartbeat(): Promise<void> {
    const stored = await this.options.store.balancerHeartbeat(this.options.balancerId, { address: this.address, ...this.options.describe() });
    if (stored) this.offer(stored);
    // An acknowledgement lost to a Redis blip is sent again.
    if (this.settledVersion > this.ackedVersion) await this.acknowledge(this.settledVersion);
  }

  private offer(state: OverrideState): void {
    if (state.version <= this.state.version) return;
    const previous = this.state;
    this.state = state;
    this.options.logger.info(
      { version: state.version, all: state.all, integrations: state.integrations, previousVersion: previous.version },
      'override applied',
    );
    void Promise.resolve(this.options.onApplied(state))
      .then(() => {
        this.settledVersion = Math.max(this.settledVersion, state.version);
        return this.acknowledge(this.settledVersion);
      })
      .catch((error: unknown) => this.options.logger.warn({ err: error }, 'could not acknowledge the override; the next heartbeat tries again'));
  }

  private async acknowledge(version: number): Promise<void> {
    await this.options.store.acknowledge(this.options.balancerId, version);
    this.ackedVersion = Math.max(this.ackedVersion, version);
  }
}
