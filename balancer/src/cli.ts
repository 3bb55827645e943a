#!/usr/bin/env node
/**
 * headroom-balancer: serves headroom.v1.Balancer/Submit.
 *   node balancer/dist/src/cli.js --port 7000 --candidate-percent 10
 * Every flag can also be set by env (listed by --help); flags win.
 */
import { z } from 'zod';
import {
  ConfigError,
  createLogger,
  registerProcessMetrics,
  readOptions,
  serveMetrics,
  settings,
  stopSignal,
  usageText,
  type OptionSpec,
  clusterOptionSpecs,
} from '@headroom/common';
import { connectRedis, waitUntilReady } from '@headroom/fleet';
import {
  serverTlsFromOptions,
  serverTlsOptionSpecs,
  serverTlsOptionsShape,
  workerTlsFromOptions,
  workerTlsOptionSpecs,
  workerTlsOptionsShape,
} from '@headroom/proto';
import { flagOptionSpecs, flagOptionsShape, startFlagClientFromOptions } from '@headroom/flags';
import { Registry } from 'prom-client';
import { createBalancer } from './balancer';
import { balancerOptionsSchema } from './config';
import { policyNames } from './policies';

const optionSpecs: readonly OptionSpec[] = [
  { key: 'host', flag: 'host', env: 'HEADROOM_HOST', valueName: 'HOST', description: 'gRPC server interface' },
  { key: 'port', flag: 'port', env: 'HEADROOM_PORT', valueName: 'PORT', description: 'gRPC server port; 0: any free port' },
  {
    key: 'candidatePercent',
    flag: 'candidate-percent',
    env: 'HEADROOM_CANDIDATE_PERCENT',
    valueName: 'P',
    description: 'tasks sent to the candidate cluster, 0..100, sticky per task key',
  },
  {
    key: 'policy',
    flag: 'policy',
    env: 'HEADROOM_POLICY',
    valueName: 'NAME',
    description: `${policyNames.join(' | ')} (plain-round-robin, least-request and least-request-p2c take no slot in the ledger: what balancers without Headroom do, for comparison, with workers run --overflow queue)`,
  },
  ...clusterOptionSpecs,
  {
    key: 'keptForUserPresentShare',
    flag: 'kept-for-user-present-share',
    env: 'HEADROOM_KEPT_FOR_USER_PRESENT_SHARE',
    valueName: 'S',
    description: 'share of capacity only user-present tasks may use, 0..1',
  },
  {
    key: 'defaultIntegrationLimit',
    flag: 'default-integration-limit',
    env: 'HEADROOM_DEFAULT_INTEGRATION_LIMIT',
    valueName: 'JSON',
    description:
      'limit of each integration with no limit of its own in the ledger, per cluster: {"shareOfCapacity": x, "minInFlight": n} or {"off": true} (in flight), either optionally with "maxStartsPerSecond": r (task starts per second, 0.001 to 1000000); every balancer and proxyless client should agree on it',
    defaultText: '{"shareOfCapacity":0.5,"minInFlight":8}',
  },
  {
    key: 'maxQueuedShareAtLimit',
    flag: 'max-queued-share-at-limit',
    env: 'HEADROOM_MAX_QUEUED_SHARE_AT_LIMIT',
    valueName: 'S',
    description: "share of this balancer's queue the tasks of one integration at its limit may take; more get HR_ERR_INTEGRATION_AT_LIMIT, (0, 1]",
  },
  {
    key: 'ledgerBatchWindowMs',
    flag: 'ledger-batch-window-ms',
    env: 'HEADROOM_LEDGER_BATCH_WINDOW_MS',
    valueName: 'MS',
    description:
      'at most one call to the ledger per cluster in this time while busy, carrying every reservation and release made meanwhile; 0 sends each at once',
  },
  { key: 'maxQueuedTasks', flag: 'max-queued-tasks', env: 'HEADROOM_MAX_QUEUED_TASKS', valueName: 'N', description: 'tasks that may wait for a slot' },
  {
    key: 'maxQueuedBytes',
    flag: 'max-queued-bytes',
    env: 'HEADROOM_MAX_QUEUED_BYTES',
    valueName: 'N',
    description: 'payload bytes the waiting tasks may hold',
  },
  {
    key: 'maxPayloadBytes',
    flag: 'max-payload-bytes',
    env: 'HEADROOM_MAX_PAYLOAD_BYTES',
    valueName: 'N',
    description: 'largest task payload accepted, in bytes',
  },
  {
    key: 'defaultTaskTimeoutMs',
    flag: 'default-task-timeout-ms',
    env: 'HEADROOM_DEFAULT_TASK_TIMEOUT_MS',
    valueName: 'MS',
    description: 'deadline of a task that has none',
  },
  { key: 'maxTaskTimeoutMs', flag: 'max-task-timeout-ms', env: 'HEADROOM_MAX_TASK_TIMEOUT_MS', valueName: 'MS', description: 'farthest deadline accepted' },
  {
    key: 'maxDispatchAttempts',
    flag: 'max-dispatch-attempts',
    env: 'HEADROOM_MAX_DISPATCH_ATTEMPTS',
    valueName: 'N',
    description: 'workers tried for one task',
  },
  {
    key: 'workerTransport',
    flag: 'worker-transport',
    env: 'HEADROOM_WORKER_TRANSPORT',
    valueName: 'NAME',
    description: 'http2 | grpc-js: how Worker/Execute is called; http2 is gRPC framed over node:http2, about half the CPU per task of grpc-js',
  },
  {
    key: 'serverTransport',
    flag: 'server-transport',
    env: 'HEADROOM_SERVER_TRANSPORT',
    valueName: 'NAME',
    description: 'grpc-js | http2: how Submit and health are served to clients (http2: gRPC framed over a node:http2 server, less CPU per task)',
  },
  {
    key: 'workerConnectTimeoutMs',
    flag: 'worker-connect-timeout-ms',
    env: 'HEADROOM_WORKER_CONNECT_TIMEOUT_MS',
    valueName: 'MS',
    description: 'longest a connection to a worker may take (TCP and TLS) before its tasks go to another worker and the failure counts towards ejecting it',
  },
  {
    key: 'workerFirstByteTimeoutMs',
    flag: 'worker-first-byte-timeout-ms',
    env: 'HEADROOM_WORKER_FIRST_BYTE_TIMEOUT_MS',
    valueName: 'MS',
    description: 'longest a connected worker may stay silent before its first bytes, counted as above',
  },
  {
    key: 'ejectAfterConnectFailures',
    flag: 'eject-after-connect-failures',
    env: 'HEADROOM_EJECT_AFTER_CONNECT_FAILURES',
    valueName: 'N',
    description: 'failures in a row to connect to a worker after which every balancer skips it until a health check passes; 0 never',
  },
  {
    key: 'ejectionBackoffMs',
    flag: 'ejection-backoff-ms',
    env: 'HEADROOM_EJECTION_BACKOFF_MS',
    valueName: 'MS',
    description:
      'first time an ejected worker is skipped (then a health check, or for a failing worker the end of the back-off, lets it back), doubled at each ejection in a row',
  },
  {
    key: 'maxEjectionBackoffMs',
    flag: 'max-ejection-backoff-ms',
    env: 'HEADROOM_MAX_EJECTION_BACKOFF_MS',
    valueName: 'MS',
    description: 'longest that doubling goes',
  },
  {
    key: 'maxEjectedShare',
    flag: 'max-ejected-share',
    env: 'HEADROOM_MAX_EJECTED_SHARE',
    valueName: 'S',
    description: "most of a cluster's workers ejected at once, 0..1, at least one",
  },
  {
    key: 'ejectFailureMinTasks',
    flag: 'eject-failure-min-tasks',
    env: 'HEADROOM_EJECT_FAILURE_MIN_TASKS',
    valueName: 'N',
    description:
      'ejection by failure rate: tasks of one integration a worker, and its peers together, must have had in the window before it is judged; 0 never ejects for failures',
  },
  {
    key: 'ejectFailureWindowMs',
    flag: 'eject-failure-window-ms',
    env: 'HEADROOM_EJECT_FAILURE_WINDOW_MS',
    valueName: 'MS',
    description: 'how far back task outcomes count for ejection by failure rate',
  },
  {
    key: 'ejectFailureShareAbovePeers',
    flag: 'eject-failure-share-above-peers',
    env: 'HEADROOM_EJECT_FAILURE_SHARE_ABOVE_PEERS',
    valueName: 'S',
    description:
      "a worker whose failed share of an integration's tasks is this much above the other workers' is ejected as failing until its back-off ends, (0, 1]",
  },
  {
    key: 'heartbeatTimeoutMs',
    flag: 'heartbeat-timeout-ms',
    env: 'HEADROOM_HEARTBEAT_TIMEOUT_MS',
    valueName: 'MS',
    description: 'a worker silent this long leaves the ledger (times workers ÷ 1,000 in a cluster of more)',
  },
  { key: 'balancerId', flag: 'balancer-id', env: 'HEADROOM_BALANCER_ID', valueName: 'ID', description: 'default <hostname>-<pid>-<random>' },
  {
    key: 'metricsPort',
    flag: 'metrics-port',
    env: 'HEADROOM_METRICS_PORT',
    valueName: 'PORT',
    description: 'serve Prometheus metrics at /metrics (default off)',
  },
  {
    key: 'redisUrl',
    flag: 'redis-url',
    env: 'REDIS_URL',
    valueName: 'URL',
    description: 'the ledger: redis://host:port, redis+sentinel://host:port,host:port/<primary name>, or redis+cluster://host:port,host:port',
  },
  { key: 'keyPrefix', flag: 'key-prefix', env: 'HEADROOM_KEY_PREFIX', valueName: 'PREFIX', description: 'ledger key prefix' },
  ...serverTlsOptionSpecs,
  ...workerTlsOptionSpecs,
  ...flagOptionSpecs,
];

