import type { TestContext } from 'node:test';
import { randomBytes } from 'node:crypto';
import { testRedisUrl } from './redis';
import { Registry } from 'prom-client';
import { startFlagClient, type FlagClient } from '@headroom/flags';
import { testSchema, type RunningUnleash, type TestSchema } from '@headroom/unleash-local';
import { connected, startFleet, type Fleet } from './fleet';
import { createControlPlane, type ControlPlane, type ControlPlaneOptions } from '@headroom/control-plane';

export const operatorToken = 'operator-token-0123456789abcdef';
export const viewerToken = 'viewer-token-0123456789abcdef';

export interface Stack {
  fleet: Fleet;
  controlPlane: ControlPlane;
  flagNames: { candidateCluster: string; maxParallelism: string };
  /** The control plane's schema on the test PostgreSQL (its audit log), dropped when the test ends. */
  database: TestSchema;
  /** A flag client of its own (refreshing every 100 ms) with a registry to read its metrics. */
  newFlagClient(): Promise<{ flags: FlagClient; registry: Registry }>;
  /** Calls the API as the operator (or with the given token; null sends none). */
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
    { redis: fleet.redis, subscriber, keyPrefix: fleet.ledgerOptions.keyPrefix! },
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
  return {
    fleet,
    controlPlane,
    flagNames,
    database,
    async newFlagClient() {
      const registry = new Registry();
      const flags = await startFlagClient(
        { url: unleash.url, clientToken: unleash.clientToken, appName: 'headroom-test', instanceId: `test-${clients.length}`, refreshIntervalMs: 100, flagNames },
        { registry },
      );
      clients.push(flags);
      return { flags, registry };
    },
    async api(method, path, body, token = operatorToken, headers = {}) {
      const response = await fetch(`${controlPlane.url}/api/v1${path}`, {
        method,
        headers: {
          ...(token === null ? {} : { authorization: `Bearer ${token}` }),
          ...(body === undefined ? {} : { 'content-type': 'application/json' }),
          ...headers,
        },
        ...(body === undefined ? {} : { body: typeof body === 'string' ? body : JSON.stringify(body) }),
      });
      const text = await response.text();
      let parsed: unknown = text;
      try {
        parsed = JSON.parse(text);
      } catch {
        // Not JSON (metrics): the text itself.
      }
      return { status: response.status, body: parsed };
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
  const response = await fetch(`${stack.controlPlane.url}/api/v1/events`, { headers: { authorization: `Bearer ${operatorToken}` }, signal: controller.signal });
  if (response.headers.get('content-type') !== 'text/event-stream; charset=utf-8') throw new Error(`not an event stream: ${response.status} ${response.headers.get('content-type')}`);
  const events: StreamedEvent[] = [];
  void (async () => {
    const decoder = new TextDecoder();
    let buffered = '';
    try {
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        buffered += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffered.indexOf('\n\n')) >= 0) {
          const block = buffered.slice(0, end);
          buffered = buffered.slice(end + 2);
          const event = /^event: (.+)$/m.exec(block)?.[1];
          const data = /^data: (.+)$/m.exec(block)?.[1];
          if (event && data) events.push({ event, data: JSON.parse(data) });
        }
      }
    } catch {
      // Aborted at the end of the test.
    }
  })();
  return events;
}
