import { z } from 'zod';
import { maxParallelismLimit } from '@headroom/flags';
import { userKeyedMap } from '@headroom/common';
import { InvalidRequestError, type FieldProblem } from '../errors';
import type { AuditAction } from '../record/audit-entry';
import { planSchema } from '../rollouts/plan';

/** The actions an audit entry can have (GET /audit?action=...). */
export const auditActions = [
  'traffic.set',
  'parallelism.set',
  'rollback',
  'resume',
  'worker.drain',
  'override.rebuild',
  'profile.start',
  'rollout.start',
  'rollout.pause',
  'rollout.resume',
  'rollout.abort',
  'rollout.decision',
  'limit.set',
  'limit.remove',
  'limit.reapply',
  'limit.auto',
] as const satisfies readonly AuditAction[];

const percent = z
  .number({ error: 'expected a whole number from 0 to 100' })
  .int('expected a whole number from 0 to 100')
  .min(0, 'expected a whole number from 0 to 100')
  .max(100, 'expected a whole number from 0 to 100');

const maxParallelism = z
  .number({ error: `expected a whole number from 1 to ${maxParallelismLimit}, or null for the workers' own setting` })
  .int(`expected a whole number from 1 to ${maxParallelismLimit}`)
  .min(1, `expected a whole number from 1 to ${maxParallelismLimit}`)
  .max(maxParallelismLimit, `expected a whole number from 1 to ${maxParallelismLimit}`)
  .nullable();

/** The request schemas; they depend on the configured integrations and clusters. */
export function requestSchemas(integrations: readonly string[], clusters: readonly string[]) {
  const integration = z.string({ error: 'expected an integration name' }).refine((name) => integrations.includes(name), {
    message: `unknown integration; accepted: ${integrations.join(', ') || '(none configured)'}`,
  });
  return {
    trafficChange: z
      .object({
        defaultPercent: percent.optional().describe('Percent of task keys of integrations without a strategy of their own that go to the candidate cluster'),
        integrations: userKeyedMap(percent, { what: 'integration', accepted: integrations }).optional().describe('Percent per integration'),
      })
      .strict()
      .refine((c) => c.defaultPercent !== undefined || c.integrations !== undefined, {
        message: 'expected defaultPercent and/or integrations',
        path: ['defaultPercent'],
      }),
    parallelismChange: z
      .object({
        clusters: userKeyedMap(maxParallelism, { what: 'cluster', accepted: clusters }).describe(
          "Max parallelism per cluster; null returns the cluster's workers to their own setting",
        ),
      })
      .strict(),
    scope: z
      .object({
        integration: integration.optional().describe('One integration; absent means all'),
        reason: z.string().max(500, 'expected at most 500 characters').optional().describe('Recorded in the audit log'),
      })
      .strict(),
    latencyQuery: z
      .object({
        window: z
          .string()
          .regex(/^\d{1,5}[smh]$/, 'expected a duration such as 30s, 5m or 1h')
          .transform((text) => Number(text.slice(0, -1)) * { s: 1000, m: 60_000, h: 3_600_000 }[text.slice(-1) as 's' | 'm' | 'h'])
          .refine((ms) => ms >= 10_000 && ms <= 3_600_000, 'expected a window from 10s to 1h (the summaries kept)')
          .default(300_000)
          .describe('How far back: 10s to 1h (default 5m)'),
      })
      .strict(),
    auditQuery: z
      .object({
        limit: z.coerce
          .number({ error: 'expected a whole number from 1 to 1000' })
          .int()
          .min(1, 'expected a whole number from 1 to 1000')
          .max(1000, 'expected a whole number from 1 to 1000')
          .default(100),
        before: z
          .string()
          .regex(/^[1-9]\d{0,17}$/, 'expected an audit entry id such as 1234 (the id of the last entry of the page before)')
          .optional(),
        action: z.enum(auditActions, { error: `expected one of ${auditActions.join(', ')}` }).optional(),
        actor: z
          .string()
          .regex(/^[A-Za-z0-9._@-]{1,64}$/, 'expected a token name (1-64 characters of A-Z, a-z, 0-9, ".", "_", "@", "-")')
          .optional(),
      })
      .strict(),
    workerId: z.string().regex(/^[A-Za-z0-9._-]{1,128}$/, 'expected 1-128 characters of A-Z, a-z, 0-9, ".", "_", "-"'),
    rolloutPlan: planSchema(integrations),
    rolloutId: z.string().regex(/^ro-[0-9a-f]{10}$/, 'expected a rollout id such as ro-0123456789'),
    limitCluster: z.string().regex(/^[A-Za-z0-9._-]{1,64}$/, 'expected a cluster name (1-64 characters of A-Z, a-z, 0-9, ".", "_", "-")'),
    limitIntegration: z
      .string()
      .regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, 'expected 1-64 characters of a-z, 0-9, ".", "_", "-" such as "bank-a"')
      .refine((name) => !(name in Object.prototype), 'expected an integration name, not a name JavaScript objects reserve'),
    limitChange: z
      .object({
        limit: z
          .unknown()
          .describe(
            'One of {"maxInFlight": n}, {"shareOfCapacity": x} with x in (0, 1], {"off": true}, each optionally with "maxStartsPerSecond": r (0.001 to 1000000), or {"maxStartsPerSecond": r} alone, or {"auto": {"minInFlight": n, "maxInFlight": m}}',
          ),
        reason: z.string().max(500, 'expected at most 500 characters').optional().describe('Recorded in the audit log'),
      })
      .strict()
      .refine((body) => body.limit !== undefined, {
        message: 'required: expected one of {"maxInFlight": n}, {"shareOfCapacity": x}, {"off": true}, each optionally with "maxStartsPerSecond": r',
        path: ['limit'],
      }),
    limitSeriesQuery: z
      .object({
        minutes: z
          .string()
          .regex(/^\d{1,3}$/, 'expected a whole number of minutes from 1 to 60')
          .transform(Number)
          .refine((minutes) => minutes >= 1 && minutes <= 60, 'expected a whole number of minutes from 1 to 60 (the slots kept)')
          .default(15)
          .describe('How far back, in minutes: 1 to 60 (default 15)'),
      })
      .strict(),
    limitRemoval: z.object({ reason: z.string().max(500, 'expected at most 500 characters').optional().describe('Recorded in the audit log') }).strict(),
    rolloutAction: z.object({ reason: z.string().max(500, 'expected at most 500 characters').optional().describe('Recorded in the audit log') }).strict(),
  };
}