/** A JSON option's text as its value; text that is not JSON is left for the schema to refuse. */
function parseJsonText(value: unknown): unknown {
  if (typeof value !== 'string') return value;
  try {
    return JSON.parse(value) as unknown;
  } catch {
    return value;
  }
}

const cliSchema = z
  .object({
    ...balancerOptionsSchema.shape,
    defaultIntegrationLimit: z.preprocess(parseJsonText, balancerOptionsSchema.shape.defaultIntegrationLimit),
    baselineCluster: settings.name().default('baseline'),
    candidateCluster: settings.name().default('candidate'),
    keptForUserPresentShare: settings.share().default(0.1),
    ledgerBatchWindowMs: settings.nonNegativeInt(1_000).default(2),
    metricsPort: settings.nonNegativeInt(65_535).optional(),
    redisUrl: settings.redisUrl().default('redis://127.0.0.1:6379'),
    keyPrefix: settings.keyPrefix(),
    ...flagOptionsShape,
    ...serverTlsOptionsShape,
    ...workerTlsOptionsShape,
  })
  .strict();

async function main(): Promise<void> {
  const parsed = readOptions(cliSchema, optionSpecs, process.argv.slice(2), process.env);
  if (parsed.help) {
    process.stdout.write(`${usageText('Usage: headroom-balancer [options]', optionSpecs, cliSchema)}\n`);
    return;
  }
  const stopRequested = stopSignal();
  const config = parsed.config;
  const {
    baselineCluster,
    candidateCluster,
    keptForUserPresentShare,
    ledgerBatchWindowMs,
    redisUrl,
    keyPrefix,
    metricsPort,
    unleashUrl,
    unleashClientToken,
    flagsRefreshIntervalMs,
    candidateFlag,
    parallelismFlag,
    tlsCert,
    tlsKey,
    tlsClientCa,
    workerTlsCa,
    workerTlsCert,
    workerTlsKey,
    workerTlsServerName,
    ...rest
  } = config;
  const tls = serverTlsFromOptions({ tlsCert, tlsKey, tlsClientCa });
  const workerTls = workerTlsFromOptions({ workerTlsCa, workerTlsCert, workerTlsKey, workerTlsServerName });
  const options = { ...rest, ...(tls ? { tls } : {}), ...(workerTls ? { workerTls } : {}) };

  const logger = createLogger('headroom-balancer');
  const registry = new Registry();
  registerProcessMetrics(registry);
  const flagClient = await startFlagClientFromOptions(
    { unleashUrl, unleashClientToken, flagsRefreshIntervalMs, candidateFlag, parallelismFlag },
    { appName: 'headroom-balancer', instanceId: options.balancerId ?? `balancer-${process.pid}` },
    { logger, registry },
  );
  const redis = connectRedis(redisUrl, {}, logger);
  const subscriber = connectRedis(redisUrl, { enableOfflineQueue: true, enableAutoPipelining: false }, logger);
  await waitUntilReady(redis, redisUrl, undefined, '--redis-url');
  const balancer = await createBalancer(
    { ...options, clusters: { baseline: baselineCluster, candidate: candidateCluster } },
    {
      redis,
      subscriber,
      ledger: { keyPrefix, keptForUserPresentShare, batchWindowMs: ledgerBatchWindowMs },
      logger,
      registry,
      ...(flagClient ? { flags: flagClient } : {}),
    },
  );
  const metricsServer = metricsPort === undefined ? undefined : await serveMetrics(balancer.registry, options.host ?? '127.0.0.1', metricsPort);
  process.stdout.write(`${JSON.stringify({ event: 'ready', balancerId: balancer.balancerId, address: balancer.address, metricsPort: metricsServer?.port })}\n`);
  void stopRequested.then(async (signal) => {
    logger.info({ signal }, 'stopping');
    await balancer.close();
    flagClient?.close();
    redis.disconnect();
    subscriber.disconnect();
    process.exit(0);
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`headroom-balancer: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(error instanceof ConfigError ? 2 : 1);
});
