/**
 * The control side of a fleet, in this process: a real Unleash server (on a fresh schema of the
 * local PostgreSQL, see @headroom/unleash-local) and the control plane, on the shared Redis under
 * the benchmark's key prefix.
 */
import { randomBytes } from 'node:crypto';
import type { Redis } from 'ioredis';
import { once } from '@headroom/common';
import { createControlPlane, type ControlPlane } from '@headroom/control-plane';
import { connectRedis, controlKeys, parseAck, waitUntilReady, type OverrideAck } from '@headroom/fleet';
import { startTestUnleash, type TestUnleash } from '@headroom/unleash-local';
import { deleteKeys } from './headroom-fleet';

export interface ControlStackOptions {
  redisUrl: string;
  /** Integrations with a traffic share of their own. */
  integrations: string[];
}

export interface ControlStack {
  /** What balancers need to read the flags. */
  readonly unleash: { url: string; clientToken: string };
  readonly controlPlaneUrl: string;
  /** Calls the control plane's REST API (/api/v1) as an operator; rejects on a status other than 2xx. */
  api<T>(method: 'GET' | 'PUT' | 'POST', path: string, body?: unknown): Promise<T>;
  /** Each balancer's latest acknowledgement, as recorded in Redis (with Redis's clock, in whole ms). */
  acknowledgements(): Promise<OverrideAck[]>;
  /** Stops the control plane, deletes the prefix's Redis keys, stops Unleash (dropping its schema). Idempotent. */
  close(): Promise<void>;
}

const apiTimeoutMs = 15_000;

/** `register` receives the clean-up as soon as there is something to clean up. */
export async function startControlStack(keyPrefix: string, options: ControlStackOptions, register: (cleanup: () => Promise<void>) => void): Promise<ControlStack> {
  let unleash: TestUnleash | undefined;
  let controlPlane: ControlPlane | undefined;
  const connections: Redis[] = [];
  const close = once(async () => {
    await controlPlane?.close();
    // Only now: until it stopped, the control plane could write the override again.
    await deleteKeys(options.redisUrl, keyPrefix);
    for (const connection of connections) connection.disconnect();
    await unleash?.stop();
  });
  register(close);

  unleash = await startTestUnleash();
  const redis = connectRedis(options.redisUrl);
  const subscriber = connectRedis(options.redisUrl, { enableOfflineQueue: true, enableAutoPipelining: false });
  connections.push(redis, subscriber);
  // The pub/sub connection too: a SUBSCRIBE sent while it still connects makes its ready check fail.
  await Promise.all([waitUntilReady(redis, options.redisUrl), waitUntilReady(subscriber, options.redisUrl)]);
  const token = randomBytes(24).toString('hex');
  controlPlane = await createControlPlane(
    {
      integrations: options.integrations,
      unleash: { url: unleash.url, adminToken: unleash.adminToken },
      tokens: [{ name: 'bench', role: 'operator', token }],
    },
    { redis, subscriber, keyPrefix },
  );
  const baseUrl = controlPlane.url;

  return {
    unleash: { url: unleash.url, clientToken: unleash.clientToken },
    controlPlaneUrl: baseUrl,
    async api<T>(method: string, path: string, body?: unknown): Promise<T> {
      const response = await fetch(`${baseUrl}/api/v1${path}`, {
        method,
        headers: { authorization: `Bearer ${token}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
        ...(body === undefined ? {} : { body: JSON.stringify(body) }),
        signal: AbortSignal.timeout(apiTimeoutMs),
      });
      const text = await response.text();
      if (!response.ok) throw new Error(`${method} /api/v1${path}: HTTP ${response.status} ${text.slice(0, 500)}`);
      return JSON.parse(text) as T;
    },
    async acknowledgements() {
      return Object.values(await redis.hgetall(controlKeys(keyPrefix).acks)).map(parseAck);
    },
    close,
  };
}
