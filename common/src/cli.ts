import { parseArgs } from 'node:util';
import { ConfigError } from './errors';
import { fromEnv } from './config';

/**
 * Reads a CLI's settings: every config key `fooBarMs` has the flag `--foo-bar-ms` and the env
 * variable `envNames.fooBarMs`; flags win over env. Values stay strings for the schema to check.
 */
const flagOf = (key: string) => `--${key.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`)}`;

/** For parseConfig: names a setting the way a CLI user sets it, e.g. "maxParallelism (--max-parallelism, HEADROOM_MAX_PARALLELISM)". */
export function settingNamer(envNames: Record<string, string>): (path: string) => string {
  return (path) => (envNames[path] ? `${path} (${flagOf(path)}, ${envNames[path]})` : path);
}

export function readSettings(argv: readonly string[], env: NodeJS.ProcessEnv, envNames: Record<string, string>): { help: boolean; input: Record<string, string> } {
  let values: Record<string, string | boolean | undefined>;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      options: { ...Object.fromEntries(Object.keys(envNames).map((key) => [flagOf(key).slice(2), { type: 'string' as const }])), help: { type: 'boolean' } },
      strict: true,
      allowPositionals: false,
    }));
  } catch (error) {
    throw new ConfigError(`${error instanceof Error ? error.message : String(error)} (--help lists the options)`);
  }
  const flags: Record<string, string> = {};
  for (const key of Object.keys(envNames)) {
    const value = values[flagOf(key).slice(2)];
    if (typeof value === 'string') flags[key] = value;
  }
  return { help: values.help === true, input: { ...fromEnv(env, envNames), ...flags } };
}

/**
 * Resolves with the name of the first SIGTERM or SIGINT, including one that arrives while the
 * process is still starting, so the caller can stop gracefully once it is up. Later signals
 * are absorbed: a second Ctrl-C must not cut a drain short.
 */
export function stopSignal(): Promise<NodeJS.Signals> {
  return new Promise((resolve) => {
    for (const signal of ['SIGTERM', 'SIGINT'] as const) process.on(signal, () => resolve(signal));
  });
}
