import type { TestContext } from 'node:test';
import { randomBytes } from 'node:crypto';
import { testRedisUrl } from './redis';
import { Registry } from 'prom-client';
import { startFlagClient, type FlagClient } from '@headroom/flags';
import { testSchema, type RunningUnleash, type TestSchema } from '@headroom/unleash-local';
import { connected, startFleet, type Fleet } from './fleet';
import { createControlPlane, type ControlPlane, type ControlPlaneOptions } from '@headroom/control-plane';
import { ControlPlaneApi } from './control-plane-api';
import { createLogger } from '@headroom/common';

export const operatorToken = 'operator-token-0123456789abcdef';
export const viewerToken = 'viewer-token-0123456789abcdef';
/** A test's calls wait longer than a user's: changes queue behind each other (changeLockWaitMs). */
const stackApiTimeoutMs = 60_000;

export interface Stack {
  fleet: Fleet;
  controlPlane: ControlPlane;
  flagNames: { candidateCluster: string; maxParallelism: string };
  /** The control plane's schema on the test PostgreSQL (its audit log), dropped when the test ends. */
  database: TestSchema;
  /** A flag client of its own (refreshing every 100 ms) with a registry to read its metrics. */
  newFlagClient(): Promise<{ flags: FlagClient; registry: Registry }>;
  /** The API as the operator: typed calls that reject with ControlPlaneApiError on an error answer. */
  client: ControlPlaneApi;
  /**
   * Calls the API as the operator (or with the given token; null sends none) and resolves with
   * the answer whatever its status; the body is the JSON answered, or the text (metrics).
   */
  api(method: string, path: string, body?: unknown, token?: string | null, headers?: Record<string, string>): Promise<{ status: number; body: any }>;
}

/**
 * A fleet (in this process, on the shared Redis under a prefix of its own), the control plane,
 * and flags of their own in the given Unleash (flag names are unique per stack, so tests sharing
 * one Unleash server never see each other's flags).
 */
export async function startStack(t: TestContext, unleash: RunningUnleash, options: Partial<ControlPlaneOptions> = {}, redisUrl = testRedisUrl): Promise<Stack> {
  const fleet = await startFleet(t, { keptForUserPresentShare: 0 }, redisUrl);
  const unique = randomBytes(4).toString('hex');
  const flagNames = { candidateCluster: `test-${unique}.candidate-cluster`, maxParallelism: `test-${unique}.max-parallelism` };
  const database = testSchema();
  const subscriber = await connected(redisUrl, true);
  const controlPlane = await createControlPlane(
    {
      integrations: ['bank-a', 'bank-b'],
      unleash: { url: unleash.url, adminToken: unleash.adminToken, candidateFlag: flagNames.candidateCluster, parallelismFlag: flagNames.maxParallelism },
      tokens: [
        { name: 'olga', role: 'operator', token: operatorToken },
        { name: 'victor', role: 'viewer', token: viewerToken },
      ],
      balancerLiveWithinMs: 2000,
      database: { url: database.url, schema: database.schema },
      ...options,
    },
    // Errors reach the test's output: an answer of HR_ERR_INTERNAL then shows its cause.
    { redis: fleet.redis, subscriber, keyPrefix: fleet.ledgerOptions.keyPrefix!, logger: createLogger('control-plane', 'error') },
  ).catch(async (error: unknown) => {
    subscriber.disconnect();
    await database.drop();
    throw error;
  });
  // After hooks run in the order registered: the schema goes once the control plane stopped.
  t.after(async () => {
    await controlPlane.close();
    subscriber.disconnect();
    await database.drop();
  });
  const clients: FlagClient[] = [];
  t.after(() => clients.forEach((client) => client.close()));
  const client = new ControlPlaneApi({ apiUrl: `${controlPlane.url}/api/v1`, token: operatorToken, timeoutMs: stackApiTimeoutMs });
  return {
    fleet,
    controlPlane,
    flagNames,
    database,
    client,
    async newFlagClient() {
      const registry = new Registry();
      const flags = await startFlagClient(
        {
          url: unleash.url,
          clientToken: unleash.clientToken,
          appName: 'headroom-test',
          instanceId: `test-${clients.length}`,
          refreshIntervalMs: 100,
          flagNames,
        },
        { registry },
      );
      clients.push(flags);
      return { flags, registry };
    },
    async api(method, path, body, token = operatorToken, headers = {}) {
      const { status, body: answered } = await client.send({ method, path, body, token, headers });
      return { status, body: answered };
    },
  };
}

export interface StreamedEvent {
  event: string;
  data: any;
}

/** Follows GET /api/v1/events as the operator until the test ends; the events land in the array as they come. */
export async function followEvents(t: TestContext, stack: Stack): Promise<StreamedEvent[]> {
  const controller = new AbortController();
  t.after(() => controller.abort());
  const stream = await stack.client.events(controller.signal);
  const events: StreamedEvent[] = [];
  void (async () => {
    try {
      for await (const { event, data } of stream) events.push({ event, data });
    } catch {
      // The stream broke: the test's assertions on the events say what is missing.
    }
  })();
  return events;
}
