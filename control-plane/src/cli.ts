#!/usr/bin/env node
/**
 * headroom-control-plane: the REST API (/api/v1) over Unleash and the ledger.
 *   UNLEASH_ADMIN_TOKEN=... HEADROOM_OPERATOR_TOKENS=ops=<secret> \
 *   node control-plane/dist/src/cli.js --port 8080 --unleash-url http://127.0.0.1:4242 --integrations bank-a,bank-b
 * Every flag can also be set by env (listed by --help); flags win.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { z } from 'zod';
import { Registry } from 'prom-client';
import {
  ConfigError,
  withoutPassword,
  createLogger,
  readOptions,
  registerProcessMetrics,
  settings,
  stopSignal,
  usageText,
  type OptionSpec,
  clusterOptionSpecs,
} from '@headroom/common';
import { connectRedis, waitUntilReady } from '@headroom/fleet';
import { workerTlsFromOptions, workerTlsOptionSpecs, workerTlsOptionsShape } from '@headroom/proto';
import { createControlPlane } from './app';
import { apiTokenSchema, controlPlaneOptionsSchema, databaseSchema, type ApiToken } from './config';

const optionSpecs: readonly OptionSpec[] = [
  { key: 'host', flag: 'host', env: 'HEADROOM_HOST', valueName: 'HOST', description: 'HTTP interface' },
  { key: 'port', flag: 'port', env: 'HEADROOM_PORT', valueName: 'PORT', description: 'HTTP port (0: any free port)' },
  {
    key: 'integrations',
    flag: 'integrations',
    env: 'HEADROOM_INTEGRATIONS',
    valueName: 'A,B,...',
    description: 'integrations with a traffic share of their own; with none, only the default share',
  },
  ...clusterOptionSpecs,
  { key: 'unleashUrl', flag: 'unleash-url', env: 'UNLEASH_URL', valueName: 'URL', description: 'Unleash server, e.g. http://127.0.0.1:4242 (required)' },
  {
    key: 'unleashAdminToken',
    flag: 'unleash-admin-token',
    env: 'UNLEASH_ADMIN_TOKEN',
    valueName: 'TOKEN',
    description: 'admin (or service account) token of that server (required)',
    secret: true,
  },
  { key: 'unleashEnvironment', flag: 'unleash-environment', env: 'UNLEASH_ENVIRONMENT', valueName: 'NAME', description: 'the environment the clients read' },
  { key: 'unleashProject', flag: 'unleash-project', env: 'UNLEASH_PROJECT', valueName: 'NAME', description: 'the Unleash project that holds the flags' },
  { key: 'candidateFlag', flag: 'candidate-flag', env: 'HEADROOM_CANDIDATE_FLAG', valueName: 'NAME', description: 'default headroom.candidate-cluster' },
  { key: 'parallelismFlag', flag: 'parallelism-flag', env: 'HEADROOM_PARALLELISM_FLAG', valueName: 'NAME', description: 'default headroom.max-parallelism' },
  {
    key: 'operatorTokens',
    flag: 'operator-tokens',
    env: 'HEADROOM_OPERATOR_TOKENS',
    valueName: 'NAME=TOKEN,...',
    description: 'API tokens that may change things',
    secret: true,
  },
  {
    key: 'viewerTokens',
    flag: 'viewer-tokens',
    env: 'HEADROOM_VIEWER_TOKENS',
    valueName: 'NAME=TOKEN,...',
    description: 'API tokens that may only read',
    secret: true,
  },
  {
    key: 'tokensFile',
    flag: 'tokens-file',
    env: 'HEADROOM_TOKENS_FILE',
    valueName: 'PATH',
    description: 'JSON [{"name","role":"viewer"|"operator","token"}], added to the above',
  },
  {
    key: 'ackTimeoutMs',
    flag: 'ack-timeout-ms',
    env: 'HEADROOM_ACK_TIMEOUT_MS',
    valueName: 'MS',
    description: 'longest a rollback waits for acknowledgements',
  },
  {
    key: 'uiDir',
    flag: 'ui-dir',
    env: 'HEADROOM_UI_DIR',
    valueName: 'PATH|none',
    description: 'the built admin UI served at / (default ui/dist/app of this install, when built; none: no UI)',
  },
  ...workerTlsOptionSpecs,
  {
    key: 'redisUrl',
    flag: 'redis-url',
    env: 'REDIS_URL',
    valueName: 'URL',
    description: 'the ledger: redis://host:port, redis+sentinel://host:port,host:port/<primary name>, or redis+cluster://host:port,host:port',
  },
  { key: 'keyPrefix', flag: 'key-prefix', env: 'HEADROOM_KEY_PREFIX', valueName: 'PREFIX', description: 'ledger key prefix' },
  {
    key: 'databaseUrl',
    flag: 'database-url',
    env: 'HEADROOM_DATABASE_URL',
    valueName: 'URL',
    description: 'PostgreSQL for the audit log and the lock on changes: postgres://user:password@host:5432/database (required)',
  },
  {
    key: 'databaseSchema',
    flag: 'database-schema',
    env: 'HEADROOM_DATABASE_SCHEMA',
    valueName: 'NAME',
    description: 'schema of its own there, created and migrated at start; never public',
  },
  {
    key: 'auditRetentionDays',
    flag: 'audit-retention-days',
    env: 'HEADROOM_AUDIT_RETENTION_DAYS',
    valueName: 'DAYS',
    description: 'audit entries older than this are deleted',
  },
  {
    key: 'auditOutboxMaxEntries',
    flag: 'audit-outbox-max-entries',
    env: 'HEADROOM_AUDIT_OUTBOX_MAX_ENTRIES',
    valueName: 'N',
    description: 'audit entries of rollbacks etc. kept in memory while PostgreSQL is away (more are dropped and logged)',
  },
  {
    key: 'changeLockWaitMs',
    flag: 'change-lock-wait-ms',
    env: 'HEADROOM_CHANGE_LOCK_WAIT_MS',
    valueName: 'MS',
    description: "longest a change waits for another control plane's change (then HR_ERR_BUSY)",
  },
  {
    key: 'latencySettleMs',
    flag: 'latency-settle-ms',
    env: 'HEADROOM_LATENCY_SETTLE_MS',
    valueName: 'MS',
    description:
      "how long after a latency slot ends the workers' summaries of it are complete: charts and rollout gates read up to this long ago (keep it above the workers' --latency-report-interval-ms)",
  },
  {
    key: 'autopilotTickMs',
    flag: 'autopilot-tick-ms',
    env: 'HEADROOM_AUTOPILOT_TICK_MS',
    valueName: 'MS',
    description: 'how often the rollout autopilot reads the gates and acts',
  },
  {
    key: 'autoLimitTickMs',
    flag: 'auto-limit-tick-ms',
    env: 'HEADROOM_AUTO_LIMIT_TICK_MS',
    valueName: 'MS',
    description: 'how often the auto limiter reads the run time of the integrations in auto mode and moves their limits',
  },
  {
    key: 'autopilotLeaseMs',
    flag: 'autopilot-lease-ms',
    env: 'HEADROOM_AUTOPILOT_LEASE_MS',
    valueName: 'MS',
    description:
      "how long the autopilot's lease outlives its holder's last renewal: another control plane takes a rollout over after this (more than twice --autopilot-tick-ms)",
  },
];

/** "name=token,name=token" */
const tokenList = (role: ApiToken['role']) =>
  z.string().transform((value, ctx) => {
    const tokens: ApiToken[] = [];
    for (const pair of value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean)) {
      const at = pair.indexOf('=');
      const parsed = apiTokenSchema.safeParse({ name: pair.slice(0, at), role, token: at < 0 ? '' : pair.slice(at + 1) });
      if (at < 1 || !parsed.success) {
        ctx.addIssue({
          code: 'custom',
          message: `expected NAME=TOKEN pairs separated by commas, names of A-Z a-z 0-9 . _ @ -, tokens of at least 16 characters (problem near "${pair.slice(0, Math.max(at, 0))}")`,
        });
        return z.NEVER;
      }
      tokens.push(parsed.data);
    }
    return tokens;
  });

