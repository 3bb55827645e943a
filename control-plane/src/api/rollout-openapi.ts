import { z } from 'zod';
import type { OpenApiParts } from './profile-openapi';
import type { RequestSchemas } from './schemas';

type JsonSchema = Record<string, unknown>;

const gateReading: JsonSchema = {
  type: 'object',
  properties: {
    gate: { type: 'string', enum: ['p50Ratio', 'p95Ratio', 'errorRateIncrease', 'gcShare', 'eventLoopUtilization', 'eventLoopDelayP99Ms', 'heapShare'] },
    value: { type: ['number', 'null'], description: 'null: not enough data' },
    line: { type: 'number' },
    status: { type: 'string', enum: ['ok', 'close', 'breached', 'not-enough-data'], description: 'close: above 90% of the line' },
  },
};

const rollout: JsonSchema = {
  type: 'object',
  properties: {
    id: { type: 'string' },
    plan: { type: 'object', description: 'The plan as given, every default filled in' },
    status: { type: 'string', enum: ['running', 'paused', 'completed', 'rolled-back', 'aborted'] },
    createdBy: { type: 'string' },
    createdAtUnixMs: { type: 'integer' },
    updatedAtUnixMs: { type: 'integer' },
    finishedAtUnixMs: { type: ['integer', 'null'] },
    step: { type: 'integer', description: 'The step in effect, 0-based' },
    stepStartedAtUnixMs: { type: 'integer', description: 'When the step (or the latest raise of a search) took effect; gates are judged on windows after it' },
    maxParallelism: { type: 'integer', description: "The candidate cluster's max parallelism the autopilot set" },
    search: { type: ['object', 'null'], properties: { current: { type: 'integer' }, highestHeld: { type: ['integer', 'null'] } } },
    heldSinceUnixMs: { type: ['integer', 'null'], description: 'Since when every gate held without a break' },
    closeSinceUnixMs: { type: ['integer', 'null'], description: 'Since when a gate has been close to its line in this hold, which then lasts twice as long' },
    baselineUntilUnixMs: {
      type: ['integer', 'null'],
      description: "On a step at 100%: the baseline's figures are those of the window that ended then (it runs none of the plan's tasks now)",
    },
    closeGates: { type: ['string', 'null'], description: 'The gates close to their lines at the latest hold decision, e.g. "bank-a:p95Ratio"' },
    rolledBack: { type: 'array', items: { type: 'string' }, description: 'Integrations the autopilot rolled back (the rest go on)' },
    waitingFor: { type: ['string', 'null'], description: 'Why it does not advance now' },
    pending: {
      type: ['object', 'null'],
      description:
        'A decision written before it is acted on, being applied (or left half done by a control plane that stopped; the next one finishes it): see docs/rollouts.md',
      properties: {
        id: { type: 'string' },
        actions: { type: 'array', items: { type: 'object' } },
        decisions: { type: 'array', items: { type: 'object' } },
        status: { type: 'string' },
        maxParallelism: { type: 'integer' },
      },
    },
    lastReading: {
      type: ['object', 'null'],
      properties: {
        atUnixMs: { type: 'integer' },
        windowSeconds: { type: 'integer' },
        integrations: {
          type: 'array',
          items: {
            type: 'object',
            properties: {
              integration: { type: 'string' },
              samples: { type: 'object' },
              status: { type: 'string' },
              gates: { type: 'array', items: gateReading },
            },
          },
        },
        workers: { type: 'object', properties: { reporting: { type: 'integer' }, status: { type: 'string' }, gates: { type: 'array', items: gateReading } } },
      },
    },
    decisions: {
      type: 'array',
      description: 'The latest 200, oldest first (the audit log keeps every one)',
      items: {
        type: 'object',
        properties: {
          atUnixMs: { type: 'integer' },
          kind: { type: 'string', enum: ['start', 'step', 'raise', 'back-off', 'hold', 'rollback', 'complete', 'pause', 'resume', 'abort'] },
          step: { type: 'integer' },
          integration: { type: 'string' },
          message: { type: 'string' },
          actor: { type: 'string' },
        },
      },
    },
  },
};

export function rolloutPaths(parts: OpenApiParts, schemas: RequestSchemas): JsonSchema {
  const { ok, errors, body, read, write } = parts;
  const rolloutId = { name: 'rolloutId', in: 'path', required: true, schema: z.toJSONSchema(schemas.rolloutId) };
  const action = (summary: string) => ({
    post: {
      summary,
      parameters: [rolloutId],
      requestBody: { ...body(schemas.rolloutAction), required: false },
      responses: { 200: ok('The rollout after the change', rollout), ...write, ...errors(404, 409) },
    },
  });
  return {
    '/rollouts': {
      get: {
        summary:
          'The rollout running or paused now (else the latest), the finished ones (latest 20), and whether this control plane’s autopilot is the one acting',
        responses: {
          200: ok('Rollouts', {
            type: 'object',
            properties: { current: { ...rollout, type: ['object', 'null'] }, history: { type: 'array', items: rollout }, actingHere: { type: 'boolean' } },
          }),
          ...read,
        },
      },
      post: {
        summary:
          'Start a rollout: its first step takes effect now, the autopilot takes the next ones as the gates hold, and rolls an integration back when one of its gates breaks. One at a time (409 while one runs or is paused)',
        requestBody: body(schemas.rolloutPlan),
        responses: { 201: ok('Started', rollout), ...write, ...errors(409) },
      },
    },
    '/rollouts/{rolloutId}': {
      get: {
        summary: 'One rollout: its plan, step, gates as last read, and decisions',
        parameters: [rolloutId],
        responses: { 200: ok('Rollout', rollout), ...read, ...errors(400, 404) },
      },
    },
    '/rollouts/{rolloutId}/pause': action('Pause: the autopilot stops acting; traffic and parallelism stay'),
    '/rollouts/{rolloutId}/resume': action('Resume a paused rollout: the gates must hold a whole hold again, on windows after now'),
    '/rollouts/{rolloutId}/abort': action('End the rollout; traffic and parallelism stay as they are (roll back separately if wanted)'),
  };
}
