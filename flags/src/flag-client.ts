import type { EventEmitter } from 'node:events';
import { performance } from 'node:perf_hooks';
import { Counter, Gauge, type Registry } from 'prom-client';
import { InMemStorageProvider, Unleash, UnleashEvents } from 'unleash-client';
import { silentLogger, type Logger } from '@headroom/common';
import { contextFieldNames, defaultFlagNames, parseParallelismPayload, type FlagNames } from './flag-names';
import { trafficSplitOf, type TrafficSplit } from './traffic-split';

export interface FlagClientOptions {
  /** Unleash base URL, e.g. http://127.0.0.1:4242 (the client API is under /api). */
  url: string;
  /** A client (backend) token. */
  clientToken: string;
  /** Shown in Unleash's list of applications. */
  appName: string;
  instanceId: string;
  /** How often flags are fetched. @default 1000 */
  refreshIntervalMs?: number;
  /** How long start waits for the first fetch before going on without flags. @default 5000 */
  startTimeoutMs?: number;
  flagNames?: Partial<FlagNames>;
}

export interface FlagClient {
  readonly names: FlagNames;
  /** Flags were fetched at least once: decisions come from Unleash, not from defaults. */
  readonly synchronized: boolean;
  /** The last fetch failed, or none succeeded yet: the flags in use (if any) are the last ones fetched. */
  readonly unreachable: boolean;
  /** Whether a task of this integration and key runs on the candidate cluster. */
  routesToCandidate(integration: string, taskKey: string): boolean;
  /** The max parallelism Unleash sets for a cluster's workers, if any. */
  maxParallelism(cluster: string): number | undefined;
  /** The candidate-cluster flag as last fetched; undefined before the first fetch. */
  trafficSplit(): TrafficSplit | undefined;
  /** Called after every fetch that changed the flags. Returns a function that removes the listener. */
  onChange(listener: () => void): () => void;
  close(): void;
}

/**
 * Starts an Unleash client that keeps the last flags it fetched when Unleash cannot be reached
 * (it never falls back to an empty set), logs each change of reachability once, and shows it
 * in metrics: headroom_flags_synchronized, headroom_flags_unleash_reachable,
 * headroom_flags_fetch_failures_total, headroom_flags_seconds_since_fetch.
 */
