import express, { type NextFunction, type Request, type Response } from 'express';
import { HeadroomError } from '@headroom/common';
import type { TokenAuth, Caller } from '../auth';
import type { ControlService } from '../control-service';
import { apiErrorCodes, InvalidRequestError } from '../errors';
import type { EventHub } from '../event-hub';
import type { FleetView } from '../fleet-view';
import type { AuditLog } from '../audit';
import type { LatencySeries, LatencyView } from '../latency-view';
import type { IntegrationHealthView } from '../integration-health';
import { parseRequest, type RequestSchemas } from './schemas';
import { profileRoutes } from './profile-routes';
import type { ProfileService } from '../profiles/profile-service';
import type { RolloutService } from '../rollouts/rollout-service';
import type { LimitService } from '../limits/limit-service';
import type { AutoLimiter } from '../limits/auto-limiter';
import type { LimitSeries } from '../limits/limit-series';

export interface RouteDeps {
  service: ControlService;
  fleet: FleetView;
  audit: AuditLog;
  events: EventHub;
  auth: TokenAuth;
  schemas: RequestSchemas;
  maxBodyBytes: number;
  profiles: ProfileService;
  rollouts: RolloutService;
  limits: LimitService;
  autoLimiter: Pick<AutoLimiter, 'history'>;
  limitSeries: Pick<LimitSeries, 'read'>;
  /** Sends the first figures to a new event stream. */
  welcome(response: Response): Promise<void>;
  /** Latency per integration per cluster over the last `windowMs`, and the ratio. */
  latency(windowMs: number): Promise<LatencyView>;
  /** The same per time slot, with tasks and errors per second, for charts. */
  latencySeries(windowMs: number): Promise<LatencySeries>;
  /** Each integration's own latency and errors against its recent past, and which are in trouble. */
  integrationHealth(): Promise<IntegrationHealthView>;
}

