import type { TestContext } from 'node:test';
import type { Registry } from 'prom-client';
import type { BalancerOptions, BalancerStats } from '@headroom/balancer';
import type { LedgerOptions } from '@headroom/fleet';
import { connected, startFleet, testRedisUrl, type Fleet } from '@headroom/testkit';
import { createClient, type HeadroomClientError, type SubmitRequest, type SubmitResult } from '../src/index';
import { createProxylessClient } from '../src/proxyless/index';
import type { RetryPolicy } from '../src/retry-policy';

/** The two ways a task reaches a worker: through a balancer (HeadroomClient → Balancer.Submit), or proxyless. */
export const modes = ['balancer', 'proxyless'] as const;
export type Mode = (typeof modes)[number];

/** One submitter in either mode, with what the property tests read of the balancer logic behind it. */
export interface Front {
  readonly mode: Mode;
  /** Its id in the control plane's balancer register. */
  readonly balancerId: string;
  /** What the control plane shows for it: the balancer's host:port, or the proxyless label. */
  readonly address: string;
  readonly registry: Registry;
  submit(request: SubmitRequest): Promise<SubmitResult>;
  /** The same, settled: the result, or the client error. */
  settle(request: SubmitRequest): Promise<{ ok: true; result: SubmitResult } | { ok: false; error: HeadroomClientError }>;
  /** The balancer logic's own figures (queue, reroutes, the override version applied). */
  engine(): Pick<BalancerStats, 'queue' | 'rerouted' | 'overrideVersion' | 'retries'>;
  close(): Promise<void>;
}

export interface FrontOptions extends Omit<BalancerOptions, 'host' | 'port' | 'tls'> {
  retry?: Partial<RetryPolicy>;
}

export interface ModeFleet {
  fleet: Fleet;
  /** A balancer and a client of it, or a proxyless client, on the fleet's ledger; closed after the test. */
  addFront(mode: Mode, options?: FrontOptions): Promise<Front>;
}

/** A fleet (testkit) whose submitters are fronts of either mode; they close before the fleet does. */
export async function startModeFleet(t: TestContext, ledgerOptions: LedgerOptions = {}): Promise<ModeFleet> {
  const fronts: Front[] = [];
  // Registered before the fleet's own cleanup, so it runs first (after-hooks run in order).
  t.after(() => Promise.all(fronts.map((front) => front.close())));
  const fleet = await startFleet(t, ledgerOptions);
  return {
    fleet,
    async addFront(mode, { retry, ...options } = {}) {
      const front = mode === 'balancer' ? await balancerFront(fleet, options, retry) : await proxylessFront(fleet, options, retry);
      fronts.push(front);
      return front;
    },
  };
}

function settled(submit: (request: SubmitRequest) => Promise<SubmitResult>): Front['settle'] {
  return (request) =>
    submit(request).then(
      (result) => ({ ok: true, result }),
      (error: HeadroomClientError) => ({ ok: false, error }),
    );
}

async function balancerFront(fleet: Fleet, options: BalancerOptions, retry: Partial<RetryPolicy> | undefined): Promise<Front> {
  const balancer = await fleet.addBalancer(options);
  const client = createClient({ balancers: [balancer.address], ...(retry ? { retry } : {}) });
  const submit = (request: SubmitRequest) => client.submit(request);
  return {
    mode: 'balancer',
    balancerId: balancer.balancerId,
    address: balancer.address,
    registry: balancer.registry,
    submit,
    settle: settled(submit),
    engine: () => balancer.stats(),
    // The fleet closes the balancer.
    close: async () => client.close(),
  };
}

async function proxylessFront(fleet: Fleet, options: FrontOptions, retry: Partial<RetryPolicy> | undefined): Promise<Front> {
  const subscriber = await connected(testRedisUrl, true);
  // The fleet's balancers' settings (testkit addBalancer), so both modes run alike.
  const client = await createProxylessClient(
    { heartbeatTimeoutMs: 1000, sweepIntervalMs: 200, ...options, ledger: { ...fleet.ledgerOptions }, ...(retry ? { retry } : {}) },
    { redis: fleet.redis, subscriber },
  ).catch((error: unknown) => {
    subscriber.disconnect();
    throw error;
  });
  const submit = (request: SubmitRequest) => client.submit(request);
  return {
    mode: 'proxyless',
    balancerId: client.balancerId,
    address: client.address,
    registry: client.registry,
    submit,
    settle: settled(submit),
    engine: () => client.stats().engine,
    close: async () => {
      await client.close();
      subscriber.disconnect();
    },
  };
}
