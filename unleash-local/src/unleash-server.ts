import { randomBytes } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { silentLogger, type Logger } from '@headroom/common';

export interface UnleashDatabase {
  host: string;
  port: number;
  user: string;
  password?: string;
  database: string;
  /** Unleash creates its tables here; the schema must exist. */
  schema: string;
}

export interface UnleashServerOptions {
  database: UnleashDatabase;
  /** @default '127.0.0.1' */
  host?: string;
  /** 0 picks a free port. @default 0 */
  port?: number;
  /** The environment client tokens are made for. @default 'development' */
  environment?: string;
  /** Secrets of the tokens made at start (admin tokens can only be made then). Random by default. */
  adminToken?: string;
  clientToken?: string;
  logger?: Logger;
}

export interface RunningUnleash {
  /** Base URL, e.g. http://127.0.0.1:4242 (the client API is at <url>/api). */
  readonly url: string;
  readonly port: number;
  readonly adminToken: string;
  readonly clientToken: string;
  readonly environment: string;
  stop(): Promise<void>;
}

interface UnleashModule {
  start(options: Record<string, unknown>): Promise<{ server: { address(): AddressInfo | string | null }; stop(): Promise<void> }>;
}

/**
 * Starts a real Unleash server in this process. The machine has no internet: the version check
 * and telemetry are off. Tokens are made at start, so no login is ever needed.
 */
export async function startUnleashServer(options: UnleashServerOptions): Promise<RunningUnleash> {
  process.env.SEND_TELEMETRY = 'false';
  const environment = options.environment ?? 'development';
  const adminToken = options.adminToken ?? `*:*.${randomBytes(16).toString('hex')}`;
  const clientToken = options.clientToken ?? `default:${environment}.${randomBytes(16).toString('hex')}`;
  const logger = options.logger ?? silentLogger;
  // unleash-server is an ES module: load it with a real dynamic import.
  const unleash = (await import('unleash-server')) as unknown as UnleashModule;
  const forward =
    (level: 'debug' | 'info' | 'warn' | 'error') =>
    (message: unknown, ...rest: unknown[]) =>
      logger[level]({ rest }, String(message));
  const instance = await unleash.start({
    db: { ...options.database, password: options.database.password ?? '', ssl: false, pool: { min: 0, max: 6 } },
    // serverMetrics off: Unleash would register them on prom-client's global registry, which
    // allows one Unleash per process (tests start several). gracefulShutdownEnable off: Unleash
    // would take over SIGINT/SIGTERM and exit the host process; the host stops it instead.
    server: { host: options.host ?? '127.0.0.1', port: options.port ?? 0, serverMetrics: false, gracefulShutdownEnable: false },
    versionCheck: { enable: false },
    getLogger: () => ({ debug: () => undefined, info: forward('debug'), warn: forward('warn'), error: forward('error'), fatal: forward('error') }),
    authentication: {
      initApiTokens: [
        { type: 'admin', secret: adminToken, tokenName: 'headroom-admin', projects: ['*'], environment: '*' },
        { type: 'client', secret: clientToken, tokenName: 'headroom-client', projects: ['default'], environment },
      ],
    },
  });
  const address = instance.server.address();
  if (!address || typeof address === 'string') throw new Error('the Unleash server did not report a TCP address');
  const host = options.host ?? '127.0.0.1';
  let stopped: Promise<void> | undefined;
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${address.port}`,
    port: address.port,
    adminToken,
    clientToken,
    environment,
    stop: () => (stopped ??= instance.stop()),
  };
}
