import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import express, { type NextFunction, type Request, type Response } from 'express';
import helmet from 'helmet';
import type { RedisConnection } from '@headroom/fleet';
import { Registry } from 'prom-client';
import { channelSecurity } from '@headroom/proto';
import { HeadroomError, isHeadroomError, once, parseConfig, silentLogger, type Logger } from '@headroom/common';
import { Ledger, OverrideStore, WorkerReports, ledgerErrorCodes, readBalancerErrors, waitUntilReady } from '@headroom/fleet';
import { openApiDocument } from './api/openapi';
import { apiRoutes } from './api/routes';
import { requestSchemas } from './api/schemas';
import { AuditLog } from './audit';
import { TokenAuth } from './auth';
import { controlPlaneOptionsSchema, type ControlPlaneOptions } from './config';
import { ControlService } from './control-service';
import { apiErrorCodes, httpStatusOf, InvalidRequestError, UnleashFailedError } from './errors';
import { EventHub } from './event-hub';
import { balancerErrorWindowMs, FleetView } from './fleet-view';
import { ProfileService } from './profiles/profile-service';
import { latencySeries, latencyView } from './latency-view';
import { integrationHealth } from './integration-health';
import { adminUi } from './admin-ui';
import { createControlMetrics, registerIntegrationTroubleGauges, registerLedgerDriftGauge } from './metrics';
import { OverrideControl } from './override-control';
import { AuditStore } from './record/audit-store';
import { ChangeLock } from './record/change-lock';
import { importLegacyAuditStream } from './record/legacy-import';
import { openDatabase } from './record/database';
import { migrate } from './record/migrations';
import { UnleashAdmin } from './unleash/admin-client';
import { ParallelismFlag } from './unleash/parallelism-flag';
import { TrafficFlag } from './unleash/traffic-flag';
import { Autopilot } from './rollouts/autopilot';
import { RolloutService } from './rollouts/rollout-service';
import { RolloutStore } from './rollouts/rollout-store';
import { LimitService } from './limits/limit-service';
import { AutoLimiter, defaultAutoLimiterOptions } from './limits/auto-limiter';
import { LimitStore } from './limits/limit-store';
import { LimitSeries, defaultLimitSeriesOptions } from './limits/limit-series';

export interface ControlPlaneDependencies {
  /** Not closed by the control plane. */
  redis: RedisConnection;
  /** A second connection for pub/sub only (not closed by the control plane). */
  subscriber: RedisConnection;
  /** The ledger's key prefix. @default 'hr' */
  keyPrefix?: string;
  logger?: Logger;
  registry?: Registry;
}

export interface ControlPlane {
  /** http://host:port */
  readonly url: string;
  readonly port: number;
  readonly registry: Registry;
  readonly service: ControlService;
  /** The audit log (PostgreSQL, with its outbox). */
  readonly audit: AuditLog;
  close(): Promise<void>;
}

/** GET /api/v1/readyz's answer (HTTP 200 when `ready`, else 503): what the control plane reaches. */
export interface ReadinessView {
  ready: boolean;
  redis: boolean;
  unleash: boolean;
  database: boolean;
  /** Its flags exist in Unleash. */
  flags: boolean;
  /** Audit entries waiting for PostgreSQL. */
  auditOutbox: number;
}

/**
 * Starts the control plane: the audit schema is migrated (PostgreSQL must answer), flags exist in
 * Unleash (or are being created) and the API listens when this resolves.
 */
