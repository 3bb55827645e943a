import { z } from 'zod';
import { ConfigError, settings, type Logger, type OptionSpec } from '@headroom/common';
import type { Registry } from 'prom-client';
import { startFlagClient, type FlagClient } from './flag-client';
import { defaultFlagNames } from './flag-names';

/** The options every process that reads flags (balancer, worker) takes, by flag or env. */
export const flagOptionSpecs: readonly OptionSpec[] = [
  {
    key: 'unleashUrl',
    flag: 'unleash-url',
    env: 'UNLEASH_URL',
    valueName: 'URL',
    description: 'Unleash server to read flags from, e.g. http://127.0.0.1:4242 (default: none, no flags)',
  },
  {
    key: 'unleashClientToken',
    flag: 'unleash-client-token',
    env: 'UNLEASH_CLIENT_TOKEN',
    valueName: 'TOKEN',
    description: 'a client (backend) token of that server; required with --unleash-url',
    secret: true,
  },
  {
    key: 'flagsRefreshIntervalMs',
    flag: 'flags-refresh-interval-ms',
    env: 'HEADROOM_FLAGS_REFRESH_INTERVAL_MS',
    valueName: 'MS',
    description: 'how often flags are fetched',
  },
  {
    key: 'candidateFlag',
    flag: 'candidate-flag',
    env: 'HEADROOM_CANDIDATE_FLAG',
    valueName: 'NAME',
    description: `Unleash flag of the candidate cluster's traffic`,
  },
  { key: 'parallelismFlag', flag: 'parallelism-flag', env: 'HEADROOM_PARALLELISM_FLAG', valueName: 'NAME', description: `Unleash flag of max parallelism` },
];

export const flagNameSetting = () => z.string().regex(/^[A-Za-z0-9._-]{1,100}$/, 'expected 1-100 characters of A-Z, a-z, 0-9, ".", "_", "-"');

export const flagOptionsShape = {
  unleashUrl: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL such as http://127.0.0.1:4242' }).optional(),
  unleashClientToken: z.string().min(1).optional(),
  flagsRefreshIntervalMs: settings.positiveInt(600_000).default(1000),
  candidateFlag: flagNameSetting().default(defaultFlagNames.candidateCluster),
  parallelismFlag: flagNameSetting().default(defaultFlagNames.maxParallelism),
};

export interface FlagCliOptions {
  unleashUrl?: string | undefined;
  unleashClientToken?: string | undefined;
  flagsRefreshIntervalMs: number;
  candidateFlag: string;
  parallelismFlag: string;
}

/** Starts a flag client when --unleash-url is given; undefined otherwise. */
export async function startFlagClientFromOptions(
  options: FlagCliOptions,
  identity: { appName: string; instanceId: string },
  deps: { logger: Logger; registry?: Registry },
): Promise<FlagClient | undefined> {
  if (options.unleashUrl === undefined) return undefined;
  if (options.unleashClientToken === undefined) throw new ConfigError('--unleash-client-token (env UNLEASH_CLIENT_TOKEN): required with --unleash-url');
  return startFlagClient(
    {
      url: options.unleashUrl,
      clientToken: options.unleashClientToken,
      ...identity,
      refreshIntervalMs: options.flagsRefreshIntervalMs,
      flagNames: { candidateCluster: options.candidateFlag, maxParallelism: options.parallelismFlag },
    },
    deps,
  );
}
