import { z } from 'zod';
import { settings } from '@headroom/common';
import { defaultFlagNames, flagNameSetting } from '@headroom/flags';
import { clientTlsSchema } from '@headroom/proto';

export const roles = ['viewer', 'operator'] as const;
export type Role = (typeof roles)[number];

export const apiTokenSchema = z
  .object({
    /** Recorded in the audit log as the actor. */
    name: z.string().regex(/^[A-Za-z0-9._@-]{1,64}$/, 'expected 1-64 characters of A-Z, a-z, 0-9, ".", "_", "@", "-"'),
    role: z.enum(roles, { error: `expected one of ${roles.join(', ')}` }),
    token: z.string().min(16, 'expected at least 16 characters').max(512, 'expected at most 512 characters'),
  })
  .strict();
export type ApiToken = z.output<typeof apiTokenSchema>;

const databaseUrlWords = 'expected a PostgreSQL URL such as postgres://user:password@host:5432/database';

/** Where the control plane keeps its record: a schema of its own, never Unleash's tables. */
export const databaseSchema = z
  .object({
    /** postgres://user:password@host:5432/database (also ?sslmode=...). */
    url: z.string({ error: databaseUrlWords }).refine((value) => {
      try {
        const url = new URL(value);
        return (url.protocol === 'postgres:' || url.protocol === 'postgresql:') && url.hostname !== '';
      } catch {
        return false;
      }
    }, databaseUrlWords),
    /** Created when missing; its tables are migrated at start. Never `public` (where Unleash keeps its tables). @default 'headroom' */
    schema: z
      .string()
      .regex(/^[a-z_][a-z0-9_]{0,62}$/, 'expected 1-63 characters of a-z, 0-9, "_", not starting with a digit')
      .refine((name) => name !== 'public' && !name.startsWith('pg_'), 'expected a schema of its own: not public (Unleash keeps its tables there) nor pg_*')
      .default('headroom'),
    /** Connections kept open. @default 5 */
    poolMax: settings.positiveInt(100).default(5),
    /** Longest a connection attempt waits. @default 2000 */
    connectTimeoutMs: settings.positiveInt(60_000).default(2000),
    /** Longest a statement runs (a change's lock wait excepted: changeLockWaitMs). @default 5000 */
    statementTimeoutMs: settings.positiveInt(600_000).default(5000),
  })
  .strict();
export type DatabaseOptions = z.input<typeof databaseSchema>;
export type DatabaseConfig = z.output<typeof databaseSchema>;

