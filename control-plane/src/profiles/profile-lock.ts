import { randomBytes } from 'node:crypto';
import type { RedisConnection } from '@headroom/fleet';
import { LedgerUnavailableError, controlKeys } from '@headroom/fleet';
import { controlScripts, type ControlScript } from '../control-scripts';

/** Who holds the profiling lock. */
export interface ProfileLockHolder {
  profileId: string;
  workerId: string;
  actor: string;
  /** When the lock expires on its own if nobody releases it. */
  untilUnixMs: number;
}

export type LockAttempt = { taken: true; release(): Promise<void> } | { taken: false; holder: ProfileLockHolder; msLeft: number };

/**
 * One CPU profile at a time across the fleet, whichever control plane asks: a Redis key with an
 * expiry (so a control plane that dies mid-profile frees it too), released only by its holder.
 */
export class ProfileLock {
  readonly key: string;
  private readonly scripts: ReturnType<typeof controlScripts>;

  constructor(redis: RedisConnection, keyPrefix: string) {
    this.key = controlKeys(keyPrefix).profileLock;
    this.scripts = controlScripts(redis);
  }

  async tryTake(holder: Omit<ProfileLockHolder, 'untilUnixMs'>, ttlMs: number): Promise<LockAttempt> {
    // The token makes the value unique, so that release frees this holder's lock and no later one.
    const value = JSON.stringify({ ...holder, untilUnixMs: Date.now() + ttlMs, token: randomBytes(8).toString('hex') });
    const [taken, current, msLeft] = (await this.run('profile-lock-acquire', [this.key, value, ttlMs])) as [number, string?, number?];
    if (taken === 1) return { taken: true, release: () => this.run('profile-lock-release', [this.key, value]).then(() => undefined) };
    const { profileId, workerId, actor, untilUnixMs } = JSON.parse(current!) as ProfileLockHolder;
    return { taken: false, holder: { profileId, workerId, actor, untilUnixMs }, msLeft: Math.max(0, Number(msLeft)) };
  }

  private async run(script: ControlScript, args: (string | number)[]): Promise<unknown> {
    try {
      return await this.scripts(script, args);
    } catch (error) {
      throw new LedgerUnavailableError(script, error);
    }
  }
}