const cliSchema = z
  .object({
    host: z.string().min(1).default('127.0.0.1'),
    port: settings.nonNegativeInt(65_535).default(8080),
    integrations: z
      .string()
      .transform((value) =>
        value
          .split(',')
          .map((s) => s.trim())
          .filter(Boolean),
      )
      .pipe(z.array(settings.name()))
      .default([]),
    baselineCluster: settings.name().default('baseline'),
    candidateCluster: settings.name().default('candidate'),
    unleashUrl: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL such as http://127.0.0.1:4242' }),
    unleashAdminToken: z.string().min(1),
    unleashEnvironment: z.string().default('development'),
    unleashProject: z.string().default('default'),
    candidateFlag: z.string().optional(),
    parallelismFlag: z.string().optional(),
    operatorTokens: tokenList('operator').optional(),
    viewerTokens: tokenList('viewer').optional(),
    tokensFile: z.string().optional(),
    ackTimeoutMs: settings.positiveInt(60_000).default(2000),
    uiDir: z.string().min(1).optional(),
    ...workerTlsOptionsShape,
    redisUrl: settings.redisUrl().default('redis://127.0.0.1:6379'),
    keyPrefix: settings.keyPrefix(),
    databaseUrl: databaseSchema.shape.url,
    databaseSchema: databaseSchema.shape.schema,
    auditRetentionDays: controlPlaneOptionsSchema.shape.auditRetentionDays,
    auditOutboxMaxEntries: controlPlaneOptionsSchema.shape.auditOutboxMaxEntries,
    changeLockWaitMs: controlPlaneOptionsSchema.shape.changeLockWaitMs,
    latencySettleMs: controlPlaneOptionsSchema.shape.latencySettleMs,
    autopilotTickMs: controlPlaneOptionsSchema.shape.autopilotTickMs,
    autopilotLeaseMs: controlPlaneOptionsSchema.shape.autopilotLeaseMs,
    autoLimitTickMs: controlPlaneOptionsSchema.shape.autoLimitTickMs,
  })
  .strict();