export async function createControlPlane(options: ControlPlaneOptions, deps: ControlPlaneDependencies): Promise<ControlPlane> {
  const config = parseConfig('control plane options', controlPlaneOptionsSchema, options);
  // Checked first: a wrong directory stops the start before anything runs.
  const ui = config.uiDirectory ? adminUi(config.uiDirectory) : undefined;
  const workerSecurity = channelSecurity(config.workerTls, 'workerTls');
  const logger = deps.logger ?? silentLogger;
  const keyPrefix = deps.keyPrefix ?? 'hr';
  const registry = deps.registry ?? new Registry();
  const metrics = createControlMetrics(registry);
  const clusters = [config.clusters.baseline, config.clusters.candidate];
  const admin = new UnleashAdmin({ ...config.unleash });
  const traffic = new TrafficFlag(admin, config.unleash.candidateFlag, config.integrations);
  const parallelism = new ParallelismFlag(admin, config.unleash.parallelismFlag, clusters);
  const override = new OverrideControl(new OverrideStore(deps.redis, keyPrefix), deps.subscriber, config);
  const database = openDatabase(config.database, logger);
  try {
    const applied = await migrate(database);
    if (applied.length > 0) logger.info({ applied, schema: config.database.schema }, 'migrated the audit schema');
  } catch (error) {
    await database.close();
    throw error;
  }
  const store = new AuditStore(database);
  await importLegacyAuditStream({ database, store, redis: deps.redis, keyPrefix, logger });
  const audit = new AuditLog({ database, store, redis: deps.redis, keyPrefix, outboxMaxEntries: config.auditOutboxMaxEntries, metrics, logger });
  const changes = new ChangeLock({
    database,
    store,
    audit,
    lockName: `${config.unleash.project}/${config.unleash.environment}/${config.unleash.candidateFlag}/${config.unleash.parallelismFlag}`,
    waitMs: config.changeLockWaitMs,
    statementTimeoutMs: config.database.statementTimeoutMs,
    logger,
  });
  const service = new ControlService({ redis: deps.redis, keyPrefix, traffic, parallelism, override, audit, changes, metrics, logger });
  const retentionMs = config.auditRetentionDays * 24 * 3_600_000;
  await audit.prune(retentionMs);
  const pruneTimer = setInterval(() => void audit.prune(retentionMs), auditPruneIntervalMs);
  pruneTimer.unref();
  const fleet = new FleetView(new Ledger(deps.redis, { keyPrefix }), new WorkerReports(deps.redis, keyPrefix), config.clusters, {
    redis: deps.redis,
    keyPrefix,
  });
  registerLedgerDriftGauge(registry, () => fleet.ledgerDrift(), logger);
  const readIntegrationHealth = () => integrationHealth(deps.redis, keyPrefix, { settleMs: config.latencySettleMs });
  registerIntegrationTroubleGauges(registry, readIntegrationHealth, logger);
  const profiles = new ProfileService({
    redis: deps.redis,
    keyPrefix,
    fleet,
    audit,
    logger,
    options: { ttlMs: config.profileTtlMs, maxKept: config.maxProfilesKept },
    workerSecurity,
  });
  const rolloutStore = new RolloutStore(deps.redis, keyPrefix);
  const autopilot = new Autopilot({
    store: rolloutStore,
    service,
    audit,
    redis: deps.redis,
    keyPrefix,
    clusters: config.clusters,
    candidateReports: async () => (await fleet.workers()).filter((w) => w.cluster === config.clusters.candidate && w.stats).map((w) => w.stats!),
    logger,
    options: { tickMs: config.autopilotTickMs, leaseMs: config.autopilotLeaseMs, settleMs: config.latencySettleMs },
  });
  const rollouts = new RolloutService({ store: rolloutStore, autopilot, audit });
  const ledger = new Ledger(deps.redis, { keyPrefix });
  const limits: LimitService = new LimitService({
    ledger,
    store: new LimitStore(database),
    audit,
    metrics,
    logger,
    clusters: config.clusters,
    integrations: config.integrations,
    seenIntegrations: async () => (await latencyView(deps.redis, keyPrefix, config.clusters, limitsSeenWindowMs)).integrations.map((i) => i.integration),
    refusedCounts: async () => (await readBalancerErrors(deps.redis, keyPrefix, balancerErrorWindowMs)).counts,
    waitingAtLimit: async () => (await override.liveBalancers()).flatMap((balancer) => balancer.waitingAtLimit ?? []),
    capacity: async () => Object.fromEntries((await fleet.clusterSummaries()).map((c) => [c.name, c.capacity])),
    leftAuto: (cluster, integration) => autoLimiter.forget(cluster, integration),
  });
  const autoLimiter: AutoLimiter = new AutoLimiter({
    redis: deps.redis,
    keyPrefix,
    ledger,
    entries: () => limits.autoEntries(),
    audit,
    metrics: { limitChanges: metrics.autoLimitChanges, limitInFlight: metrics.autoLimitInFlight },
    logger,
    options: { ...defaultAutoLimiterOptions, tickMs: config.autoLimitTickMs, leaseMs: 3 * config.autoLimitTickMs },
  });
  autoLimiter.start();
  const limitSeries = new LimitSeries({
    redis: deps.redis,
    keyPrefix,
    clusters: config.clusters,
    samples: () => limits.samples(),
    metrics: { leftOut: metrics.limitSeriesLeftOut, samples: metrics.limitSeriesSamples },
    logger,
    options: { ...defaultLimitSeriesOptions, sampleIntervalMs: config.limitSeriesSampleMs, settleMs: config.latencySettleMs },
  });
  limitSeries.start();
  const reapplyLimits = (why: 'start' | 'check') =>
    limits.reapply(why).catch((error: unknown) => logger.warn({ err: error }, 'could not compare the integration limits with PostgreSQL; retrying'));
  await reapplyLimits('start');
  const limitsTimer = setInterval(() => void reapplyLimits('check'), config.limitsCheckIntervalMs);
  limitsTimer.unref();
  const events = new EventHub(config.maxEventStreams, metrics);
  const schemas = requestSchemas(config.integrations, clusters);
  const auth = new TokenAuth(config.tokens);

  // The flags must exist before anything reads them; if Unleash is not up yet, keep trying.
  let flagsReady = false;
  let ensureTimer: NodeJS.Timeout | undefined;
  const ensureFlags = async () => {
    try {
      const removed = await service.ensureFlags();
      if (removed.length > 0) logger.warn({ removed }, 'removed flag strategies the control plane does not manage');
      await service.rebuildOverrideIfLost('start');
      flagsReady = true;
      logger.info({ flags: [traffic.flagName, parallelism.flagName], integrations: config.integrations }, 'Unleash flags ready');
    } catch (error) {
      logger.warn({ err: error }, 'could not set up the flags in Unleash yet; retrying');
      ensureTimer = setTimeout(() => void ensureFlags(), 2000);
      ensureTimer.unref();
    }
  };
  await ensureFlags();

  // Live events: audit entries, acknowledgements and rollbacks/resumes (answered, then durable)
  // from any control plane, figures on a timer.
  const overrideChanges = override.store.keys.overrideChangeRecordsChannel;
  const onMessage = (channel: string, message: string) => {
    if (channel === audit.channel) events.broadcast('change', JSON.parse(message));
    else if (channel === override.store.keys.overrideAckedChannel) events.broadcast('ack', JSON.parse(message));
    else if (channel === overrideChanges) events.broadcast('override-change', JSON.parse(message));
  };
  deps.subscriber.on('message', onMessage);
  await waitUntilReady(deps.subscriber);
  await deps.subscriber.subscribe(audit.channel, overrideChanges);
  await override.start();
  autopilot.start();
  const figures = async () => ({
    atUnixMs: Date.now(),
    clusters: await fleet.clusterSummaries(),
    balancers: await service.balancers(),
    override: await override.store.read(),
  });
  const figuresTimer = setInterval(() => {
    if (events.size === 0) return;
    figures().then(
      (data) => events.broadcast('figures', data),
      (error: unknown) => logger.debug({ err: error }, 'could not gather figures'),
    );
  }, config.figuresIntervalMs);
  figuresTimer.unref();
  const overrideTimer = setInterval(() => {
    if (!flagsReady) return;
    service.rebuildOverrideIfLost('check').catch((error: unknown) => logger.debug({ err: error }, 'override check failed'));
  }, config.overrideCheckIntervalMs);
  overrideTimer.unref();

  const app = express();
  app.disable('x-powered-by');
  app.set('query parser', 'simple');
  app.use(
    helmet({
      contentSecurityPolicy: {
        directives: {
          // The control plane speaks plain HTTP unless a proxy in front adds TLS: upgrading the
          // UI's requests to https would break it when opened at http://host:8080.
          upgradeInsecureRequests: null,
          // The UI has no inline styles (React and uPlot set them through the DOM) and no web fonts.
          styleSrc: ["'self'"],
          fontSrc: ["'self'"],
        },
      },
    }),
  );
  app.use((request, response, next) => {
    response.on('finish', () => metrics.requests.inc({ method: request.method, status: String(response.statusCode) }));
    next();
  });
  const document = openApiDocument(schemas);
  app.get('/api/v1/openapi.json', (_request, response) => void response.json(document));
  app.get('/api/v1/healthz', (_request, response) => void response.json({ ok: true }));
  app.get('/api/v1/readyz', async (_request, response) => {
    const [redisOk, unleashOk, databaseOk] = await Promise.all([
      deps.redis.ping().then(
        () => true,
        () => false,
      ),
      admin.healthy(),
      database.pool.query('SELECT 1').then(
        () => true,
        () => false,
      ),
    ]);
    const ready = redisOk && unleashOk && databaseOk && flagsReady;
    const view: ReadinessView = { ready, redis: redisOk, unleash: unleashOk, database: databaseOk, flags: flagsReady, auditOutbox: audit.outboxDepth };
    response.status(ready ? 200 : 503).json(view);
  });
  app.get('/api/v1/metrics', async (_request, response) => {
    response.setHeader('content-type', registry.contentType);
    response.send(await registry.metrics());
  });
  app.use(
    '/api/v1',
    apiRoutes({
      service,
      fleet,
      audit,
      events,
      auth,
      schemas,
      maxBodyBytes: config.maxBodyBytes,
      profiles,
      rollouts,
      limits,
      autoLimiter,
      limitSeries,
      welcome: async (response) => events.send(response, 'figures', await figures()),
      latency: (windowMs) => latencyView(deps.redis, keyPrefix, config.clusters, windowMs),
      latencySeries: (windowMs) => latencySeries(deps.redis, keyPrefix, config.clusters, windowMs, { settleMs: config.latencySettleMs }),
      integrationHealth: readIntegrationHealth,
    }),
  );
  app.use('/api', (_request, _response, next) => next(new HeadroomError(apiErrorCodes.notFound, 'no such API resource; see /api/v1/openapi.json')));
  if (ui) app.use(ui);
  app.use((error: unknown, _request: Request, response: Response, _next: NextFunction) => {
    const coded = toApiError(error);
    if (coded.code === apiErrorCodes.internal) logger.error({ err: error }, 'request failed');
    if (response.headersSent) return void response.end();
    const body: Record<string, unknown> = { code: coded.code, message: coded.message };
    if (coded instanceof InvalidRequestError) body.fields = coded.problems;
    if (coded instanceof UnleashFailedError && (coded.details.undone?.length || coded.details.applied?.length)) body.unleash = coded.details;
    if (coded.retryAfterMs !== undefined) {
      body.retryAfterMs = coded.retryAfterMs;
      response.setHeader('retry-after', String(Math.ceil(coded.retryAfterMs / 1000)));
    }
    response.status(httpStatusOf(coded.code)).json({ error: body });
  });

  const server: Server = await new Promise((resolve, reject) => {
    const listening = app.listen(config.port, config.host, (error?: Error) => (error ? reject(error) : resolve(listening)));
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://${config.host.includes(':') ? `[${config.host}]` : config.host}:${port}`;
  logger.info({ url }, 'control plane ready');

  const close = once(async () => {
    clearTimeout(ensureTimer);
    clearInterval(figuresTimer);
    clearInterval(overrideTimer);
    clearInterval(pruneTimer);
    clearInterval(limitsTimer);
    await autoLimiter.close();
    await limitSeries.close();
    await autopilot.stop();
    // A rollback answered just before is still being written to Unleash: let it finish (bounded).
    await service.settle(closeSettleMs);
    events.closeAll();
    await profiles.close();
    override.stop();
    deps.subscriber.off('message', onMessage);
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
    await audit.close();
    await database.close();
  });
  return { url, port, registry, service, audit, close };
}

/** Integrations whose tasks ran this recently are listed by GET /limits. */
const limitsSeenWindowMs = 3_600_000;

/** How often audit entries past their retention are deleted. */
const auditPruneIntervalMs = 3_600_000;

/** How long close() lets Unleash writes under way finish (one Admin API call times out after 5 s). */
const closeSettleMs = 6000;

/** Body-parser errors, ledger and unknown errors, as coded API errors. */
function toApiError(error: unknown): HeadroomError {
  if (isHeadroomError(error, ledgerErrorCodes.unavailable))
    return new HeadroomError(apiErrorCodes.ledgerUnavailable, `${error.message}; nothing was changed`, { retryAfterMs: 1000 });
  if (error instanceof HeadroomError) return error;
  const parserError = error as { type?: string; limit?: number; status?: number };
  if (parserError.type === 'entity.too.large')
    return new HeadroomError(apiErrorCodes.bodyTooLarge, `the body is larger than ${parserError.limit} bytes (maxBodyBytes); nothing was changed`);
  if (parserError.type === 'entity.parse.failed') return new InvalidRequestError([{ field: 'body', message: 'not valid JSON' }]);
  if (parserError.type === 'encoding.unsupported' || parserError.type === 'charset.unsupported')
    return new HeadroomError(apiErrorCodes.unsupportedMediaType, 'the body must be UTF-8 JSON; nothing was changed');
  if (typeof parserError.status === 'number' && parserError.status >= 400 && parserError.status < 500)
    return new InvalidRequestError([{ field: 'body', message: String((error as Error).message) }]);
  return new HeadroomError(apiErrorCodes.internal, 'internal error', { cause: error });
}
