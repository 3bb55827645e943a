import { z } from 'zod';
import { auditActions, type RequestSchemas } from './schemas';
import { profilePaths } from './profile-openapi';
import { rolloutPaths } from './rollout-openapi';
import { limitPaths } from './limit-openapi';
import { profileRequestSchemas } from './profile-schemas';

type JsonSchema = Record<string, unknown>;

const errorBody: JsonSchema = {
  type: 'object',
  required: ['error'],
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      properties: {
        code: { type: 'string', description: 'Stable HR_ERR_* code' },
        message: { type: 'string' },
        fields: { type: 'array', items: { type: 'object', properties: { field: { type: 'string' }, message: { type: 'string' } } } },
        retryAfterMs: { type: 'integer' },
      },
    },
  },
};

const clusterSummary: JsonSchema = {
  type: 'object',
  properties: {
    name: { type: 'string' },
    role: { type: 'string', enum: ['baseline', 'candidate'] },
    workers: { type: 'integer' },
    drainingWorkers: { type: 'integer' },
    capacity: { type: 'integer' },
    inFlight: { type: 'integer' },
    free: { type: 'integer' },
    leases: { type: 'integer' },
    waitingBalancers: { type: 'integer' },
    tasksPerSecond: {
      type: 'number',
      description: "Tasks finished per second: the workers' latest reports, and the balancers' errors (balancerErrorsPerSecond)",
    },
    errorsPerSecond: { type: 'number', description: 'Of those, failed tasks per second: on the workers, and in the balancers before any worker ran them' },
    balancerErrorsPerSecond: {
      type: 'number',
      description:
        'Tasks the balancers failed before any worker ran them (deadline passed in the queue, queue full, shed, no worker took it), per second over the last 10 to 20 s',
    },
    balancerErrors: {
      type: 'array',
      description: 'The same by integration and code, the most first (at most 20)',
      items: {
        type: 'object',
        properties: { integration: { type: 'string' }, code: { type: 'string', description: 'HR_ERR_* code' }, perSecond: { type: 'number' } },
      },
    },
    heldByWorkers: { type: 'integer', description: 'Tasks the workers held (queued or running) at their last heartbeats: what they run, by their own count' },
    ledgerDriftSlots: {
      type: 'integer',
      description:
        "inFlight minus heldByWorkers: slots the ledger counts that the workers do not run. A few are tasks on their way; more is the ledger's error, which the workers' next heartbeats correct",
    },
  },
};

const worker: JsonSchema = {
  type: 'object',
  properties: {
    workerId: { type: 'string' },
    cluster: { type: 'string' },
    address: { type: 'string' },
    maxParallelism: { type: 'integer' },
    inFlight: { type: 'integer' },
    free: { type: 'integer' },
    draining: { type: 'boolean' },
    unreachableUntilUnixMs: {
      type: ['integer', 'null'],
      description: 'Balancers skip it (ejected; ejectedReason says why) until then, or until it is back earlier; null when not marked',
    },
    ejectedReason: {
      type: ['string', 'null'],
      enum: ['unreachable', 'failing', null],
      description:
        'Why balancers skip it: unreachable (they could not connect to it; back when a health check passes) or failing (it failed far more tasks than the other workers on an integration; back when its back-off ends); null when not marked',
    },
    lastHeartbeatUnixMs: { type: 'integer' },
    heldAtHeartbeat: { type: ['integer', 'null'], description: 'Tasks it held (queued or running) at its last heartbeat; null when it did not say' },
    ledgerDriftSlots: {
      type: ['integer', 'null'],
      description: 'inFlight minus heldAtHeartbeat: slots the ledger counts that it does not run; null when it did not say',
    },
    stats: {
      type: ['object', 'null'],
      description: 'Its latest report (every 2 s by default); null until it sent one',
      properties: {
        atUnixMs: { type: 'integer' },
        heapUsedBytes: { type: 'integer' },
        heapLimitBytes: { type: 'integer' },
        gcTimeRatio: { type: 'number', description: 'Share of the interval spent in GC pauses (0..1)' },
        eventLoopUtilization: { type: 'number', description: 'Share of the interval the event loop was busy (0..1)' },
        eventLoopDelayP99Ms: { type: 'number' },
        latencyP50Ms: { type: ['number', 'null'] },
        latencyP99Ms: { type: ['number', 'null'] },
        tasksPerSecond: { type: 'number' },
        errorsPerSecond: { type: 'number' },
      },
    },
  },
};