export type RequestSchemas = ReturnType<typeof requestSchemas>;

/** Parses `value` or throws InvalidRequestError naming every bad field under `where` ("body", "query"). */
export function parseRequest<S extends z.ZodType>(schema: S, value: unknown, where: string): z.output<S> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  const problems: FieldProblem[] = [];
  for (const issue of result.error.issues) {
    const at = [where, ...issue.path.map(String)].join('.');
    if (issue.code === 'unrecognized_keys') {
      const accepted = acceptedKeys(schema, issue.path);
      for (const key of issue.keys) problems.push({ field: `${at}.${key}`, message: `unknown field${accepted ? `; accepted: ${accepted.join(', ')}` : ''}` });
    } else if (issue.code === 'invalid_type' && issue.input === undefined && issue.path.length > 0) {
      problems.push({ field: at, message: `required: ${issue.message}` });
    } else {
      problems.push({ field: at, message: issue.message });
    }
  }
  throw new InvalidRequestError(problems);
}

/** The field names an object schema accepts at `path`, when it can be told. */
function acceptedKeys(schema: z.ZodType, path: readonly PropertyKey[]): string[] | undefined {
  let current: unknown = schema;
  for (const key of path) {
    current = unwrap(current);
    const shape = (current as { shape?: Record<string, unknown> }).shape;
    if (!shape) return undefined;
    current = shape[String(key)];
  }
  const shape = (unwrap(current) as { shape?: Record<string, unknown> } | undefined)?.shape;
  return shape ? Object.keys(shape) : undefined;
}

function unwrap(schema: unknown): unknown {
  let current = schema as { unwrap?: () => unknown } | undefined;
  while (current && typeof current.unwrap === 'function') current = current.unwrap() as typeof current;
  return current;
}
