/**
 * The proxyless path: the generator itself reserves each slot in the balancers' ledger and calls
 * the worker, through @headroom/client/proxyless, so the generator's CPU includes the routing
 * work (the ledger calls, the queue, the worker channels) that the balancer does on its path.
 */
import { HeadroomClientError } from '@headroom/client';
import { createProxylessClient, type ProxylessClient } from '@headroom/client/proxyless';
import { connectRedis, waitUntilReady } from '@headroom/fleet';
import type { Targets } from './protocol';
import type { CallSettings, CallTarget } from './call-target';

/**
 * A client with two Redis connections of its own (ledger, pub/sub), the balancer's default
 * clusters and policy, under the run's key prefix. One attempt per call, as the balancer path's
 * Submit gets: a failure counts as one, not hidden by a retry.
 */
export function proxylessTarget(
  ledger: NonNullable<Targets['ledger']>,
  { integrationOf, priorityOf, payload, runId, callTimeoutMs }: CallSettings,
): CallTarget {
  const redis = connectRedis(ledger.redisUrl);
  const subscriber = connectRedis(ledger.redisUrl, { enableOfflineQueue: true, enableAutoPipelining: false });
  const started: Promise<ProxylessClient> = waitUntilReady(redis, ledger.redisUrl).then(() =>
    createProxylessClient(
      { ledger: { keyPrefix: ledger.keyPrefix }, retry: { maxAttempts: 1 }, balancerId: `bench-proxyless-${runId}` },
      { redis, subscriber },
    ),
  );
  // Rejections surface in waitForReady; this keeps an early one from being unhandled.
  started.catch(() => undefined);
  let client: ProxylessClient | undefined;
  return {
    call: async (sequence) => {
      const integration = integrationOf(sequence);
      const priority = priorityOf(sequence);
      try {
        await (client ??= await started).submit({
          id: `${runId}-${sequence}`,
          key: `key-${sequence % 1024}`,
          integration,
          priority,
          payload,
          deadlineMs: callTimeoutMs,
        });
        return { ok: true, integration, priority };
      } catch (error) {
        return { ok: false, code: error instanceof HeadroomClientError ? error.code : 'UNKNOWN', integration, priority };
      }
    },
    waitForReady: async (timeoutMs) => {
      let timer: NodeJS.Timeout | undefined;
      const timedOut = new Promise<never>((_resolve, reject) => {
        timer = setTimeout(() => reject(new Error(`proxyless client: not ready within ${timeoutMs} ms`)), timeoutMs);
        timer.unref();
      });
      try {
        client = await Promise.race([started, timedOut]);
      } finally {
        clearTimeout(timer);
      }
    },
    close: () => {
      void started
        .then((c) => c.close())
        .catch(() => undefined)
        .finally(() => {
          redis.disconnect();
          subscriber.disconnect();
        });
    },
  };
}
