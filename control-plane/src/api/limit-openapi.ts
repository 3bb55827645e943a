import type { OpenApiParts } from './profile-openapi';
import type { RequestSchemas } from './schemas';

type JsonSchema = Record<string, unknown>;

const maxStartsPerSecond: JsonSchema = {
  type: 'number',
  minimum: 0.001,
  maximum: 1_000_000,
  description:
    'Optional start rate: most tasks of the integration started per second in the cluster, across every balancer and proxyless client (a GCRA with a burst of one second of the rate)',
};

const limitForm: JsonSchema = {
  oneOf: [
    {
      type: 'object',
      properties: { maxInFlight: { type: 'integer', minimum: 1 }, maxStartsPerSecond },
      required: ['maxInFlight'],
      additionalProperties: false,
    },
    {
      type: 'object',
      properties: { shareOfCapacity: { type: 'number', exclusiveMinimum: 0, maximum: 1 }, maxStartsPerSecond },
      required: ['shareOfCapacity'],
      additionalProperties: false,
    },
    { type: 'object', properties: { off: { const: true }, maxStartsPerSecond }, required: ['off'], additionalProperties: false },
    {
      type: 'object',
      description: 'A start rate alone: the default in-flight limit applies ({"off": true, "maxStartsPerSecond": r} is the rate with no in-flight limit)',
      properties: { maxStartsPerSecond },
      required: ['maxStartsPerSecond'],
      additionalProperties: false,
    },
    {
      type: 'object',
      description: 'Auto: the control plane moves the count between the bounds by the integration’s run time against its own baseline',
      properties: {
        auto: {
          type: 'object',
          properties: { minInFlight: { type: 'integer', minimum: 1 }, maxInFlight: { type: 'integer', minimum: 1 } },
          required: ['minInFlight', 'maxInFlight'],
          additionalProperties: false,
        },
      },
      required: ['auto'],
      additionalProperties: false,
    },
    {
      type: 'object',
      properties: { shareOfCapacity: { type: 'number' }, minInFlight: { type: 'integer' }, maxStartsPerSecond },
      description: 'The default',
    },
  ],
};

const limitsView: JsonSchema = {
  type: 'object',
  properties: {
    default: limitForm,
    clusters: {
      type: 'array',
      items: {
        type: 'object',
        properties: {
          cluster: { type: 'string' },
          role: { type: 'string', enum: ['baseline', 'candidate'] },
          capacitySlots: { type: 'integer' },
          integrations: {
            type: 'array',
            maxItems: 200,
            items: {
              type: 'object',
              properties: {
                integration: { type: 'string' },
                source: { type: 'string', enum: ['own', 'default'] },
                limit: limitForm,
                maxInFlight: { type: ['integer', 'null'], description: 'null: no limit' },
                maxStartsPerSecond: { type: ['number', 'null'], description: 'The start rate it keeps to (its own, or the default’s); null: none' },
                inflight: { type: 'integer' },
                waiting: { type: 'integer', description: 'Tasks waiting on the live balancers because it is at its limit (their last heartbeats)' },
                refused: { type: ['integer', 'null'], description: 'null: not reported' },
              },
            },
          },
        },
      },
    },
  },
};

const autoLimitHistory: JsonSchema = {
  type: 'object',
  properties: {
    cluster: { type: 'string' },
    integration: { type: 'string' },
    points: {
      type: 'array',
      maxItems: 720,
      description: 'The auto limiter’s decisions, oldest first (one a tick; empty when the integration is not in auto mode)',
      items: {
        type: 'object',
        properties: {
          atUnixMs: { type: 'integer' },
          limitInFlight: { type: 'integer' },
          inFlight: { type: 'integer' },
          runTimeP50Ms: { type: ['number', 'null'] },
          baselineMs: { type: ['number', 'null'] },
          reason: { type: 'string' },
        },
      },
    },
  },
};

const limitSeries: JsonSchema = {
  type: 'object',
  properties: {
    cluster: { type: 'string' },
    integration: { type: 'string' },
    slotSeconds: { type: 'integer' },
    points: {
      type: 'array',
      maxItems: 361,
      description: 'Settled 10-second slots, oldest first; a slot no control plane sampled has null in flight and waiting',
      items: {
        type: 'object',
        properties: {
          startUnixMs: { type: 'integer' },
          limitInFlight: { type: ['integer', 'null'], description: 'The limit at the slot’s last sample; null: no limit, or not sampled' },
          inFlight: { type: ['integer', 'null'], description: 'The most in flight among the slot’s samples' },
          waiting: { type: ['integer', 'null'], description: 'The most waiting at the limit on the live balancers among the slot’s samples' },
          refused: { type: 'integer', description: 'Refused at the limit by balancers in the slot' },
          tasks: { type: 'integer', description: 'Tasks that ended successfully in the slot' },
          p50Ms: { type: ['number', 'null'], description: 'Run time p50 (the auto limiter’s signal); null without tasks' },
          p99Ms: { type: ['number', 'null'] },
        },
      },
    },
  },
};

const pathParameters = [
  { name: 'cluster', in: 'path', required: true, schema: { type: 'string' }, description: 'The baseline or candidate cluster' },
  { name: 'integration', in: 'path', required: true, schema: { type: 'string', pattern: '^[a-z0-9][a-z0-9._-]{0,63}$' } },
];

/** The integration limit routes of the OpenAPI document. */
export function limitPaths(parts: OpenApiParts, schemas: RequestSchemas): Record<string, JsonSchema> {
  const { ok, errors, body, read, write } = parts;
  return {
    '/limits': {
      get: {
        summary: 'Per cluster and integration: the limit in flight (own or default), its effective count, its start rate, tasks in flight now',
        responses: { 200: ok('Limits', limitsView), ...read },
      },
    },
    '/limits/{cluster}/{integration}': {
      put: {
        summary:
          'Set an integration’s own limit in one cluster (in flight, optionally with a start rate); stored in PostgreSQL and enforced by the ledger. A count above the cluster’s capacity is refused',
        parameters: pathParameters,
        requestBody: body(schemas.limitChange),
        responses: { 200: ok('Limits after the change', limitsView), ...write, ...errors(404) },
      },
      delete: {
        summary: 'Remove an integration’s own limit in one cluster: the default applies again',
        parameters: pathParameters,
        requestBody: { ...body(schemas.limitRemoval), required: false },
        responses: { 200: ok('Limits after the change', limitsView), ...write, ...errors(404) },
      },
    },
    '/limits/{cluster}/{integration}/history': {
      get: {
        summary: 'An integration in auto mode: each decision of the auto limiter, with the run time that drove it',
        parameters: pathParameters,
        responses: { 200: ok('Auto limit history', autoLimitHistory), ...read },
      },
    },
    '/limits/{cluster}/{integration}/series': {
      get: {
        summary:
          'One integration in one cluster per 10-second slot: its limit, in flight, waiting and refused at the limit, and its run time (p50, p99); kept in Redis for 1 h',
        parameters: [
          ...pathParameters,
          { name: 'minutes', in: 'query', schema: { type: 'string', pattern: '^\\d{1,3}$', default: '15' }, description: '1 to 60' },
        ],
        responses: { 200: ok('Limit series', limitSeries), ...read, ...errors(404) },
      },
    },
  };
}