function readTokensFile(path: string): ApiToken[] {
  let raw: unknown;
  try {
    raw = JSON.parse(fs.readFileSync(path, 'utf8'));
  } catch (error) {
    throw new ConfigError(`--tokens-file ${path}: ${error instanceof Error ? error.message : String(error)}`);
  }
  const parsed = z.array(apiTokenSchema).safeParse(raw);
  if (!parsed.success) {
    throw new ConfigError(`--tokens-file ${path}: ${parsed.error.issues.map((i) => `[${i.path.join('.')}] ${i.message}`).join('; ')}`);
  }
  return parsed.data;
}

/**
 * Where the built admin UI is looked for: inside the installed package (`npm pack` copies it
 * there, scripts/pack-ui.mjs), then ui/dist/app next to this package (the repository or image).
 */
const defaultUiDirectories = [path.resolve(__dirname, '..', '..', 'ui-dist'), path.resolve(__dirname, '..', '..', '..', 'ui', 'dist', 'app')];

function builtUi(): string | undefined {
  return defaultUiDirectories.find((directory) => fs.existsSync(path.join(directory, 'index.html')));
}

async function main(): Promise<void> {
  const parsed = readOptions(cliSchema, optionSpecs, process.argv.slice(2), process.env);
  if (parsed.help) {
    process.stdout.write(
      `${usageText('Usage: headroom-control-plane --unleash-url URL --unleash-admin-token TOKEN --operator-tokens NAME=TOKEN [options]', optionSpecs, cliSchema)}\n`,
    );
    return;
  }
  const stopRequested = stopSignal();
  const c = parsed.config;
  const tokens = [...(c.operatorTokens ?? []), ...(c.viewerTokens ?? []), ...(c.tokensFile ? readTokensFile(c.tokensFile) : [])];
  if (tokens.length === 0)
    throw new ConfigError('--operator-tokens (env HEADROOM_OPERATOR_TOKENS): at least one API token is required (or --viewer-tokens, --tokens-file)');

  const workerTls = workerTlsFromOptions(c);
  const logger = createLogger('headroom-control-plane');
  const uiDirectory = c.uiDir === 'none' ? undefined : (c.uiDir ?? builtUi());
  if (c.uiDir === undefined && uiDirectory === undefined)
    logger.warn({ looked: defaultUiDirectories }, 'no built admin UI found (npm run build makes it); serving the API only');
  const redis = connectRedis(c.redisUrl, {}, logger);
  const subscriber = connectRedis(c.redisUrl, { enableOfflineQueue: true, enableAutoPipelining: false }, logger);
  await waitUntilReady(redis, c.redisUrl, undefined, '--redis-url');
  const registry = new Registry();
  registerProcessMetrics(registry);
  const controlPlane = await createControlPlane(
    {
      host: c.host,
      port: c.port,
      clusters: { baseline: c.baselineCluster, candidate: c.candidateCluster },
      integrations: c.integrations,
      unleash: {
        url: c.unleashUrl,
        adminToken: c.unleashAdminToken,
        environment: c.unleashEnvironment,
        project: c.unleashProject,
        ...(c.candidateFlag ? { candidateFlag: c.candidateFlag } : {}),
        ...(c.parallelismFlag ? { parallelismFlag: c.parallelismFlag } : {}),
      },
      tokens,
      ackTimeoutMs: c.ackTimeoutMs,
      database: { url: c.databaseUrl, schema: c.databaseSchema },
      auditRetentionDays: c.auditRetentionDays,
      auditOutboxMaxEntries: c.auditOutboxMaxEntries,
      changeLockWaitMs: c.changeLockWaitMs,
      latencySettleMs: c.latencySettleMs,
      autopilotTickMs: c.autopilotTickMs,
      autoLimitTickMs: c.autoLimitTickMs,
      autopilotLeaseMs: c.autopilotLeaseMs,
      ...(uiDirectory ? { uiDirectory } : {}),
      ...(workerTls ? { workerTls } : {}),
    },
    { redis, subscriber, keyPrefix: c.keyPrefix, logger, registry },
  );
  process.stdout.write(`${JSON.stringify({ event: 'ready', url: controlPlane.url, ui: uiDirectory !== undefined })}\n`);
  void stopRequested.then(async (signal) => {
    logger.info({ signal }, 'stopping');
    await controlPlane.close();
    redis.disconnect();
    subscriber.disconnect();
    process.exit(0);
  });
}

main().catch((error: unknown) => {
  process.stderr.write(`headroom-control-plane: ${withoutPassword(error instanceof Error ? error.message : String(error))}\n`);
  process.exit(error instanceof ConfigError ? 2 : 1);
});
