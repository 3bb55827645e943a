import { z } from 'zod';
import { settings, userKeyedMap } from '@headroom/common';
import { clientTlsSchema, serverTlsSchema } from '@headroom/proto';
import { maxStartsPerSecond, minStartsPerSecond } from '@headroom/fleet';
import { policyNames } from './policies';

const shareAboveZero = () =>
  z.coerce
    .number({ error: 'expected a number above 0 and at most 1' })
    .gt(0, 'expected a number above 0 and at most 1')
    .max(1, 'expected a number above 0 and at most 1');

/** fleet's start rate bounds: a number of starts per second. */
const startsPerSecond = () =>
  z
    .number({ error: `expected maxStartsPerSecond to be a number of task starts per second from ${minStartsPerSecond} to ${maxStartsPerSecond}` })
    .min(minStartsPerSecond, `expected maxStartsPerSecond to be a number of task starts per second from ${minStartsPerSecond} to ${maxStartsPerSecond}`)
    .max(maxStartsPerSecond, `expected maxStartsPerSecond to be a number of task starts per second from ${minStartsPerSecond} to ${maxStartsPerSecond}`);

/** fleet's DefaultIntegrationLimit: a share of each cluster's capacity with a floor, or off; either with a start rate. */
const defaultIntegrationLimitSchema = z.union(
  [
    z.object({ shareOfCapacity: shareAboveZero(), minInFlight: settings.nonNegativeInt(1_000_000), maxStartsPerSecond: startsPerSecond().optional() }).strict(),
    z.object({ off: z.literal(true, { error: 'expected true' }), maxStartsPerSecond: startsPerSecond().optional() }).strict(),
  ],
  { error: 'expected {"shareOfCapacity": x, "minInFlight": n} or {"off": true}, either with "maxStartsPerSecond": r' },
);

const percent = z.coerce
  .number({ error: 'expected a percentage from 0 to 100' })
  .min(0, 'expected a percentage from 0 to 100')
  .max(100, 'expected a percentage from 0 to 100');