export async function startFlagClient(options: FlagClientOptions, deps: { logger?: Logger; registry?: Registry } = {}): Promise<FlagClient> {
  const logger = deps.logger ?? silentLogger;
  const names: FlagNames = { ...defaultFlagNames, ...options.flagNames };
  const unleash = new Unleash({
    url: `${options.url.replace(/\/+$/, '')}/api`,
    appName: options.appName,
    instanceId: options.instanceId,
    customHeaders: { Authorization: options.clientToken },
    refreshInterval: options.refreshIntervalMs ?? 1000,
    disableMetrics: true,
    // Kept in memory only: a file backup shared by processes on one host could hand one
    // process another's flags.
    storageProvider: new InMemStorageProvider(),
    skipInstanceCountWarning: true,
  });
  let synchronized = false;
  // Until a fetch succeeds. (A failed first fetch takes a few seconds: the HTTP client retries.)
  let unreachable = true;
  let failedSinceFetch = false;
  let lastFetchAtMs: number | undefined;
  let fetchFailures = 0;
  const listeners = new Set<() => void>();
  const fetched = () => {
    lastFetchAtMs = performance.now();
    if (failedSinceFetch) logger.info({ url: options.url }, 'Unleash reachable again');
    unreachable = failedSinceFetch = false;
  };
  unleash.on(UnleashEvents.Error, (error: unknown) => {
    fetchFailures++;
    failures.inc();
    if (!failedSinceFetch) {
      logger.warn(
        { err: error, url: options.url, synchronized },
        synchronized
          ? 'Unleash unreachable: keeping the last flags fetched'
          : 'Unleash unreachable and no flags fetched yet: every task goes to the baseline cluster, workers keep their own max parallelism',
      );
    }
    unreachable = failedSinceFetch = true;
  });
  unleash.on(UnleashEvents.Warn, (message: unknown) => logger.warn({ message }, 'Unleash client warning'));
  unleash.on(UnleashEvents.Unchanged, fetched);
  unleash.on(UnleashEvents.Changed, () => {
    fetched();
    for (const listener of listeners) listener();
  });
  unleash.on(UnleashEvents.Synchronized, () => {
    synchronized = true;
    fetched();
    for (const listener of listeners) listener();
  });

  const registers = deps.registry ? [deps.registry] : [];
  new Gauge({
    name: 'headroom_flags_synchronized',
    help: '1 once flags were fetched from Unleash at least once',
    registers,
    collect() {
      this.set(synchronized ? 1 : 0);
    },
  });
  new Gauge({
    name: 'headroom_flags_unleash_reachable',
    help: '0 while fetching flags from Unleash fails (the last flags fetched stay in use)',
    registers,
    collect() {
      this.set(unreachable ? 0 : 1);
    },
  });
  new Gauge({
    name: 'headroom_flags_seconds_since_fetch',
    help: 'Seconds since flags were last fetched from Unleash (-1 before the first fetch)',
    registers,
    collect() {
      this.set(lastFetchAtMs === undefined ? -1 : (performance.now() - lastFetchAtMs) / 1000);
    },
  });
  const failures = new Counter({ name: 'headroom_flags_fetch_failures_total', help: 'Failed fetches of flags from Unleash', registers });

  let lastInvalidPayload: string | undefined;
  const startTimeoutMs = options.startTimeoutMs ?? 5000;
  await new Promise<void>((resolve) => {
    const timer = setTimeout(() => {
      logger.warn({ url: options.url, startTimeoutMs, fetchFailures }, 'no flags from Unleash yet; going on without them until they arrive');
      resolve();
    }, startTimeoutMs);
    timer.unref();
    unleash.once(UnleashEvents.Synchronized, () => {
      clearTimeout(timer);
      resolve();
    });
  });

  return {
    names,
    get synchronized() {
      return synchronized;
    },
    get unreachable() {
      return unreachable;
    },
    routesToCandidate(integration, taskKey) {
      return unleash.isEnabled(names.candidateCluster, { properties: { [contextFieldNames.integration]: integration, [contextFieldNames.taskKey]: taskKey } });
    },
    trafficSplit() {
      const definition = unleash.getFeatureToggleDefinition(names.candidateCluster);
      return definition ? trafficSplitOf(definition) : undefined;
    },
    maxParallelism(cluster) {
      const variant = unleash.getVariant(names.maxParallelism, { properties: { [contextFieldNames.cluster]: cluster } });
      if (!variant.enabled || !variant.payload) return undefined;
      const payload = parseParallelismPayload(variant.payload.value);
      if (!payload && variant.payload.value !== lastInvalidPayload) {
        // Workers ask at every heartbeat: say it once per bad value.
        lastInvalidPayload = variant.payload.value;
        logger.warn(
          { flag: names.maxParallelism, cluster, payload: variant.payload.value },
          'ignoring a max-parallelism variant that is not {"maxParallelism": 1..10000}',
        );
      }
      return payload?.maxParallelism;
    },
    onChange(listener) {
      listeners.add(listener);
      return () => listeners.delete(listener);
    },
    close() {
      listeners.clear();
      unleash.destroy();
      // unleash-client 6: a fetch still in flight when destroy() runs can fail afterwards and emit
      // 'error' on its repository, whose listeners destroy() removed; an EventEmitter with no
      // 'error' listener throws, which ends the process as an unhandled rejection. Keep one.
      (unleash as unknown as { repository?: EventEmitter }).repository?.on(UnleashEvents.Error, () => undefined);
    },
  };
}
