import { z } from 'zod';
import { maxProfilesListed, type ProfileRequestSchemas } from './profile-schemas';

type JsonSchema = Record<string, unknown>;

/** The document builders of openapi.ts, passed in (this file is a part of that document). */
export interface OpenApiParts {
  ok(description: string, schema: JsonSchema): JsonSchema;
  errors(...statuses: number[]): JsonSchema;
  body(schema: z.ZodType): JsonSchema;
  read: JsonSchema;
  write: JsonSchema;
}

const profileRecord: JsonSchema = {
  type: 'object',
  properties: {
    profileId: { type: 'string' },
    workerId: { type: 'string' },
    cluster: { type: 'string' },
    address: { type: 'string' },
    durationMs: { type: 'integer' },
    actor: { type: 'string' },
    status: { type: 'string', enum: ['running', 'done', 'failed'] },
    startedAtUnixMs: { type: 'integer' },
    deadlineUnixMs: { type: 'integer', description: 'A profile still running past this was abandoned' },
    finishedAtUnixMs: { type: 'integer' },
    cpuprofileBytes: { type: 'integer' },
    summary: {
      type: 'object',
      properties: {
        profiledMs: { type: 'number' },
        samples: { type: 'integer' },
        idleMs: { type: 'number' },
        topFunctions: {
          type: 'array',
          description: 'Functions (name + url + line) by self time, most first',
          items: {
            type: 'object',
            properties: {
              functionName: { type: 'string' },
              url: { type: 'string' },
              lineNumber: { type: 'integer', description: '1-based; 0 for native code' },
              location: { type: 'string', description: 'url:line' },
              selfMs: { type: 'number' },
              share: { type: 'number', description: 'Of the CPU time: the sampled time less idle, as in the flame graph (0..1)' },
            },
          },
        },
      },
    },
    error: { type: 'object', properties: { code: { type: 'string' }, message: { type: 'string' } } },
  },
};

export function profilePaths(parts: OpenApiParts, schemas: ProfileRequestSchemas): JsonSchema {
  const { ok, errors, body, read, write } = parts;
  const profileId = { name: 'profileId', in: 'path', required: true, schema: z.toJSONSchema(schemas.profileId) };
  return {
    '/profiles': {
      get: {
        summary: 'CPU profiles kept (newest first)',
        parameters: [{ name: 'limit', in: 'query', schema: { type: 'integer', minimum: 1, maximum: maxProfilesListed, default: 20 } }],
        responses: { 200: ok('Profiles', { type: 'object', properties: { profiles: { type: 'array', items: profileRecord } } }), ...read, ...errors(400) },
      },
      post: {
        summary:
          'Profile one worker’s CPU for durationMs (node:inspector, no restart); one worker at a time across the fleet. Answers at once; poll the Location',
        requestBody: body(schemas.profileStart),
        responses: { 202: ok('Started: status "running"', profileRecord), ...write, ...errors(404, 409) },
      },
    },
    '/profiles/{profileId}': {
      get: {
        summary: 'A profile: status, and once done the top functions by self time',
        parameters: [profileId],
        responses: { 200: ok('Profile', profileRecord), ...read, ...errors(400, 404) },
      },
    },
    '/profiles/{profileId}/cpuprofile': {
      get: {
        summary: 'Download the .cpuprofile (Chrome DevTools: Performance > Load profile; or speedscope.app)',
        parameters: [profileId],
        responses: { 200: { description: 'The .cpuprofile JSON, as an attachment' }, ...read, ...errors(400, 404) },
      },
    },
  };
}