export const balancerOptionsSchema = z
  .object({
    /** Unique among live balancers; defaults to <hostname>-<pid>-<random>. */
    balancerId: z
      .string()
      .regex(/^[A-Za-z0-9._-]{1,128}$/, 'expected 1-128 characters of A-Z, a-z, 0-9, ".", "_", "-"')
      .optional(),
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
    /** Share of tasks (percent) routed to the candidate cluster, sticky per task key. @default 0 */
    candidatePercent: percent.default(0),
    /** The same per integration. @default {} */
    candidatePercentByIntegration: userKeyedMap(percent, { what: 'integration', key: settings.name() }).default({}),
    /** How a worker is chosen. @default 'least-loaded' */
    policy: z.enum(policyNames, { error: `expected one of ${policyNames.join(', ')}` }).default('least-loaded'),
    /** Tasks that may wait for a slot on this balancer, all clusters together. @default 10000 */
    maxQueuedTasks: settings.positiveInt(10_000_000).default(10_000),
    /**
     * Share of maxQueuedTasks the waiting tasks of one integration may take while it is at its
     * in-flight limit; more are refused with HR_ERR_INTEGRATION_AT_LIMIT (retryable). @default 0.5
     */
    maxQueuedShareAtLimit: shareAboveZero().default(0.5),
    /**
     * The in-flight limit, per cluster, of every integration with no limit of its own in the
     * ledger, and optionally its start rate (maxStartsPerSecond, per cluster: none by default);
     * every balancer and proxyless client of an installation should agree on it.
     * @default { shareOfCapacity: 0.5, minInFlight: 8 } (fleet's defaultIntegrationLimit)
     */
    defaultIntegrationLimit: defaultIntegrationLimitSchema.optional(),
    /** Payload bytes the waiting tasks may hold, all together. @default 268435456 (256 MiB) */
    maxQueuedBytes: settings.positiveInt(64 * 1024 * 1024 * 1024).default(256 * 1024 * 1024),
    /** @default 1048576 (1 MiB) */
    maxPayloadBytes: settings.positiveInt(64 * 1024 * 1024).default(1024 * 1024),
    /** Used when a task has no deadline. @default 30000 */
    defaultTaskTimeoutMs: settings.positiveInt(24 * 3600_000).default(30_000),
    /** Farthest deadline accepted. @default 3600000 */
    maxTaskTimeoutMs: settings.positiveInt(7 * 24 * 3600_000).default(3_600_000),
    /** Workers tried for one task when they refuse it or cannot be reached before it starts. @default 3 */
    maxDispatchAttempts: settings.positiveInt(20).default(3),
    /** A worker silent this long leaves the ledger. @default 3000 */
    heartbeatTimeoutMs: settings.positiveInt(600_000).default(3000),
    /** @default 1000 */
    sweepIntervalMs: settings.positiveInt(600_000).default(1000),
    /** @default 500 */
    queueRecheckIntervalMs: settings.positiveInt(60_000).default(500),
    /** @default 2000 */
    directoryRefreshIntervalMs: settings.positiveInt(600_000).default(2000),
    /** How often the balancer tells the control plane it is alive and catches up on the override. @default 1000 */
    balancerHeartbeatIntervalMs: settings.positiveInt(60_000).default(1000),
    /** Longest a rollback's acknowledgement waits for tasks already sent to candidate workers to start there. @default 1000 */
    rollbackSettleTimeoutMs: settings.positiveInt(60_000).default(1000),
    /** TLS for the gRPC server clients call; with clientCaFile, only clients with a certificate that CA signed (mutual TLS). */
    tls: serverTlsSchema.optional(),
    /** TLS towards the workers: the CA of their certificates, and this balancer's own certificate when they require one. */
    workerTls: clientTlsSchema.optional(),
    /**
     * How the balancer calls Worker/Execute: `http2`, gRPC framed by hand over one node:http2
     * session per worker (about half grpc-js's CPU per call, bench/RESULTS.md overhead), or
     * `grpc-js`, one grpc-js channel per worker. Same outcomes either way. @default http2
     */
    workerTransport: z.enum(['http2', 'grpc-js'], { error: 'expected http2 or grpc-js' }).default('http2'),
    /**
     * How the balancer serves Balancer/Submit and grpc.health.v1 to its clients: `grpc-js`, a
     * grpc-js Server, or `http2`, gRPC framed by hand on a node:http2 server (h2-server.ts: the
     * same answers, statuses, metadata and TLS, at less CPU per call). @default grpc-js
     */
    serverTransport: z.enum(['grpc-js', 'http2'], { error: 'expected grpc-js or http2' }).default('grpc-js'),
    /**
     * Longest a new connection to a worker may take (TCP, and TLS when on) before the calls
     * waiting on it count the worker unreachable and go to another: an address that drops
     * packets would otherwise hold each task until its deadline. @default 3000
     */
    workerConnectTimeoutMs: settings.positiveInt(600_000).default(3000),
    /** Longest a worker, once connected, may take to send its first bytes (its HTTP/2 settings); a worker that accepts and stays silent counts unreachable after it. @default 2000 */
    workerFirstByteTimeoutMs: settings.positiveInt(600_000).default(2000),
    /** @default 4096 */
    maxWorkerChannels: settings.positiveInt(1_000_000).default(4096),
    /** Consecutive failures to connect to a worker after which it is marked unreachable in the ledger (every balancer skips it); 0 never marks. @default 3 */
    ejectAfterConnectFailures: settings.nonNegativeInt(1000).default(3),
    /** How long a worker stays marked the first time, before a health check decides; doubled at each ejection in a row. @default 10000 */
    ejectionBackoffMs: settings.positiveInt(3_600_000).default(10_000),
    /** The longest that doubling goes. @default 300000 */
    maxEjectionBackoffMs: settings.positiveInt(24 * 3600_000).default(300_000),
    /** Longest the health check of a marked worker may take (grpc.health.v1 Check). @default 1000 */
    healthCheckTimeoutMs: settings.positiveInt(60_000).default(1000),
    /** Most workers of a cluster ejected at once, for either reason, as a share of its workers (at least one): a balancer whose own network fails does not empty the cluster. @default 0.5 */
    maxEjectedShare: settings.share().default(0.5),
    /**
     * Ejection by failure rate: tasks of one integration a worker must have had within
     * ejectFailureWindowMs, and the other workers together, before its failures are compared
     * with theirs; 0 never ejects for failures. @default 10
     */
    ejectFailureMinTasks: settings.nonNegativeInt(1_000_000).default(10),
    /** How far back a worker's task outcomes count for ejection by failure rate. @default 10000 */
    ejectFailureWindowMs: settings.positiveInt(600_000).default(10_000),
    /**
     * A worker is ejected as failing when its share of failed tasks on an integration is at least
     * this much above the other workers' share on the same integration, and their share of tasks
     * done at least this much above its own (an outage that fails on every worker ejects none).
     * @default 0.5
     */
    ejectFailureShareAbovePeers: z.coerce
      .number({ error: 'expected a number above 0 and at most 1' })
      .gt(0, 'expected a number above 0 and at most 1')
      .max(1, 'expected a number above 0 and at most 1')
      .default(0.5),
  })
  .strict()
  .refine((c) => c.defaultTaskTimeoutMs <= c.maxTaskTimeoutMs, {
    message: 'defaultTaskTimeoutMs must not exceed maxTaskTimeoutMs',
    path: ['defaultTaskTimeoutMs'],
  })
  .refine((c) => c.maxPayloadBytes <= c.maxQueuedBytes, {
    message: 'maxPayloadBytes must not exceed maxQueuedBytes (a task could never wait)',
    path: ['maxPayloadBytes'],
  })
  .refine((c) => c.ejectionBackoffMs <= c.maxEjectionBackoffMs, {
    message: 'ejectionBackoffMs must not exceed maxEjectionBackoffMs',
    path: ['ejectionBackoffMs'],
  });

export type BalancerOptions = z.input<typeof balancerOptionsSchema>;
export type BalancerConfig = z.output<typeof balancerOptionsSchema>;
