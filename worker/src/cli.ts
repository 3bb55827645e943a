#!/usr/bin/env node
/**
 * headroom-worker: runs task handlers from a module as a Headroom worker.
 *   node worker/dist/src/cli.js --cluster candidate --handlers ./handlers.js --max-parallelism 30
 * Every flag can also be set by env (HEADROOM_CLUSTER, ...); flags win.
 */
import * as path from 'node:path';
import { z } from 'zod';
import { ConfigError, createLogger, parseConfig, readSettings, serveMetrics, settingNamer, settings, stopSignal } from '@headroom/common';
import { connectRedis, waitUntilReady } from '@headroom/fleet';
import { createWorker, workerOptionsSchema } from './worker';
import type { HandlerMap } from './handler';

const envNames = {
  cluster: 'HEADROOM_CLUSTER',
  workerId: 'HEADROOM_WORKER_ID',
  maxParallelism: 'HEADROOM_MAX_PARALLELISM',
  host: 'HEADROOM_HOST',
  port: 'HEADROOM_PORT',
  advertiseHost: 'HEADROOM_ADVERTISE_HOST',
  heartbeatIntervalMs: 'HEADROOM_HEARTBEAT_INTERVAL_MS',
  drainTimeoutMs: 'HEADROOM_DRAIN_TIMEOUT_MS',
  handlers: 'HEADROOM_HANDLERS',
  metricsPort: 'HEADROOM_METRICS_PORT',
  redisUrl: 'REDIS_URL',
  keyPrefix: 'HEADROOM_KEY_PREFIX',
};

const cliSchema = workerOptionsSchema.extend({
  handlers: z.string({ error: 'expected the path of a module exporting `handlers`' }).min(1),
  metricsPort: settings.nonNegativeInt(65_535).optional(),
  redisUrl: settings.redisUrl().default('redis://127.0.0.1:6379'),
  keyPrefix: z.string().regex(/^[A-Za-z0-9:._-]{1,64}$/, 'expected 1-64 characters of A-Z, a-z, 0-9, ":", ".", "_", "-"').default('hr'),
});

const usage = `Usage: headroom-worker --cluster NAME --handlers MODULE [options]
  --cluster NAME              cluster to serve in (${envNames.cluster})
  --handlers MODULE           module exporting \`handlers\`: { [integration]: async (task, signal) => result } (${envNames.handlers})
  --max-parallelism N         tasks at once, 1..10000 (default 1) (${envNames.maxParallelism})
  --worker-id ID              (default <hostname>-<pid>-<random>) (${envNames.workerId})
  --host HOST --port PORT     gRPC server (default 127.0.0.1:0) (${envNames.host}, ${envNames.port})
  --advertise-host HOST       host balancers dial (default --host) (${envNames.advertiseHost})
  --heartbeat-interval-ms MS  (default 1000) (${envNames.heartbeatIntervalMs})
  --drain-timeout-ms MS       (default 300000) (${envNames.drainTimeoutMs})
  --metrics-port PORT         serve Prometheus metrics at http://HOST:PORT/metrics (default off) (${envNames.metricsPort})
  --redis-url URL             (default redis://127.0.0.1:6379) (${envNames.redisUrl})
  --key-prefix PREFIX         ledger key prefix (default hr) (${envNames.keyPrefix})`;

async function main(): Promise<void> {
  const { help, input } = readSettings(process.argv.slice(2), process.env, envNames);
  if (help) {
    process.stdout.write(`${usage}\n`);
    return;
  }
  const stopRequested = stopSignal();
  const config = parseConfig('worker settings (flags or env)', cliSchema, input, settingNamer(envNames));
  const { handlers: handlersPath, redisUrl, keyPrefix, metricsPort, ...options } = config;
  const loaded = (await import(path.resolve(handlersPath))) as { handlers?: HandlerMap; default?: { handlers?: HandlerMap } };
  const handlers = loaded.handlers ?? loaded.default?.handlers;
  if (!handlers || typeof handlers !== 'object') throw new ConfigError(`handlers: module ${handlersPath} exports no \`handlers\` object`);

  const logger = createLogger('headroom-worker');
  const redis = connectRedis(redisUrl, {}, logger);
  await waitUntilReady(redis, redisUrl);
  const worker = await createWorker(options, { redis, handlers, ledger: { keyPrefix }, logger });
  const metricsServer = metricsPort === undefined ? undefined : await serveMetrics(worker.registry, options.host ?? '127.0.0.1', metricsPort);
  process.stdout.write(`${JSON.stringify({ event: 'ready', workerId: worker.workerId, cluster: worker.cluster, address: worker.address, metricsPort: metricsServer?.port })}\n`);
  void stopRequested.then((signal) => {
    logger.info({ signal }, 'stopping: draining');
    void worker.close();
  });
  // Stopped by a signal, or drained at an operator's request through the ledger.
  void worker.stopped.then(() => {
    redis.disconnect();
    process.exit(0);
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`headroom-worker: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(error instanceof ConfigError ? 2 : 1);
});
