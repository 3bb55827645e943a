import { z } from 'zod';
import { ConfigError, parseConfig, settings } from '@headroom/common';
import { ledgerDefaults } from '@headroom/fleet';
import { balancerOptionsSchema } from '@headroom/balancer';
import { retryPolicySchema } from '../retry-policy';

/** The ledger's settings (@headroom/fleet LedgerOptions); every process of an installation must agree on them. */
const ledgerOptionsSchema = z
  .object({
    /** @default 'hr' */
    keyPrefix: settings.keyPrefix(),
    /** How long this client counts as waiting in the ledger after it last said so. @default 3000 */
    waiterTtlMs: settings.positiveInt(600_000).default(ledgerDefaults.waiterTtlMs),
    /** Share of each cluster's capacity kept for user-present tasks (0..1). @default 0.1 */
    keptForUserPresentShare: settings.share().default(ledgerDefaults.keptForUserPresentShare),
    /** At most one ledger call per cluster in this window while busy (0: each at once). @default 2 */
    batchWindowMs: settings.nonNegativeInt(1_000).default(ledgerDefaults.batchWindowMs),
    /** @default 1000 */
    workersAtFullHeartbeatRate: settings.positiveInt(1_000_000).default(ledgerDefaults.workersAtFullHeartbeatRate),
  })
  .strict();

/**
 * The proxyless client's options: the balancer's own schema (clusters, split, policy, queue
 * limits, task limits, maxDispatchAttempts, worker TLS, ejection, timings: the same names,
 * defaults and checks), plus the ledger's settings and the client's retry and in-flight limits.
 * `balancerId` is the id it registers under in the control plane's balancer register (default
 * proxyless-<hostname>-<pid>-<random>). The balancer's server settings are refused (see below).
 */
export const proxylessOptionsSchema = balancerOptionsSchema.extend({
  ledger: ledgerOptionsSchema.prefault({}),
  retry: retryPolicySchema.prefault({}),
  /** Submits under way at most; more are refused at once with ClientOverloadedError. @default 10000 */
  maxInFlight: settings.positiveInt(1_000_000).default(10_000),
});

/** The balancer's settings for its gRPC server: a proxyless client serves nothing. */
const serverSettings = ['host', 'port', 'tls'] as const;

export type ProxylessClientOptions = Omit<z.input<typeof proxylessOptionsSchema>, (typeof serverSettings)[number]>;
export type ProxylessClientConfig = Omit<z.output<typeof proxylessOptionsSchema>, (typeof serverSettings)[number]>;

/** Validates and fills the options, or throws one ConfigError naming every bad setting (as parseConfig does). */
export function parseProxylessOptions(options: ProxylessClientOptions): ProxylessClientConfig {
  const what = 'proxyless client options';
  const given = typeof options === 'object' && options !== null ? (options as Record<string, unknown>) : {};
  const misplaced = serverSettings.filter((name) => given[name] !== undefined);
  if (misplaced.length > 0) {
    const lines = misplaced.map(
      (name) =>
        `  ${name}: got ${JSON.stringify(given[name])}, does not apply to a proxyless client: it serves no gRPC${name === 'tls' ? ' (TLS towards the workers is workerTls)' : ''}`,
    );
    throw new ConfigError(`invalid ${what}:\n${lines.join('\n')}`);
  }
  const { host: _host, port: _port, tls: _tls, ...config } = parseConfig(what, proxylessOptionsSchema, options);
  return config;
}
