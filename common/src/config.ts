import { z } from 'zod';
import { ConfigError } from './errors';
import { parseRedisUrl } from './redis-url';

/**
 * Validates `input` against `schema`, filling defaults. On failure throws one ConfigError
 * that names every bad setting, the value given and what is accepted, e.g.
 *   invalid worker config: maxParallelism: got 0, expected a number >= 1
 */
export function parseConfig<S extends z.ZodType>(what: string, schema: S, input: unknown): z.output<S> {
  const result = schema.safeParse(input);
  if (result.success) return result.data;
  const lines = result.error.issues.map((issue) => `  ${describeIssue(issue, input)}`);
  throw new ConfigError(`invalid ${what}:\n${lines.join('\n')}`);
}

function describeIssue(issue: z.core.$ZodIssue, input: unknown): string {
  const path = issue.path.length > 0 ? issue.path.join('.') : '(root)';
  if (issue.code === 'unrecognized_keys') {
    return `${path}: unknown setting(s) ${issue.keys.map((k) => JSON.stringify(k)).join(', ')}`;
  }
  const given = valueAt(input, issue.path);
  if (given === undefined && issue.code === 'invalid_type') return `${path}: missing (required)`;
  const got = given === undefined ? 'nothing' : JSON.stringify(given);
  return `${path}: got ${got}, ${issue.message}`;
}

function valueAt(input: unknown, path: readonly PropertyKey[]): unknown {
  let value: unknown = input;
  for (const key of path) {
    if (value === null || typeof value !== 'object') return undefined;
    value = (value as Record<PropertyKey, unknown>)[key];
  }
  return value;
}

/** Schema helpers shared by every process's config: names carry units. */
export const settings = {
  positiveInt: (max = Number.MAX_SAFE_INTEGER) =>
    z.coerce
      .number({ error: 'expected a whole number' })
      .int('expected a whole number')
      .min(1, 'expected a number >= 1')
      .max(max, `expected a number <= ${max}`),
  nonNegativeInt: (max = Number.MAX_SAFE_INTEGER) =>
    z.coerce
      .number({ error: 'expected a whole number' })
      .int('expected a whole number')
      .min(0, 'expected a number >= 0')
      .max(max, `expected a number <= ${max}`),
  share: () => z.coerce.number({ error: 'expected a number from 0 to 1' }).min(0, 'expected a number from 0 to 1').max(1, 'expected a number from 0 to 1'),
  name: () => z.string().regex(/^[a-z0-9][a-z0-9._-]{0,63}$/, 'expected 1-64 characters of a-z, 0-9, ".", "_", "-", starting with a letter or digit'),
  redisUrl: () =>
    z.string().superRefine((value, ctx) => {
      try {
        parseRedisUrl(value);
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message, input: value });
      }
    }),
  keyPrefix: () =>
    z
      .string()
      .regex(/^[A-Za-z0-9:._-]{1,64}$/, 'expected 1-64 characters of A-Z, a-z, 0-9, ":", ".", "_", "-"')
      .default('hr'),
  /** On or off: a boolean, or (from a flag or env) true/false/1/0. */
  switch: () =>
    z.preprocess(
      (value) => (value === 'true' || value === '1' ? true : value === 'false' || value === '0' ? false : value),
      z.boolean({ error: 'expected true or false (or 1 or 0)' }),
    ),
  hostPort: () => z.string().regex(/^[^\s:]+:\d{1,5}$|^\[[0-9a-fA-F:]+\]:\d{1,5}$/, 'expected host:port, e.g. 127.0.0.1:7001'),
};
