import { randomBytes } from 'node:crypto';
import type { RedisConnection } from '@headroom/fleet';
import { HeadroomError, once, type Logger } from '@headroom/common';
import type { AuditLog } from '../audit';
import { apiErrorCodes } from '../errors';
import type { FleetView } from '../fleet-view';
import { parseCpuprofile, summarise } from './cpuprofile';
import { ProfileLock } from './profile-lock';
import { ProfileStore, type ProfileRecord, type ProfileStoreOptions } from './profile-store';
import { requestProfile } from './worker-profile-call';
import type { ChannelSecurity } from '@headroom/proto';

/** Time the worker's answer may take beyond the profile's duration (the profile's JSON travels). */
const answerMarginMs = 10_000;
/** Time to summarise and store the profile once it arrived, before the lock expires on its own. */
const storeMarginMs = 5_000;
/** Functions kept in a profile's summary. */
const summaryTopFunctions = 20;

/**
 * CPU profiles on demand: one worker at a time across the fleet (a lock in Redis), asked over
 * gRPC in the background; the profile and its summary are kept in Redis for a while.
 */
export class ProfileService {
  private readonly lock: ProfileLock;
  private readonly store: ProfileStore;
  /** Profiles this control plane is taking (at most one: the lock is fleet-wide). */
  private readonly running = new Map<string, { abort: AbortController; done: Promise<void> }>();

  constructor(
    private readonly deps: {
      redis: RedisConnection;
      keyPrefix: string;
      fleet: FleetView;
      audit: AuditLog;
      logger: Logger;
      options: ProfileStoreOptions;
      workerSecurity: ChannelSecurity;
    },
  ) {
    this.lock = new ProfileLock(deps.redis, deps.keyPrefix);
    this.store = new ProfileStore(deps.redis, deps.keyPrefix, deps.options);
  }

  /** Starts profiling `workerId` and answers at once with the running profile's record. */
  async start(request: { workerId: string; durationMs: number }, actor: string): Promise<ProfileRecord> {
    const worker = (await this.deps.fleet.workers()).find((w) => w.workerId === request.workerId);
    if (!worker) throw new HeadroomError(apiErrorCodes.notFound, `no worker ${request.workerId} in either cluster; nothing was started`);
    const startedAtUnixMs = Date.now();
    const profileId = `${startedAtUnixMs}-${randomBytes(4).toString('hex')}`;
    const lockTtlMs = request.durationMs + answerMarginMs + storeMarginMs;
    const attempt = await this.lock.tryTake({ profileId, workerId: worker.workerId, actor }, lockTtlMs);
    if (!attempt.taken) {
      const { holder } = attempt;
      throw new HeadroomError(
        apiErrorCodes.profileLocked,
        `worker ${holder.workerId} is being profiled (profile ${holder.profileId}, asked by ${holder.actor}) until ${new Date(holder.untilUnixMs).toISOString()} at the latest; one worker at a time; nothing was started`,
        { retryAfterMs: attempt.msLeft },
      );
    }
    const record: ProfileRecord = {
      profileId,
      workerId: worker.workerId,
      cluster: worker.cluster,
      address: worker.address,
      durationMs: request.durationMs,
      actor,
      status: 'running',
      startedAtUnixMs,
      deadlineUnixMs: startedAtUnixMs + lockTtlMs,
    };
    try {
      await this.store.create(record);
      await this.deps.audit.record({
        actor,
        action: 'profile.start',
        target: worker.workerId,
        request: { workerId: request.workerId, durationMs: request.durationMs },
        before: null,
        after: { profileId, durationMs: request.durationMs, cluster: worker.cluster },
        outcome: 'ok',
      });
    } catch (error) {
      await attempt.release().catch(() => undefined);
      throw error;
    }
    const abort = new AbortController();
    const done = this.take(record, abort.signal).finally(async () => {
      this.running.delete(profileId);
      await attempt
        .release()
        .catch((error: unknown) => this.deps.logger.warn({ err: error, profileId }, 'could not release the profiling lock; it expires on its own'));
    });
    this.running.set(profileId, { abort, done });
    return record;
  }

  /** Newest first; at most the number kept. */
  async list(limit: number): Promise<ProfileRecord[]> {
    return (await this.store.list(limit)).map(asSeenNow);
  }

  async get(profileId: string): Promise<ProfileRecord> {
    const record = await this.store.get(profileId);
    if (!record)
      throw new HeadroomError(
        apiErrorCodes.notFound,
        `no profile ${profileId} (profiles are kept ${this.deps.options.ttlMs} ms, the newest ${this.deps.options.maxKept})`,
      );
    return asSeenNow(record);
  }

  /** The .cpuprofile JSON of a finished profile. */
  async cpuprofile(profileId: string): Promise<{ record: ProfileRecord; json: Buffer }> {
    const record = await this.get(profileId);
    const json = record.status === 'done' ? await this.store.cpuprofile(profileId) : undefined;
    if (!json) throw new HeadroomError(apiErrorCodes.notFound, `profile ${profileId} has no .cpuprofile: it is ${record.status}`);
    return { record, json };
  }

  /** Abandons the profile being taken (the worker's call is cancelled) and waits until it is recorded. Idempotent. */
  readonly close = once(async () => {
    const running = [...this.running.values()];
    for (const { abort } of running) abort.abort();
    await Promise.all(running.map(({ done }) => done));
  });

  private async take(record: ProfileRecord, signal: AbortSignal): Promise<void> {
    const { profileId } = record;
    try {
      const json = await requestProfile(record, this.deps.workerSecurity, record.durationMs, record.durationMs + answerMarginMs, signal);
      const parsed = parseCpuprofile(json);
      if ('problem' in parsed) throw new HeadroomError(apiErrorCodes.profileFailed, `worker ${record.workerId} answered with ${parsed.problem}`);
      const summary = summarise(parsed.profile, summaryTopFunctions);
      await this.store.update({ ...record, status: 'done', finishedAtUnixMs: Date.now(), cpuprofileBytes: json.length, summary }, json);
      this.deps.logger.info({ profileId, workerId: record.workerId, bytes: json.length }, 'CPU profile stored');
    } catch (error) {
      const coded = error instanceof HeadroomError ? error : new HeadroomError(apiErrorCodes.profileFailed, String(error), { cause: error });
      this.deps.logger.warn({ err: error, profileId, workerId: record.workerId }, 'CPU profile failed');
      await this.store
        .update({ ...record, status: 'failed', finishedAtUnixMs: Date.now(), error: { code: coded.code, message: coded.message } })
        .catch((storeError: unknown) => this.deps.logger.warn({ err: storeError, profileId }, 'could not record the failed profile'));
    }
  }
}

/** A profile still "running" past its deadline was abandoned by a control plane that stopped. */
function asSeenNow(record: ProfileRecord): ProfileRecord {
  if (record.status !== 'running' || Date.now() <= record.deadlineUnixMs) return record;
  return {
    ...record,
    status: 'failed',
    error: { code: apiErrorCodes.profileFailed, message: 'abandoned: the control plane taking it stopped before it finished' },
  };
}
