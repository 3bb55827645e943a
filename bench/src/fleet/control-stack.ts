/**
 * The control side of a fleet, each a process of its own as deployed (so that neither slows the
 * benchmark reading the control plane's answers): a real Unleash server (on a fresh schema of
 * the local PostgreSQL, see unleash-process.ts) and the control plane (its CLI), on the shared
 * Redis under the benchmark's key prefix.
 */
import { randomBytes } from 'node:crypto';
import { once } from '@headroom/common';
import { connectRedis, controlKeys, parseAck, waitUntilReady, type OverrideAck, type RedisConnection } from '@headroom/fleet';
import * as path from 'node:path';
import { deleteKeys } from './headroom-fleet';
import { startNodeProcess, type NodeProcess } from '@headroom/testkit';
import { testSchema } from '@headroom/unleash-local';
import { ControlPlaneApi } from '@headroom/testkit';

export interface ControlStackOptions {
  redisUrl: string;
  /** Integrations with a traffic share of their own. */
  integrations: string[];
  /** Where the control plane's log goes. */
  logDir: string;
  /** More control plane CLI flags, e.g. --autopilot-tick-ms. */
  controlPlaneArgs?: readonly string[];
}

export interface ControlStack {
  /** What balancers need to read the flags. */
  readonly unleash: { url: string; clientToken: string };
  readonly controlPlaneUrl: string;
  /** The control plane's REST API (/api/v1) as an operator. */
  readonly api: ControlPlaneApi;
  /** Each balancer's latest acknowledgement, as recorded in Redis (with Redis's clock, in whole ms). */
  acknowledgements(): Promise<OverrideAck[]>;
  /** Stops the control plane, deletes the prefix's Redis keys, stops Unleash (dropping its schema). Idempotent. */
  close(): Promise<void>;
}

const apiTimeoutMs = 15_000;
const readyTimeoutMs = 30_000;
const controlPlaneCli = require.resolve('@headroom/control-plane/cli');
const unleashScript = path.join(__dirname, 'unleash-process.js');
/** Unleash takes a few seconds to start (migrations on a fresh schema). */
const unleashReadyTimeoutMs = 60_000;

/** `register` receives the clean-up as soon as there is something to clean up. */
export async function startControlStack(
  keyPrefix: string,
  options: ControlStackOptions,
  register: (cleanup: () => Promise<void>) => void,
): Promise<ControlStack> {
  let unleashProcess: NodeProcess | undefined;
  let controlPlane: NodeProcess | undefined;
  const connections: RedisConnection[] = [];
  // The control plane's audit log: a schema of its own on the test PostgreSQL.
  const database = testSchema('hr_bench');
  const close = once(async () => {
    await controlPlane?.stop();
    // Only now: until it stopped, the control plane could write the override again.
    await deleteKeys(options.redisUrl, keyPrefix);
    for (const connection of connections) connection.disconnect();
    await unleashProcess?.stop();
    await database.drop().catch(() => undefined);
  });
  register(close);

  const env = { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' };
  // GRACEFUL_SHUTDOWN_ENABLE=false: Unleash installs no signal handlers of its own; the script stops it.
  const startedUnleash = await startNodeProcess({
    name: 'unleash',
    script: unleashScript,
    args: [],
    env: { ...env, GRACEFUL_SHUTDOWN_ENABLE: 'false' },
    logDir: options.logDir,
    readyTimeoutMs: unleashReadyTimeoutMs,
  });
  unleashProcess = startedUnleash.process;
  const unleash = {
    url: startedUnleash.ready.address,
    adminToken: String(startedUnleash.ready.adminToken),
    clientToken: String(startedUnleash.ready.clientToken),
  };
  const redis = connectRedis(options.redisUrl);
  connections.push(redis);
  await waitUntilReady(redis, options.redisUrl);
  const token = randomBytes(24).toString('hex');
  const started = await startNodeProcess({
    name: 'control-plane',
    script: controlPlaneCli,
    args: [
      '--port',
      '0',
      '--integrations',
      options.integrations.join(','),
      '--unleash-url',
      unleash.url,
      '--key-prefix',
      keyPrefix,
      '--redis-url',
      options.redisUrl,
      '--database-url',
      database.url,
      '--database-schema',
      database.schema,
      ...(options.controlPlaneArgs ?? []),
    ],
    env: { ...env, UNLEASH_ADMIN_TOKEN: unleash.adminToken, HEADROOM_OPERATOR_TOKENS: `bench=${token}` },
    logDir: options.logDir,
    readyTimeoutMs,
  });
  controlPlane = started.process;
  const baseUrl = started.ready.address;

  return {
    unleash: { url: unleash.url, clientToken: unleash.clientToken },
    controlPlaneUrl: baseUrl,
    api: new ControlPlaneApi({ apiUrl: `${baseUrl}/api/v1`, token, timeoutMs: apiTimeoutMs }),
    async acknowledgements() {
      return Object.values(await redis.hgetall(controlKeys(keyPrefix).acks)).map(parseAck);
    },
    close,
  };
}
