import { promisify } from 'node:util';
import { gunzip, gzip } from 'node:zlib';
import type { RedisConnection } from '@headroom/fleet';
import { LedgerUnavailableError, controlKeys, type ControlKeys } from '@headroom/fleet';
import type { ProfileSummary } from './cpuprofile';

const gzipAsync = promisify(gzip);
const gunzipAsync = promisify(gunzip);

export type ProfileStatus = 'running' | 'done' | 'failed';

export interface ProfileRecord {
  profileId: string;
  workerId: string;
  cluster: string;
  address: string;
  durationMs: number;
  /** Who asked (the token's name). */
  actor: string;
  status: ProfileStatus;
  startedAtUnixMs: number;
  /** Past this, a profile still "running" was abandoned (its control plane stopped). */
  deadlineUnixMs: number;
  finishedAtUnixMs?: number;
  /** Size of the .cpuprofile JSON. */
  cpuprofileBytes?: number;
  /** Computed once, when the profile arrives. */
  summary?: ProfileSummary;
  error?: { code: string; message: string };
}

export interface ProfileStoreOptions {
  /** How long a profile is kept. */
  ttlMs: number;
  /** Profiles kept at most (oldest dropped). */
  maxKept: number;
}

/**
 * Profiles in Redis under the control hash tag: an index by start time, and per profile a hash
 * of its record and its .cpuprofile (gzipped: the JSON shrinks about tenfold). Each expires
 * after `ttlMs`; past `maxKept` the oldest go.
 */
export class ProfileStore {
  private readonly keys: ControlKeys;

  constructor(
    private readonly redis: RedisConnection,
    keyPrefix: string,
    readonly options: ProfileStoreOptions,
  ) {
    this.keys = controlKeys(keyPrefix);
  }

  /** Adds a new profile and drops what is past the bounds. */
  async create(record: ProfileRecord): Promise<void> {
    await this.guard('store profile', async () => {
      const key = this.keys.profile(record.profileId);
      await this.redis
        .multi()
        .hset(key, 'record', JSON.stringify(record))
        .pexpire(key, this.options.ttlMs)
        .zadd(this.keys.profiles, record.startedAtUnixMs, record.profileId)
        .exec();
      const expired = await this.redis.zrangebyscore(this.keys.profiles, '-inf', `(${Date.now() - this.options.ttlMs}`);
      const beyond = await this.redis.zrange(this.keys.profiles, 0, -(this.options.maxKept + 1));
      const dropped = [...new Set([...expired, ...beyond])];
      if (dropped.length > 0)
        await this.redis
          .multi()
          .zrem(this.keys.profiles, ...dropped)
          .del(...dropped.map((id) => this.keys.profile(id)))
          .exec();
    });
  }

  /** Replaces the record, with the profile's JSON when it arrived; kept `ttlMs` from now. */
  async update(record: ProfileRecord, cpuprofile?: Buffer): Promise<void> {
    const compressed = cpuprofile ? await gzipAsync(cpuprofile) : undefined;
    const key = this.keys.profile(record.profileId);
    const fields: (string | Buffer)[] = ['record', JSON.stringify(record), ...(compressed ? ['cpuprofile', compressed] : [])];
    await this.guard('store profile', () =>
      this.redis
        .multi()
        .hset(key, ...fields)
        .pexpire(key, this.options.ttlMs)
        .exec(),
    );
  }

  async get(profileId: string): Promise<ProfileRecord | undefined> {
    const raw = await this.guard('read profile', () => this.redis.hget(this.keys.profile(profileId), 'record'));
    return raw === null ? undefined : (JSON.parse(raw) as ProfileRecord);
  }

  /** Newest first. */
  async list(limit: number): Promise<ProfileRecord[]> {
    return this.guard('list profiles', async () => {
      const ids = await this.redis.zrevrange(this.keys.profiles, 0, Math.min(limit, this.options.maxKept) - 1);
      const raws = await Promise.all(ids.map((id) => this.redis.hget(this.keys.profile(id), 'record')));
      return raws.filter((raw): raw is string => raw !== null).map((raw) => JSON.parse(raw) as ProfileRecord);
    });
  }

  /** The .cpuprofile JSON, when the profile is done and still kept. */
  async cpuprofile(profileId: string): Promise<Buffer | undefined> {
    const compressed = await this.guard('read profile', () => this.redis.hgetBuffer(this.keys.profile(profileId), 'cpuprofile'));
    return compressed === null ? undefined : gunzipAsync(compressed);
  }

  private async guard<T>(operation: string, fn: () => Promise<T>): Promise<T> {
    try {
      return await fn();
    } catch (error) {
      throw new LedgerUnavailableError(operation, error);
    }
  }
}
