/**
 * Reads a CLI's settings from flags and env through one schema, and words every problem
 * in terms of the flag (or env variable) the user typed. Every Headroom CLI uses it.
 */
import { parseArgs } from 'node:util';
import { ZodDefault, type z } from 'zod';
import { ConfigError } from './errors';

export interface OptionSpec {
  /** Key in the schema, e.g. baselineWorkers. */
  key: string;
  /** e.g. baseline-workers */
  flag: string;
  /** e.g. HEADROOM_DEMO_BASELINE_WORKERS */
  env?: string;
  /** e.g. N, for the usage text; omitted for a switch (a flag without a value). */
  valueName?: string;
  /** A switch: `--flag` alone turns it on; its env variable takes true/false (1/0). Read it with settings.switch(). */
  isSwitch?: boolean;
  description: string;
  /** How the default reads in the usage text, where the schema's value would mislead (computed at start, or a list). */
  defaultText?: string;
  /** A secret (token): never echoed in error messages. */
  secret?: boolean;
}

/** The two clusters a balancer routes between and a control plane manages: named alike in both. */
export const clusterOptionSpecs: readonly OptionSpec[] = [
  {
    key: 'baselineCluster',
    flag: 'baseline-cluster',
    env: 'HEADROOM_BASELINE_CLUSTER',
    valueName: 'NAME',
    description: 'the cluster that runs what is not sent to the candidate',
  },
  {
    key: 'candidateCluster',
    flag: 'candidate-cluster',
    env: 'HEADROOM_CANDIDATE_CLUSTER',
    valueName: 'NAME',
    description: 'the cluster that takes the candidate share',
  },
];

export type ParsedOptions<T> = { help: true } | { help: false; config: T };

/**
 * The usage text. Each option's default comes from the schema (`.default()`), so that it is
 * written once: a description states only what the schema cannot, such as a default computed at
 * start.
 */
export function usageText(synopsis: string, specs: readonly OptionSpec[], schema: z.ZodObject): string {
  const defaults = schemaDefaults(schema);
  const heads = specs.map((spec) => `  --${spec.flag}${spec.valueName ? ` ${spec.valueName}` : ''}`);
  const width = Math.max(...heads.map((head) => head.length)) + 2;
  const lines = specs.map((spec, i) => {
    const fallback = spec.defaultText ?? defaults.get(spec.key);
    const defaultNote = fallback === undefined ? '' : ` (default ${fallback})`;
    return `${heads[i]!.padEnd(width)}${spec.description}${defaultNote}${spec.env ? ` (env ${spec.env})` : ''}`;
  });
  return [synopsis, ...lines, `${'  --help'.padEnd(width)}this text`].join('\n');
}

/** The default of each field of `schema` that has one, as the usage text writes it. */
export function schemaDefaults(schema: z.ZodObject): Map<string, string> {
  const defaults = new Map<string, string>();
  for (const [key, field] of Object.entries(schema.shape)) {
    if (!(field instanceof ZodDefault)) continue;
    const value: unknown = field.def.defaultValue;
    if (value === undefined || (Array.isArray(value) && value.length === 0)) continue;
    defaults.set(key, typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean' ? String(value) : JSON.stringify(value));
  }
  return defaults;
}

/** The password of a URL (redis://user:secret@host, and a sentinelPassword parameter) replaced by ***: values are echoed in errors and logs. */
export function withoutPassword(text: string): string {
  return text.replace(/\/\/([^/@:\s]*):[^/@\s]*@/g, '//$1:***@').replace(/([?&]sentinelPassword=)[^&\s]*/g, '$1***');
}

/** Flags win over env. Throws ConfigError naming the flag or env variable, the value and what is accepted. */
export function readOptions<S extends z.ZodType>(
  schema: S,
  specs: readonly OptionSpec[],
  argv: readonly string[],
  env: NodeJS.ProcessEnv,
): ParsedOptions<z.output<S>> {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: {
        ...Object.fromEntries(specs.map((spec) => [spec.flag, { type: spec.isSwitch ? ('boolean' as const) : ('string' as const) }])),
        help: { type: 'boolean' as const },
      },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new ConfigError(error instanceof Error ? error.message : String(error));
  }
  if (values.help) return { help: true };
  const input: Record<string, string> = {};
  const source = new Map<string, string>();
  for (const spec of specs) {
    const fromFlag = values[spec.flag];
    const fromEnv = spec.env === undefined ? undefined : env[spec.env];
    if (typeof fromFlag === 'string' || typeof fromFlag === 'boolean') {
      input[spec.key] = String(fromFlag);
      source.set(spec.key, `--${spec.flag}`);
    } else if (fromEnv !== undefined && fromEnv !== '') {
      input[spec.key] = fromEnv;
      source.set(spec.key, `${spec.env} (env)`);
    }
  }
  const result = schema.safeParse(input);
  if (result.success) return { help: false, config: result.data };
  const problems = result.error.issues.map((issue) => {
    const key = String(issue.path[0] ?? '');
    const spec = specs.find((s) => s.key === key);
    const name = source.get(key) ?? (spec ? `--${spec.flag}` : key || 'options');
    const given = input[key];
    if (given === undefined) return `${name}: required${spec?.valueName ? ` (${spec.valueName})` : ''}`;
    if (spec?.secret) return `${name}: ${issue.message}`;
    return `${name}: got ${JSON.stringify(withoutPassword(given))}, ${issue.message}`;
  });
  throw new ConfigError(problems.join('\n'));
}