export const controlPlaneOptionsSchema = z
  .object({
    /** @default '127.0.0.1' */
    host: z.string().min(1).default('127.0.0.1'),
    /** 0 picks a free port. @default 0 */
    port: settings.nonNegativeInt(65_535).default(0),
    /** @default { baseline: 'baseline', candidate: 'candidate' } */
    clusters: z
      .object({ baseline: settings.name().default('baseline'), candidate: settings.name().default('candidate') })
      .strict()
      .refine((c) => c.baseline !== c.candidate, 'baseline and candidate must be different clusters')
      .default({ baseline: 'baseline', candidate: 'candidate' }),
    /** Integrations with a traffic share of their own; the rest follow the default. */
    integrations: z.array(settings.name()).max(1000, 'expected at most 1000 integrations').default([]),
    unleash: z
      .object({
        url: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL such as http://127.0.0.1:4242' }),
        /** An admin token (or a personal access / service account token that may change flags). */
        adminToken: z.string().min(1, 'expected the admin token'),
        /** @default 'development' */
        environment: z
          .string()
          .regex(/^[A-Za-z0-9._-]{1,100}$/)
          .default('development'),
        /** @default 'default' */
        project: z
          .string()
          .regex(/^[A-Za-z0-9._-]{1,100}$/)
          .default('default'),
        candidateFlag: flagNameSetting().default(defaultFlagNames.candidateCluster),
        parallelismFlag: flagNameSetting().default(defaultFlagNames.maxParallelism),
        /** Per Admin API request. @default 5000 */
        timeoutMs: settings.positiveInt(120_000).default(5000),
      })
      .strict(),
    /** Who may call the API. Viewers read; operators also change. */
    tokens: z.array(apiTokenSchema).min(1, 'expected at least one API token').max(1000),
    /** Longest a rollback waits for every live balancer's acknowledgement. @default 2000 */
    ackTimeoutMs: settings.positiveInt(60_000).default(2000),
    /** A balancer silent this long is not waited for. @default 3000 */
    balancerLiveWithinMs: settings.positiveInt(600_000).default(3000),
    /** PostgreSQL: the audit log, and the lock that lets one control plane at a time change Unleash. */
    database: databaseSchema,
    /** Audit entries older than this many days are deleted (checked at start and every hour). @default 365 */
    auditRetentionDays: settings.positiveInt(36_500).default(365),
    /**
     * Audit entries of rollbacks, resumes, drains and profiles kept in memory while PostgreSQL cannot
     * be reached, written once it is back; past this many, new ones are dropped (logged at error
     * level, counted in headroom_control_audit_outbox_dropped_total). @default 1000
     */
    auditOutboxMaxEntries: settings.positiveInt(100_000).default(1000),
    /** Longest a change waits for another control plane's change to Unleash to end (then HR_ERR_BUSY). @default 15000 */
    changeLockWaitMs: settings.positiveInt(600_000).default(15_000),
    /** @default 100 */
    maxEventStreams: settings.positiveInt(10_000).default(100),
    /** How often live figures go to event streams. @default 2000 */
    figuresIntervalMs: settings.positiveInt(600_000).default(2000),
    /** A latency slot is charted once this long past its end: workers add their counts every 5 s by default. @default 6000 */
    latencySettleMs: settings.positiveInt(600_000).default(6000),
    /** TLS towards the workers (CPU profiles): the CA of their certificates, and a certificate of its own when they require one. */
    workerTls: clientTlsSchema.optional(),
    /** The built admin UI (ui/dist/app), served at /; none is served when absent. */
    uiDirectory: z.string().min(1).optional(),
    /** How often the override is checked (and rebuilt from Unleash after Redis lost it). @default 2000 */
    overrideCheckIntervalMs: settings.positiveInt(600_000).default(2000),
    /** How often the ledger's integration limits are compared with PostgreSQL's (and re-applied). @default 5000 */
    limitsCheckIntervalMs: settings.positiveInt(600_000).default(5000),
    /** How often the auto limiter reads the latency of integrations in auto mode and moves their limits. @default 5000 */
    autoLimitTickMs: settings.positiveInt(60_000).default(5000),
    /** How often the limits' time series samples each integration's limit, in flight and waiting (a slot is 10 s). @default 5000 */
    limitSeriesSampleMs: settings.positiveInt(60_000).default(5000),
    /** Largest request body. @default 65536 */
    maxBodyBytes: settings.positiveInt(16 * 1024 * 1024).default(64 * 1024),
    /** How long a CPU profile is kept. @default 3600000 (1 h) */
    profileTtlMs: settings.positiveInt(7 * 24 * 3600_000).default(3_600_000),
    /** CPU profiles kept (oldest dropped); each is at most 16 MiB of JSON, stored gzipped. @default 20 */
    maxProfilesKept: settings.positiveInt(1000).default(20),
    /** How often the rollout autopilot reads the gates and acts. @default 2000 */
    autopilotTickMs: settings.positiveInt(60_000).default(2000),
    /** How long the autopilot's lease outlives its holder's last renewal: another control plane takes a rollout over after this. @default 10000 */
    autopilotLeaseMs: settings.positiveInt(600_000).default(10_000),
  })
  .strict()
  .refine((c) => new Set(c.tokens.map((t) => t.token)).size === c.tokens.length, { message: 'two API tokens have the same secret', path: ['tokens'] })
  .refine((c) => new Set(c.tokens.map((t) => t.name)).size === c.tokens.length, { message: 'two API tokens have the same name', path: ['tokens'] })
  .refine((c) => c.autopilotLeaseMs > 2 * c.autopilotTickMs, {
    message: 'expected more than twice autopilotTickMs: the autopilot renews its lease once a tick',
    path: ['autopilotLeaseMs'],
  });

export type ControlPlaneOptions = z.input<typeof controlPlaneOptionsSchema>;
export type ControlPlaneConfig = z.output<typeof controlPlaneOptionsSchema>;
