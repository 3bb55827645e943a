import { setTimeout as sleep } from 'node:timers/promises';
import type { RedisConnection } from '@headroom/fleet';

/**
 * When a ledger script ran, by Redis's clock (ms, the clock the scripts use): somewhere in
 * [fromMs, toMs], read just before the call went out and just after its answer came back.
 */
export interface ClockSpan {
  fromMs: number;
  toMs: number;
}

/**
 * Redis's clock, read by the model: the ledger dates leases and heartbeats by it, so the model
 * must too (the test's own clock may differ from Redis's when Redis is elsewhere).
 */
export class RedisClock {
  constructor(private readonly redis: RedisConnection) {}

  async nowMs(): Promise<number> {
    const [seconds, micros] = await this.redis.time();
    return Number(seconds) * 1000 + Math.floor(Number(micros) / 1000);
  }

  /** Runs `call`, with the span of Redis time in which whatever script it ran did run. */
  async span<T>(call: () => Promise<T>): Promise<{ value: T; span: ClockSpan }> {
    const fromMs = await this.nowMs();
    const value = await call();
    return { value, span: { fromMs, toMs: await this.nowMs() } };
  }

  /** Resolves once Redis's clock reads `ms` or later. */
  async waitUntil(ms: number): Promise<void> {
    for (let now = await this.nowMs(); now < ms; now = await this.nowMs()) await sleep(ms - now);
  }
}