const slotFigures: JsonSchema = {
  type: 'object',
  properties: {
    tasksPerSecond: { type: 'number' },
    errorsPerSecond: { type: 'number' },
    p50Ms: { type: ['number', 'null'] },
    p95Ms: { type: ['number', 'null'] },
  },
};

const latencySeries: JsonSchema = {
  type: 'object',
  properties: {
    slotSeconds: { type: 'integer' },
    slots: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          startUnixMs: { type: 'integer' },
          baseline: slotFigures,
          candidate: slotFigures,
          integrations: {
            type: 'object',
            additionalProperties: { type: 'object', properties: { p50: { type: ['number', 'null'] }, p95: { type: ['number', 'null'] } } },
          },
          sameMix: {
            type: 'object',
            description: 'p50/p95 per cluster over only the integrations both ran in the slot, the candidate weighted to the baseline’s mix',
            properties: Object.fromEntries(
              ['baselineP50Ms', 'baselineP95Ms', 'candidateP50Ms', 'candidateP95Ms'].map((name) => [name, { type: ['number', 'null'] }]),
            ),
          },
        },
      },
    },
    mix: {
      type: 'object',
      description: 'Integrations with a finished task on both clusters over the window, and on only one',
      properties: Object.fromEntries(['compared', 'baselineOnly', 'candidateOnly'].map((name) => [name, { type: 'array', items: { type: 'string' } }])),
    },
  },
};

const windowFigures: JsonSchema = {
  type: 'object',
  properties: {
    tasks: { type: 'integer', description: 'Successful tasks' },
    errors: { type: 'integer', description: 'Failed tasks, the balancers’ included' },
    p50Ms: { type: ['number', 'null'] },
    p99Ms: { type: ['number', 'null'] },
  },
};

const integrationHealth: JsonSchema = {
  type: 'object',
  properties: {
    slotSeconds: { type: 'integer' },
    rule: { type: 'object', description: 'The lines of the trouble rule (docs/control-plane.md)' },
    integrations: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          integration: { type: 'string' },
          recent: windowFigures,
          previous: windowFigures,
          verdict: {
            type: 'object',
            properties: {
              state: { type: 'string', enum: ['trouble', 'ok', 'not-enough-data'] },
              p99Ratio: { type: ['number', 'null'] },
              errorShare: { type: ['number', 'null'] },
              reasons: { type: 'array', items: { type: 'string' } },
            },
          },
          slots: {
            type: 'array',
            items: {
              type: 'object',
              properties: {
                startUnixMs: { type: 'integer' },
                p50Ms: { type: ['number', 'null'] },
                p99Ms: { type: ['number', 'null'] },
                errorShare: { type: ['number', 'null'] },
              },
            },
          },
        },
      },
    },
    hiddenIntegrations: { type: 'integer' },
    hiddenInTrouble: { type: 'integer' },
  },
};

const balancer: JsonSchema = {
  type: 'object',
  properties: {
    balancerId: { type: 'string' },
    address: { type: 'string' },
    lastHeartbeatUnixMs: { type: 'integer' },
    queued: {
      type: ['object', 'null'],
      description: 'Tasks waiting there for a slot, by priority, as of its last heartbeat',
      properties: { userPresent: { type: 'integer' }, background: { type: 'integer' } },
    },
    ackedVersion: { type: ['integer', 'null'] },
    upToDate: { type: 'boolean' },
  },
};

const override: JsonSchema = {
  type: ['object', 'null'],
  properties: {
    version: { type: 'integer' },
    all: { type: 'boolean' },
    integrations: { type: 'array', items: { type: 'string' } },
    updatedAtUnixMs: { type: 'integer' },
    actor: { type: 'string' },
  },
};