/** The authenticated part of /api/v1. */
export function apiRoutes(deps: RouteDeps): express.Router {
  const router = express.Router();
  router.use(deps.auth.middleware());
  router.use(requireJsonBody);
  router.use(express.json({ limit: deps.maxBodyBytes, strict: true, type: 'application/json' }));
  const actor = (response: Response) => (response.locals.caller as Caller).name;
  const bodyOf = (request: Request) => (request.body === undefined ? {} : request.body);

  router.get('/session', (_request, response) => {
    const caller = response.locals.caller as Caller;
    response.json({ name: caller.name, role: caller.role });
  });

  router.get('/clusters', async (_request, response) => {
    response.json({ clusters: await deps.fleet.clusterSummaries() });
  });

  router.get('/workers', async (_request, response) => {
    response.json({ workers: await deps.fleet.workers() });
  });

  router.post('/workers/:workerId/drain', async (request, response) => {
    const workerId = parseRequest(deps.schemas.workerId, request.params.workerId, 'path.workerId');
    const { reason } = parseRequest(deps.schemas.scope.pick({ reason: true }), bodyOf(request), 'body');
    const drained = await deps.fleet.drain(workerId);
    if (!drained) throw new HeadroomError(apiErrorCodes.notFound, `no worker ${workerId} in either cluster; nothing was changed`);
    await deps.service.drainRecorded(actor(response), workerId, drained.cluster, reason);
    response.json({ workerId, cluster: drained.cluster, draining: true });
  });

  router.get('/traffic', async (_request, response) => {
    response.json(await deps.service.traffic());
  });

  router.put('/traffic', async (request, response) => {
    const change = parseRequest(deps.schemas.trafficChange, bodyOf(request), 'body');
    response.json(await deps.service.setTraffic(change, actor(response)));
  });

  router.get('/parallelism', async (_request, response) => {
    response.json({ clusters: await deps.service.parallelism() });
  });

  router.put('/parallelism', async (request, response) => {
    const change = parseRequest(deps.schemas.parallelismChange, bodyOf(request), 'body');
    response.json({ clusters: await deps.service.setParallelism(change.clusters, actor(response)) });
  });

  router.post('/rollback', async (request, response) => {
    const scope = parseRequest(deps.schemas.scope, bodyOf(request), 'body');
    response.json(await deps.service.rollback(scope, actor(response)));
  });

  router.post('/resume', async (request, response) => {
    const scope = parseRequest(deps.schemas.scope, bodyOf(request), 'body');
    response.json(await deps.service.resume(scope, actor(response)));
  });

  router.get('/balancers', async (_request, response) => {
    response.json({ balancers: await deps.service.balancers() });
  });

  router.get('/latency', async (request, response) => {
    const query = parseRequest(deps.schemas.latencyQuery, request.query, 'query');
    response.json(await deps.latency(query.window));
  });

  router.get('/latency/series', async (request, response) => {
    const query = parseRequest(deps.schemas.latencyQuery, request.query, 'query');
    response.json(await deps.latencySeries(query.window));
  });
  router.get('/latency/integrations', async (_request, response) => {
    response.json(await deps.integrationHealth());
  });

  router.get('/audit', async (request, response) => {
    const query = parseRequest(deps.schemas.auditQuery, request.query, 'query');
    response.json({ entries: await deps.audit.list({ limit: query.limit, beforeId: query.before, action: query.action, actor: query.actor }) });
  });

  router.get('/events', async (_request, response) => {
    deps.events.open(response);
    await deps.welcome(response);
  });

  router.get('/limits', async (_request, response) => {
    response.json(await deps.limits.view());
  });

  router.put('/limits/:cluster/:integration', async (request, response) => {
    const cluster = parseRequest(deps.schemas.limitCluster, request.params.cluster, 'path.cluster');
    const integration = parseRequest(deps.schemas.limitIntegration, request.params.integration, 'path.integration');
    const { limit, reason } = parseRequest(deps.schemas.limitChange, bodyOf(request), 'body');
    if (limit === null) throw new InvalidRequestError([{ field: 'body.limit', message: 'got null; to remove a limit use DELETE; nothing was changed' }]);
    response.json(await deps.limits.set(cluster, integration, limit, actor(response), reason));
  });

  router.get('/limits/:cluster/:integration/history', async (request, response) => {
    const cluster = parseRequest(deps.schemas.limitCluster, request.params.cluster, 'path.cluster');
    const integration = parseRequest(deps.schemas.limitIntegration, request.params.integration, 'path.integration');
    response.json({ cluster, integration, points: await deps.autoLimiter.history(cluster, integration) });
  });

  router.get('/limits/:cluster/:integration/series', async (request, response) => {
    const cluster = parseRequest(deps.schemas.limitCluster, request.params.cluster, 'path.cluster');
    const integration = parseRequest(deps.schemas.limitIntegration, request.params.integration, 'path.integration');
    const { minutes } = parseRequest(deps.schemas.limitSeriesQuery, request.query, 'query');
    response.json(await deps.limitSeries.read(cluster, integration, minutes * 60_000));
  });

  router.delete('/limits/:cluster/:integration', async (request, response) => {
    const cluster = parseRequest(deps.schemas.limitCluster, request.params.cluster, 'path.cluster');
    const integration = parseRequest(deps.schemas.limitIntegration, request.params.integration, 'path.integration');
    const { reason } = parseRequest(deps.schemas.limitRemoval, bodyOf(request), 'body');
    response.json(await deps.limits.set(cluster, integration, null, actor(response), reason));
  });

  router.use(profileRoutes(deps.profiles, deps.schemas));

  router.get('/rollouts', async (_request, response) => {
    response.json(await deps.rollouts.view());
  });

  router.post('/rollouts', async (request, response) => {
    const plan = parseRequest(deps.schemas.rolloutPlan, bodyOf(request), 'body');
    const rollout = await deps.rollouts.start(plan, actor(response));
    response.status(201).location(`/api/v1/rollouts/${rollout.id}`).json(rollout);
  });

  router.get('/rollouts/:rolloutId', async (request, response) => {
    const id = parseRequest(deps.schemas.rolloutId, request.params.rolloutId, 'path.rolloutId');
    response.json(await deps.rollouts.get(id));
  });

  for (const action of ['pause', 'resume', 'abort'] as const) {
    router.post(`/rollouts/:rolloutId/${action}`, async (request, response) => {
      const id = parseRequest(deps.schemas.rolloutId, request.params.rolloutId, 'path.rolloutId');
      const { reason } = parseRequest(deps.schemas.rolloutAction, bodyOf(request), 'body');
      response.json(await deps.rollouts[action](id, actor(response), reason));
    });
  }

  return router;
}

/** A body is only accepted as application/json; a change with another content type changes nothing. */
function requireJsonBody(request: Request, _response: Response, next: NextFunction): void {
  const hasBody = Number(request.headers['content-length'] ?? 0) > 0 || request.headers['transfer-encoding'] !== undefined;
  if (hasBody && !request.is('application/json')) {
    return next(
      new HeadroomError(
        apiErrorCodes.unsupportedMediaType,
        `the body must be application/json (got ${request.headers['content-type'] ?? 'no content type'}); nothing was changed`,
      ),
    );
  }
  next();
}
