import { parseArgs } from 'node:util';
import { ConfigError } from './errors';
import { fromEnv } from './config';

/**
 * Reads a CLI's settings: every config key `fooBarMs` has the flag `--foo-bar-ms` and the env
 * variable `envNames.fooBarMs`; flags win over env. Values stay strings for the schema to check.
 */
export function readSettings(argv: readonly string[], env: NodeJS.ProcessEnv, envNames: Record<string, string>): { help: boolean; input: Record<string, string> } {
  const flagOf = (key: string) => key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`);
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: { ...Object.fromEntries(Object.keys(envNames).map((key) => [flagOf(key), { type: 'string' as const }])), help: { type: 'boolean' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new ConfigError(`${error instanceof Error ? error.message : String(error)} (--help lists the options)`);
  }
  const flags: Record<string, string> = {};
  for (const key of Object.keys(envNames)) {
    const value = values[flagOf(key)];
    if (typeof value === 'string') flags[key] = value;
  }
  return { help: values.help === true, input: { ...fromEnv(env, envNames), ...flags } };
}