const overrideChangeRecord: JsonSchema = {
  type: 'object',
  description:
    'A rollback or resume. Answered once every live balancer acknowledged the override (or ackTimeoutMs passed), with durable "pending"; the Unleash write follows, and its outcome comes as an `override-change` event (and in GET /traffic lastRollback for a rollback)',
  properties: {
    kind: { type: 'string', enum: ['rollback', 'resume'] },
    scope: { type: 'string', description: '"all" or the integration' },
    actor: { type: 'string' },
    reason: { type: ['string', 'null'], description: 'As given in the request; also in the audit entry' },
    atUnixMs: { type: 'integer' },
    overrideVersion: { type: 'integer' },
    override,
    expected: { type: 'array', items: { type: 'string' }, description: 'Balancers alive when the override was written' },
    acknowledged: {
      type: 'array',
      items: {
        type: 'object',
        properties: { balancerId: { type: 'string' }, address: { type: 'string' }, version: { type: 'integer' }, ackMs: { type: 'number' } },
      },
    },
    missing: { type: 'array', items: { type: 'string' } },
    propagationMs: { type: ['number', 'null'], description: 'From the request to the last balancer acknowledgement' },
    durable: {
      type: 'string',
      enum: ['pending', 'done', 'failed'],
      description:
        'The Unleash write that makes it survive a loss of Redis data: pending in the answer, then done, or failed (in effect through Redis only; repeat the request to retry)',
    },
    durableError: { type: ['string', 'null'], description: 'Why Unleash could not be written, and what that leaves in effect' },
    durableAtUnixMs: { type: ['integer', 'null'] },
  },
};

const traffic: JsonSchema = {
  type: 'object',
  properties: {
    flag: {
      type: 'object',
      properties: {
        name: { type: 'string' },
        enabled: { type: 'boolean', description: "The flag's environment switch; off sends everything to the baseline" },
        defaultPercent: { type: 'integer' },
        integrations: {
          type: 'object',
          additionalProperties: { type: 'object', properties: { percent: { type: 'integer' }, rolledBack: { type: 'boolean' } } },
        },
      },
    },
    effectivePercent: {
      type: 'object',
      properties: { default: { type: 'integer' }, integrations: { type: 'object', additionalProperties: { type: 'integer' } } },
    },
    override,
    durable: { type: 'boolean' },
    balancers: {
      type: 'array',
      items: {
        allOf: [balancer],
        properties: {
          trafficFlagUpToDate: {
            type: ['boolean', 'null'],
            description: 'Its flag client has the traffic flag as Unleash holds it now; null when it routes without the flag',
          },
        },
      },
    },
    unleashWritesPending: {
      type: 'integer',
      description: 'Unleash writes of rollbacks and resumes still under way in this control plane (durable may be false meanwhile)',
    },
    lastRollback: { oneOf: [overrideChangeRecord, { type: 'null' }] },
  },
};

const latencySummary: JsonSchema = {
  type: ['object', 'null'],
  properties: { count: { type: 'integer' }, p50Ms: { type: 'number' }, p95Ms: { type: 'number' }, p99Ms: { type: 'number' } },
};

const latency: JsonSchema = {
  type: 'object',
  properties: {
    windowSeconds: { type: 'number' },
    clusters: { type: 'object', properties: { baseline: latencySummary, candidate: latencySummary } },
    integrations: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          integration: { type: 'string' },
          baseline: latencySummary,
          candidate: latencySummary,
          ratio: { type: ['object', 'null'], properties: { p50: { type: 'number' }, p95: { type: 'number' }, p99: { type: 'number' } } },
        },
      },
    },
  },
};

const auditEntry: JsonSchema = {
  type: 'object',
  properties: {
    id: { type: 'string', description: 'A whole number as text, in the order entries were written (PostgreSQL)' },
    atUnixMs: { type: 'integer', description: 'When it happened' },
    actor: { type: 'string' },
    action: { type: 'string', enum: [...auditActions] },
    target: { type: 'string' },
    request: { description: 'What was asked: the request body as validated (absent for the control plane’s own repairs)' },
    before: {},
    after: {},
    outcome: { type: 'string', enum: ['ok', 'failed'] },
    error: { type: 'string' },
    reason: { type: 'string', description: 'Why, as the operator gave it (rollback, resume, drain)' },
  },
};

function body(schema: z.ZodType): JsonSchema {
  return { required: true, content: { 'application/json': { schema: z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) } } };
}

function ok(description: string, schema: JsonSchema): JsonSchema {
  return { description, content: { 'application/json': { schema } } };
}

