#!/usr/bin/env node
/**
 * headroom-worker: runs task handlers from a module as a Headroom worker.
 *   node worker/dist/src/cli.js --cluster candidate --handlers ./handlers.js --max-parallelism 30
 * Every flag can also be set by env (listed by --help); flags win.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
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
} from '@headroom/common';
import { connectRedis, waitUntilReady } from '@headroom/fleet';
import { serverTlsFromOptions, serverTlsOptionSpecs, serverTlsOptionsShape } from '@headroom/proto';
import { flagOptionSpecs, flagOptionsShape, startFlagClientFromOptions } from '@headroom/flags';
import { Registry } from 'prom-client';
import { createWorker, workerOptionsSchema } from './worker';
import { heapSettingsShape, restartWithHeapFlags } from './heap-settings';
import { checkHandlers, type HandlerMap } from './handler';

const flags: readonly OptionSpec[] = [
  { key: 'cluster', flag: 'cluster', env: 'HEADROOM_CLUSTER', valueName: 'NAME', description: 'cluster to serve in, e.g. baseline or candidate (required)' },
  {
    key: 'handlers',
    flag: 'handlers',
    env: 'HEADROOM_HANDLERS',
    valueName: 'MODULE',
    description: 'module exporting `handlers`: { [integration]: async (task, signal) => result } (required)',
  },
  {
    key: 'maxParallelism',
    flag: 'max-parallelism',
    env: 'HEADROOM_MAX_PARALLELISM',
    valueName: 'N',
    description: 'tasks at once, 1..10000, unless the max-parallelism flag sets it for the cluster',
  },
  { key: 'workerId', flag: 'worker-id', env: 'HEADROOM_WORKER_ID', valueName: 'ID', description: 'default <hostname>-<pid>-<random>' },
  { key: 'host', flag: 'host', env: 'HEADROOM_HOST', valueName: 'HOST', description: 'gRPC server interface' },
  { key: 'port', flag: 'port', env: 'HEADROOM_PORT', valueName: 'PORT', description: 'gRPC server port; 0: any free port' },
  {
    key: 'advertiseHost',
    flag: 'advertise-host',
    env: 'HEADROOM_ADVERTISE_HOST',
    valueName: 'HOST',
    description: 'host balancers dial, checked at start: it must resolve (default --host)',
  },
  {
    key: 'heartbeatIntervalMs',
    flag: 'heartbeat-interval-ms',
    env: 'HEADROOM_HEARTBEAT_INTERVAL_MS',
    valueName: 'MS',
    description: 'how often the worker tells the ledger it is alive and what it holds; in a cluster of more than 1,000 workers, times workers ÷ 1,000',
  },
  {
    key: 'drainTimeoutMs',
    flag: 'drain-timeout-ms',
    env: 'HEADROOM_DRAIN_TIMEOUT_MS',
    valueName: 'MS',
    description: 'longest a drain waits for running tasks',
  },
  {
    key: 'metricsPort',
    flag: 'metrics-port',
    env: 'HEADROOM_METRICS_PORT',
    valueName: 'PORT',
    description: 'serve Prometheus metrics at /metrics (default off)',
  },
  {
    key: 'overflow',
    flag: 'overflow',
    env: 'HEADROOM_OVERFLOW',
    valueName: 'MODE',
    description:
      'a task that finds every slot busy: refuse (the balancer tries another worker) or queue (it waits here for a slot, first come first served: for balancers without a shared count of free slots)',
  },
  {
    key: 'maxQueuedTasks',
    flag: 'max-queued-tasks',
    env: 'HEADROOM_MAX_QUEUED_TASKS',
    valueName: 'N',
    description: 'with --overflow queue: tasks that may wait at once; more are refused with HR_ERR_WORKER_QUEUE_FULL',
  },
  {
    key: 'protectEventLoopDelayP99Ms',
    flag: 'protect-event-loop-delay-p99-ms',
    env: 'HEADROOM_PROTECT_EVENT_LOOP_DELAY_P99_MS',
    valueName: 'MS',
    description:
      'self-protection: event-loop delay p99 above which the worker advertises half as many slots per check (down to one) until it is back below 80% of it; 0 = off',
  },
  {
    key: 'protectHeapShare',
    flag: 'protect-heap-share',
    env: 'HEADROOM_PROTECT_HEAP_SHARE',
    valueName: 'SHARE',
    description:
      'self-protection: old-generation heap used ÷ its limit (--max-old-space-size) above which the worker advertises fewer slots, as above; 0 = off',
  },
  {
    key: 'protectCheckIntervalMs',
    flag: 'protect-check-interval-ms',
    env: 'HEADROOM_PROTECT_CHECK_INTERVAL_MS',
    valueName: 'MS',
    description: 'how often self-protection checks the event loop and the heap',
  },
  {
    key: 'acceptUnaddressed',
    flag: 'accept-unaddressed',
    env: 'HEADROOM_ACCEPT_UNADDRESSED',
    isSwitch: true,
    description:
      "also run tasks that name no worker (empty workerId, this worker's cluster), as behind a proxy that picks the worker itself (HAProxy, a Kubernetes Service); a task for another worker is refused either way",
  },
  {
    key: 'latencyReportIntervalMs',
    flag: 'latency-report-interval-ms',
    env: 'HEADROOM_LATENCY_REPORT_INTERVAL_MS',
    valueName: 'MS',
    description: "how often task latencies are added to the summaries in Redis the control plane's latency view and rollout gates read",
  },
  {
    key: 'reportIntervalMs',
    flag: 'report-interval-ms',
    env: 'HEADROOM_REPORT_INTERVAL_MS',
    valueName: 'MS',
    description: 'how often the worker reports its heap, GC, event loop and task figures',
  },
  {
    key: 'maxUpstreamConnections',
    flag: 'max-upstream-connections',
    env: 'HEADROOM_MAX_UPSTREAM_CONNECTIONS',
    valueName: 'N',
    description: "connections the handlers' shared HTTP agent opens per upstream origin",
  },
  {
    key: 'maxOldSpaceSizeMb',
    flag: 'max-old-space-size-mb',
    env: 'HEADROOM_MAX_OLD_SPACE_SIZE_MB',
    valueName: 'MIB',
    description: "V8's old-generation heap limit (node --max-old-space-size; default Node's)",
  },
  {
    key: 'maxSemiSpaceSizeMb',
    flag: 'max-semi-space-size-mb',
    env: 'HEADROOM_MAX_SEMI_SPACE_SIZE_MB',
    valueName: 'MIB',
    description: "V8's young-generation semi-space size: larger means fewer scavenges (node --max-semi-space-size; default Node's)",
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
  ...flagOptionSpecs.filter((spec) => spec.key !== 'candidateFlag'),
];

const cliSchema = workerOptionsSchema.extend({
  handlers: z.string({ error: 'expected the path of a module exporting `handlers`' }).min(1),
  metricsPort: settings.nonNegativeInt(65_535).optional(),
  redisUrl: settings.redisUrl().default('redis://127.0.0.1:6379'),
  keyPrefix: settings.keyPrefix(),
  ...flagOptionsShape,
  ...heapSettingsShape,
  ...serverTlsOptionsShape,
});

type HandlersModule = { handlers?: HandlerMap; default?: { handlers?: HandlerMap } };

/** The --handlers module; one that is not there or fails to load is a ConfigError naming the flag (exit 2). */
async function importHandlersModule(handlersPath: string): Promise<HandlersModule> {
  const resolved = path.resolve(handlersPath);
  if (!fs.existsSync(resolved)) {
    throw new ConfigError(`--handlers: no module at ${resolved} (given ${JSON.stringify(handlersPath)}, resolved from ${process.cwd()})`);
  }
  try {
    return (await import(resolved)) as HandlersModule;
  } catch (error) {
    const message = error instanceof Error ? error.message : String(error);
    throw new ConfigError(`--handlers: module ${resolved} failed to load: ${message.split('\n')[0]}`);
  }
}

