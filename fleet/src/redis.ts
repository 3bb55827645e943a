import { Cluster, Redis, type Callback, type RedisOptions } from 'ioredis';
import { ConfigError, parseRedisUrl, silentLogger, withoutPassword, type Logger } from '@headroom/common';

/** Reconnect quickly: a restarted Redis, or a replica Sentinel promoted, must be rebuilt within a few heartbeats. */
const reconnectDelayMs = (attempt: number) => Math.min(50 * attempt, 500);

/**
 * What every part of Headroom talks to Redis through: one Redis (also the primary Sentinel
 * names) or a Redis Cluster. Every multi-key command, transaction and script stays in one hash
 * tag, so both serve the same calls.
 */
export type RedisConnection = Redis | Cluster;

/**
 * A Redis connection for ledger work, to one Redis, to the primary Sentinel names, or to a Redis
 * Cluster (see parseRedisUrl for the URL forms). Commands are not queued while Redis is away (the
 * offline queue would be unbounded): they fail at once, and callers retry on their own schedule.
 * Commands issued in one tick go out in one pipeline (per node, in a cluster).
 */
export function connectRedis(url: string, options: RedisOptions = {}, logger: Logger = silentLogger): RedisConnection {
  const defaults: RedisOptions = {
    enableAutoPipelining: true,
    enableOfflineQueue: false,
    maxRetriesPerRequest: 0,
    retryStrategy: reconnectDelayMs,
    lazyConnect: false,
  };
  const location = parseRedisUrl(url);
  const credentials = {
    ...(location.kind !== 'single' && location.username ? { username: location.username } : {}),
    ...(location.kind !== 'single' && location.password !== undefined ? { password: location.password } : {}),
  };
  const redis: RedisConnection =
    location.kind === 'single'
      ? new Redis(url, { ...defaults, ...options })
      : location.kind === 'cluster'
        ? new Cluster(location.nodes, {
            enableAutoPipelining: options.enableAutoPipelining ?? true,
            enableOfflineQueue: options.enableOfflineQueue ?? false,
            clusterRetryStrategy: reconnectDelayMs,
            // A failover moves slots: follow MOVED and re-read the slots at once.
            retryDelayOnMoved: 0,
            // Per node: what a connection to it needs; queueing and reconnecting are the cluster's.
            redisOptions: { maxRetriesPerRequest: 0, ...credentials, ...(location.tls ? { tls: {} } : {}) },
          })
        : new SentinelPrimaryConnection({
            ...defaults,
            sentinels: location.sentinels,
            name: location.primaryName,
            // Asked again at each reconnect: after a failover, the sentinels name the new primary.
            sentinelRetryStrategy: reconnectDelayMs,
            // Sentinel announces a promotion (+switch-master): move at once rather than at the next failed command.
            failoverDetector: true,
            ...credentials,
            ...(location.sentinelUsername ? { sentinelUsername: location.sentinelUsername } : {}),
            ...(location.sentinelPassword !== undefined ? { sentinelPassword: location.sentinelPassword } : {}),
            ...(location.tls ? { tls: {}, sentinelTLS: {}, enableTLSForSentinelMode: true } : {}),
            ...options,
          });
  // Connection errors are retried by ioredis; failed commands reach their callers.
  // Without a listener each reconnect attempt would print an "Unhandled error event".
  redis.on('error', (error: Error) => logger.debug({ err: error }, 'redis connection error'));
  return redis;
}

/**
 * A connection to the primary Sentinel names, which connects again when it ended without being
 * closed. ioredis (5.x) ends one for good when its failover detector hears +switch-master while
 * the connection is reconnecting: the detector stops the connector while it asks a sentinel for
 * the primary, and the connection gives up with "Connection is closed." A process would then
 * never reach Redis again, though the new primary is up.
 */
class SentinelPrimaryConnection extends Redis {
  private closeAsked = false;
  private reopenTimer: NodeJS.Timeout | undefined;

  constructor(options: RedisOptions) {
    super(options);
    this.on('end', () => {
      if (this.closeAsked) return;
      this.reopenTimer = setTimeout(() => {
        this.reopenTimer = undefined;
        if (!this.closeAsked && this.status === 'end') this.connect().catch(() => undefined);
      }, reconnectDelayMs(1));
    });
  }

  override disconnect(reconnect = false): void {
    if (!reconnect) {
      this.closeAsked = true;
      clearTimeout(this.reopenTimer);
    }
    super.disconnect(reconnect);
  }

  override quit(callback?: Callback<'OK'>): Promise<'OK'> {
    this.closeAsked = true;
    clearTimeout(this.reopenTimer);
    return super.quit(callback);
  }
}

/**
 * Resolves once `redis` is connected; a ConfigError naming `setting` (what the user gave the URL
 * as: a CLI names its flag, `--redis-url`) after `timeoutMs`. Wait for a pub/sub connection too
 * before subscribing: ioredis sends a SUBSCRIBE at once even while connecting, and its ready
 * check then fails.
 */
export function waitUntilReady(
  redis: RedisConnection,
  url = redis instanceof Redis ? `redis://${redis.options.host ?? '127.0.0.1'}:${redis.options.port ?? 6379}` : 'the Redis Cluster',
  timeoutMs = 10_000,
  setting = 'redisUrl',
): Promise<void> {
  if (redis.status === 'ready') return Promise.resolve();
  return new Promise((resolve, reject) => {
    // The last error says why (refused, WRONGPASS, TLS); without one, nothing answered.
    let lastError: Error | undefined;
    const fail = (why: string) => {
      clearTimeout(timer);
      redis.off('error', onError);
      reject(new ConfigError(`${setting}: could not use Redis at ${withoutPassword(url)}${why}`));
    };
    const onError = (error: Error) => {
      lastError = error;
      // Wrong credentials do not get better by retrying: say so at once.
      if (/^(WRONGPASS|NOAUTH|NOPERM)/.test(error.message)) fail(`: ${error.message}`);
    };
    redis.on('error', onError);
    const timer = setTimeout(() => fail(` within ${timeoutMs} ms${lastError ? `: ${lastError.message}` : ''}`), timeoutMs);
    redis.once('ready', () => {
      clearTimeout(timer);
      redis.off('error', onError);
      resolve();
    });
  });
}