const errors = (...statuses: number[]) =>
  Object.fromEntries(
    statuses.map((status) => [
      String(status),
      { description: errorDescriptions[status] ?? 'error', content: { 'application/json': { schema: { $ref: '#/components/schemas/Error' } } } },
    ]),
  );

const errorDescriptions: Record<number, string> = {
  400: 'The request does not match its schema; nothing was changed',
  401: 'No valid token',
  403: "A viewer's token tried a change; nothing was changed",
  404: 'Not found',
  409: 'The change conflicts with the current state; nothing was changed',
  413: 'Body too large',
  415: 'Body is not application/json',
  502: 'Unleash failed; the message says what was and was not changed',
  503: 'Redis or PostgreSQL unavailable (HR_ERR_LEDGER_UNAVAILABLE, HR_ERR_DATABASE_UNAVAILABLE), too many changes waiting (HR_ERR_BUSY), or too many event streams; nothing was changed',
};

/** The API's contract, served at /api/v1/openapi.json. Request bodies come from the same zod schemas that validate them. */
export function openApiDocument(schemas: RequestSchemas): JsonSchema {
  const read = errors(401, 503);
  const write = errors(400, 401, 403, 413, 415, 502, 503);
  const secured = [{ bearer: [] }];
  return {
    openapi: '3.1.0',
    info: {
      title: 'Headroom control plane',
      version: '1.0.0',
      description:
        'Shift traffic between the baseline and candidate clusters, tune max parallelism, roll back instantly, or let the autopilot walk a rollout plan.',
    },
    servers: [{ url: '/api/v1' }],
    components: {
      securitySchemes: { bearer: { type: 'http', scheme: 'bearer', description: 'A viewer token reads; an operator token also changes' } },
      schemas: { Error: errorBody },
    },
    security: secured,
    paths: {
      '/session': {
        get: {
          summary: 'Who the token belongs to and what it may do',
          responses: {
            200: ok('Session', { type: 'object', properties: { name: { type: 'string' }, role: { type: 'string', enum: ['viewer', 'operator'] } } }),
            ...read,
          },
        },
      },
      '/clusters': {
        get: {
          summary: 'Both clusters: workers, capacity, in flight, free',
          responses: { 200: ok('Clusters', { type: 'object', properties: { clusters: { type: 'array', items: clusterSummary } } }), ...read },
        },
      },
      '/workers': {
        get: {
          summary: 'Every worker of both clusters',
          responses: { 200: ok('Workers', { type: 'object', properties: { workers: { type: 'array', items: worker } } }), ...read },
        },
      },
      '/workers/{workerId}/drain': {
        post: {
          summary: 'Ask a worker to drain: it takes no new task, finishes its running ones, and leaves',
          parameters: [{ name: 'workerId', in: 'path', required: true, schema: z.toJSONSchema(schemas.workerId) }],
          responses: {
            200: ok('Draining', { type: 'object', properties: { workerId: { type: 'string' }, cluster: { type: 'string' }, draining: { type: 'boolean' } } }),
            ...write,
            ...errors(404),
          },
        },
      },
      '/traffic': {
        get: {
          summary: 'The traffic split (from Unleash), the override, and each balancer’s acknowledged version',
          responses: { 200: ok('Traffic', traffic), ...read, ...errors(502) },
        },
        put: {
          summary: 'Set candidate percentages (default and/or per integration); all or nothing',
          requestBody: body(schemas.trafficChange),
          responses: { 200: ok('Traffic after the change', traffic), ...write },
        },
      },
      '/parallelism': {
        get: {
          summary: 'Max parallelism per cluster from Unleash (null: the workers’ own setting)',
          responses: {
            200: ok('Parallelism', { type: 'object', properties: { clusters: { type: 'object', additionalProperties: { type: ['integer', 'null'] } } } }),
            ...read,
            ...errors(502),
          },
        },
        put: {
          summary: 'Set max parallelism per cluster; all or nothing',
          requestBody: body(schemas.parallelismChange),
          responses: { 200: ok('Parallelism after the change', { type: 'object' }), ...write },
        },
      },
      '/rollback': {
        post: {
          summary:
            'Send all integrations (or one) to the baseline now: answers when every balancer acknowledged the Redis override; the Unleash flag is switched off after the answer (durable: pending, then an override-change event)',
          requestBody: { ...body(schemas.scope), required: false },
          responses: { 200: ok('Rolled back, with acknowledgements and propagation time', overrideChangeRecord), ...write },
        },
      },
      '/resume': {
        post: {
          summary:
            'Undo a rollback (all, or one integration): answers when every balancer acknowledged the lifted override; Unleash is switched on after the answer, and until then its flag keeps the scope on the baseline',
          requestBody: { ...body(schemas.scope), required: false },
          responses: { 200: ok('Resumed, with acknowledgements and propagation time', overrideChangeRecord), ...write, ...errors(409) },
        },
      },
      '/latency': {
        get: {
          summary:
            'Task latency (p50/p95/p99, count) per integration on each cluster over a window, and the ratio candidate/baseline; from the workers’ rolling histograms in Redis',
          parameters: [{ name: 'window', in: 'query', schema: { type: 'string', pattern: '^\\d{1,5}[smh]$', default: '5m' }, description: '10s to 1h' }],
          responses: { 200: ok('Latency', latency), ...read, ...errors(400) },
        },
      },
      '/latency/series': {
        get: {
          summary:
            'Per 10 s slot over a window (complete slots, oldest first): tasks and errors per second and p50/p95 per cluster, and the candidate/baseline ratio per integration',
          parameters: [{ name: 'window', in: 'query', schema: { type: 'string', pattern: '^\\d{1,5}[smh]$', default: '5m' }, description: '10s to 1h' }],
          responses: { 200: ok('Latency series', latencySeries), ...read, ...errors(400) },
        },
      },
      '/latency/integrations': {
        get: {
          summary:
            'Each integration’s own latency and errors (both clusters together) over the last minute against the 10 minutes before, and which are in trouble; in trouble first, at most 8',
          responses: { 200: ok('Integrations’ health', integrationHealth), ...read },
        },
      },
      '/balancers': {
        get: {
          summary: 'Live balancers and the override version each applied',
          responses: { 200: ok('Balancers', { type: 'object', properties: { balancers: { type: 'array', items: balancer } } }), ...read },
        },
      },
      '/audit': {
        get: {
          summary: 'Every change: who, when, what was asked, before and after (newest first), from PostgreSQL',
          parameters: [
            { name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } },
            {
              name: 'before',
              in: 'query',
              schema: { type: 'string', pattern: '^[1-9]\\d{0,17}$' },
              description: 'An entry id: page back from it (entries with smaller ids)',
            },
            { name: 'action', in: 'query', schema: { type: 'string', enum: [...auditActions] }, description: 'Only entries of this action' },
            { name: 'actor', in: 'query', schema: { type: 'string' }, description: 'Only entries of this actor (a token name, or control-plane)' },
          ],
          responses: { 200: ok('Entries', { type: 'object', properties: { entries: { type: 'array', items: auditEntry } } }), ...read, ...errors(400) },
        },
      },
      ...profilePaths({ ok, errors, body, read, write }, profileRequestSchemas(schemas.workerId)),
      ...rolloutPaths({ ok, errors, body, read, write }, schemas),
      ...limitPaths({ ok, errors, body, read, write }, schemas),
      '/events': {
        get: {
          summary:
            'Server-sent events: change (audit entries), ack (balancer acknowledgements), override-change (a rollback or resume when answered, and again when its Unleash write is done or failed), figures (every few seconds)',
          responses: { 200: { description: 'text/event-stream' }, ...read },
        },
      },
      '/healthz': { get: { summary: 'The process is up', security: [], responses: { 200: ok('OK', { type: 'object' }) } } },
      '/readyz': {
        get: {
          summary: 'Redis, Unleash and PostgreSQL (the audit log) answer, and the flags exist; auditOutbox: entries waiting for PostgreSQL',
          security: [],
          responses: { 200: ok('Ready', { type: 'object' }), 503: ok('Not ready', { type: 'object' }) },
        },
      },
      '/metrics': { get: { summary: 'Prometheus metrics', security: [], responses: { 200: { description: 'text/plain; version=0.0.4' } } } },
      '/openapi.json': { get: { summary: 'This document', security: [], responses: { 200: { description: 'OpenAPI 3.1' } } } },
    },
  };
}