async function main(): Promise<void> {
  const parsed = readOptions(cliSchema, flags, process.argv.slice(2), process.env);
  if (parsed.help) {
    process.stdout.write(`${usageText('Usage: headroom-worker --cluster NAME --handlers MODULE [options]', flags, cliSchema)}\n`);
    return;
  }
  const config = parsed.config;
  const {
    handlers: handlersPath,
    redisUrl,
    keyPrefix,
    metricsPort,
    unleashUrl,
    unleashClientToken,
    flagsRefreshIntervalMs,
    candidateFlag,
    parallelismFlag,
    maxOldSpaceSizeMb,
    maxSemiSpaceSizeMb,
    tlsCert,
    tlsKey,
    tlsClientCa,
    ...rest
  } = config;
  const tls = serverTlsFromOptions({ tlsCert, tlsKey, tlsClientCa });
  const options = { ...rest, ...(tls ? { tls } : {}) };
  // Heap sizes apply only at start: this process runs again with them, and waits for that one.
  await restartWithHeapFlags({ maxOldSpaceSizeMb, maxSemiSpaceSizeMb });
  const stopRequested = stopSignal();
  const loaded = await importHandlersModule(handlersPath);
  // Checked before anything starts: a bad module exits 2 naming the entry (ConfigError).
  const handlers = checkHandlers(loaded.handlers ?? loaded.default?.handlers, `module ${handlersPath}`);

  const logger = createLogger('headroom-worker');
  const registry = new Registry();
  registerProcessMetrics(registry);
  const flagClient = await startFlagClientFromOptions(
    { unleashUrl, unleashClientToken, flagsRefreshIntervalMs, candidateFlag, parallelismFlag },
    { appName: 'headroom-worker', instanceId: options.workerId ?? `worker-${process.pid}` },
    { logger, registry },
  );
  const redis = connectRedis(redisUrl, {}, logger);
  await waitUntilReady(redis, redisUrl, undefined, '--redis-url');
  const worker = await createWorker(options, { redis, handlers, ledger: { keyPrefix }, logger, registry, ...(flagClient ? { flags: flagClient } : {}) });
  const metricsServer = metricsPort === undefined ? undefined : await serveMetrics(worker.registry, options.host ?? '127.0.0.1', metricsPort);
  process.stdout.write(
    `${JSON.stringify({ event: 'ready', workerId: worker.workerId, cluster: worker.cluster, address: worker.address, metricsPort: metricsServer?.port })}\n`,
  );
  void stopRequested.then((signal) => {
    logger.info({ signal }, 'stopping: draining');
    void worker.close();
  });
  // Stopped by a signal, or drained at an operator's request through the ledger.
  void worker.stopped.then(() => {
    flagClient?.close();
    redis.disconnect();
    process.exit(0);
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`headroom-worker: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(error instanceof ConfigError ? 2 : 1);
});
