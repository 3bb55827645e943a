#!/usr/bin/env node
/**
 * headroom-balancer: serves headroom.v1.Balancer/Submit.
 *   node balancer/dist/src/cli.js --port 7000 --candidate-percent 10
 * Every flag can also be set by env (HEADROOM_PORT, ...); flags win.
 */
import { z } from 'zod';
import { ConfigError, createLogger, parseConfig, readSettings, serveMetrics, settingNamer, settings, stopSignal } from '@headroom/common';
import { connectRedis, waitUntilReady } from '@headroom/fleet';
import { createBalancer } from './balancer';
import { balancerOptionsSchema } from './config';
import { policyNames } from './policies';

const envNames = {
  balancerId: 'HEADROOM_BALANCER_ID',
  host: 'HEADROOM_HOST',
  port: 'HEADROOM_PORT',
  candidatePercent: 'HEADROOM_CANDIDATE_PERCENT',
  policy: 'HEADROOM_POLICY',
  maxQueuedTasks: 'HEADROOM_MAX_QUEUED_TASKS',
  maxPayloadBytes: 'HEADROOM_MAX_PAYLOAD_BYTES',
  defaultTaskTimeoutMs: 'HEADROOM_DEFAULT_TASK_TIMEOUT_MS',
  maxTaskTimeoutMs: 'HEADROOM_MAX_TASK_TIMEOUT_MS',
  maxDispatchAttempts: 'HEADROOM_MAX_DISPATCH_ATTEMPTS',
  heartbeatTimeoutMs: 'HEADROOM_HEARTBEAT_TIMEOUT_MS',
  baselineCluster: 'HEADROOM_BASELINE_CLUSTER',
  candidateCluster: 'HEADROOM_CANDIDATE_CLUSTER',
  keptForUserPresentShare: 'HEADROOM_KEPT_FOR_USER_PRESENT_SHARE',
  metricsPort: 'HEADROOM_METRICS_PORT',
  redisUrl: 'REDIS_URL',
  keyPrefix: 'HEADROOM_KEY_PREFIX',
};

const usage = `Usage: headroom-balancer [options]
  --host HOST --port PORT              gRPC server (default 127.0.0.1:0) (${envNames.host}, ${envNames.port})
  --candidate-percent P                tasks sent to the candidate cluster, 0..100 (default 0) (${envNames.candidatePercent})
  --policy NAME                        ${policyNames.join(' | ')} (default least-loaded) (${envNames.policy})
  --baseline-cluster NAME              (default baseline) (${envNames.baselineCluster})
  --candidate-cluster NAME             (default candidate) (${envNames.candidateCluster})
  --kept-for-user-present-share S      share of capacity only user-present tasks may use, 0..1 (default 0.1) (${envNames.keptForUserPresentShare})
  --max-queued-tasks N                 (default 10000) (${envNames.maxQueuedTasks})
  --max-payload-bytes N                (default 1048576) (${envNames.maxPayloadBytes})
  --default-task-timeout-ms MS         (default 30000) (${envNames.defaultTaskTimeoutMs})
  --max-task-timeout-ms MS             (default 3600000) (${envNames.maxTaskTimeoutMs})
  --max-dispatch-attempts N            (default 3) (${envNames.maxDispatchAttempts})
  --heartbeat-timeout-ms MS            (default 3000) (${envNames.heartbeatTimeoutMs})
  --balancer-id ID                     (${envNames.balancerId})
  --metrics-port PORT                  serve Prometheus metrics at http://HOST:PORT/metrics (default off) (${envNames.metricsPort})
  --redis-url URL                      (default redis://127.0.0.1:6379) (${envNames.redisUrl})
  --key-prefix PREFIX                  (default hr) (${envNames.keyPrefix})`;

const cliSchema = z
  .object({
    ...balancerOptionsSchema.shape,
    baselineCluster: settings.name().default('baseline'),
    candidateCluster: settings.name().default('candidate'),
    keptForUserPresentShare: settings.share().default(0.1),
    metricsPort: settings.nonNegativeInt(65_535).optional(),
  redisUrl: settings.redisUrl().default('redis://127.0.0.1:6379'),
    keyPrefix: z.string().regex(/^[A-Za-z0-9:._-]{1,64}$/, 'expected 1-64 characters of A-Z, a-z, 0-9, ":", ".", "_", "-"').default('hr'),
  })
  .strict();

async function main(): Promise<void> {
  const { help, input } = readSettings(process.argv.slice(2), process.env, envNames);
  if (help) {
    process.stdout.write(`${usage}\n`);
    return;
  }
  const stopRequested = stopSignal();
  const config = parseConfig('balancer settings (flags or env)', cliSchema, input, settingNamer(envNames));
  const { baselineCluster, candidateCluster, keptForUserPresentShare, redisUrl, keyPrefix, metricsPort, ...options } = config;

  const logger = createLogger('headroom-balancer');
  const redis = connectRedis(redisUrl, {}, logger);
  const subscriber = connectRedis(redisUrl, { enableOfflineQueue: true, enableAutoPipelining: false }, logger);
  await waitUntilReady(redis, redisUrl);
  const balancer = await createBalancer(
    { ...options, clusters: { baseline: baselineCluster, candidate: candidateCluster } },
    { redis, subscriber, ledger: { keyPrefix, keptForUserPresentShare }, logger },
  );
  const metricsServer = metricsPort === undefined ? undefined : await serveMetrics(balancer.registry, options.host ?? '127.0.0.1', metricsPort);
  process.stdout.write(`${JSON.stringify({ event: 'ready', balancerId: balancer.balancerId, address: balancer.address, metricsPort: metricsServer?.port })}\n`);
  void stopRequested.then(async (signal) => {
    logger.info({ signal }, 'stopping');
    await balancer.close();
    redis.disconnect();
    subscriber.disconnect();
    process.exit(0);
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`headroom-balancer: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(error instanceof ConfigError ? 2 : 1);
});
