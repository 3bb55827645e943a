import { z } from 'zod';
import { settings } from '@headroom/common';

/** An integration tasks go to, and its weight among the others (tasks are spread in proportion). */
export interface WeightedIntegration {
  name: string;
  weight: number;
}

const maxIntegrations = 64;
/** Balancers one generator spreads its tasks over. */
export const maxBalancers = 64;
const maxWeight = 1_000_000;
/** The most tasks per second the generator sends, spikes included. */
export const maxRatePerS = 100_000;
const maxPayloadTemplateBytes = 64 * 1024;
const maxSpikeMs = 7 * 24 * 3600 * 1000;

const weightedIntegration = z
  .object({
    name: settings.name(),
    weight: z.coerce
      .number({ error: 'expected NAME or NAME:WEIGHT with a weight above 0, e.g. bank-a:3' })
      .positive('expected NAME or NAME:WEIGHT with a weight above 0, e.g. bank-a:3')
      .max(maxWeight, `expected a weight <= ${maxWeight}`)
      .default(1),
  })
  .strict();

/** "bank-a:3,bank-b" or ['bank-a:3', 'bank-b'] or [{ name: 'bank-a', weight: 3 }, ...]. */
const integrationList = z.preprocess(
  (value) => {
    const entries =
      typeof value === 'string'
        ? value
            .split(',')
            .map((entry) => entry.trim())
            .filter((entry) => entry !== '')
        : value;
    if (!Array.isArray(entries)) return entries;
    return entries.map((entry: unknown) => {
      if (typeof entry !== 'string') return entry;
      const [name, weight, ...rest] = entry.split(':');
      return rest.length > 0 ? { name: entry } : { name, ...(weight === undefined ? {} : { weight }) };
    });
  },
  z
    .array(weightedIntegration)
    .min(1, 'expected at least one integration')
    .max(maxIntegrations, `expected at most ${maxIntegrations} integrations`)
    .refine((list) => new Set(list.map((entry) => entry.name)).size === list.length, 'expected each integration once'),
);

/** A JSON object, given as such or as its text. */
const payloadTemplate = z
  .preprocess(
    (value, ctx) => {
      if (typeof value !== 'string') return value;
      try {
        return JSON.parse(value) as unknown;
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: `expected a JSON object such as {"sleepMs":20} (${error instanceof Error ? error.message : String(error)})` });
        return z.NEVER;
      }
    },
    z.record(z.string(), z.json(), { error: 'expected a JSON object such as {"sleepMs":20}' }),
  )
  .refine((template) => Buffer.byteLength(JSON.stringify(template)) <= maxPayloadTemplateBytes, `expected at most ${maxPayloadTemplateBytes} bytes of JSON`);

/** The integrations tasks are spread over unless told otherwise. */
export const defaultIntegrations: readonly string[] = Object.freeze(['bank-a', 'bank-b', 'bank-c']);

/** The fields of the load generator's options, before the checks that span several of them. */
export const loadGeneratorOptionFields = z
  .object({
    /** host:port of each balancer; tasks go to them in turn. */
    balancerAddresses: z
      .array(settings.hostPort(), { error: 'expected a list of host:port' })
      .min(1, 'expected at least one host:port')
      .max(maxBalancers, `expected at most ${maxBalancers} balancers`),
    /** Tasks started per second, whatever the answers do (open loop). @default 50 */
    ratePerS: z.coerce
      .number({ error: 'expected tasks per second, e.g. 50' })
      .positive('expected a rate above 0')
      .max(maxRatePerS, `expected at most ${maxRatePerS} tasks/s`)
      .default(50),
    /** Share of tasks marked USER_PRESENT; the rest are BACKGROUND. @default 0.1 */
    userPresentShare: settings.share().default(0.1),
    /** Integrations tasks are spread over, in proportion to their weights (1 unless given). @default bank-a, bank-b, bank-c */
    integrations: integrationList.default(defaultIntegrations.map((name) => ({ name, weight: 1 }))),
    /** Distinct task keys (accounts). @default 5000 */
    keyCount: settings.positiveInt(100_000_000).default(5000),
    /**
     * How much busier the busiest keys are: a key's rank is drawn from a power law with this
     * exponent (Zipf-like). 0: every key alike; 1: of 5000 keys, the busiest 1% get about 46% of the tasks. @default 1
     */
    keySkew: z.coerce
      .number({ error: 'expected a number from 0 to 3' })
      .min(0, 'expected a number from 0 to 3')
      .max(3, 'expected a number from 0 to 3')
      .default(1),
    /** Calls awaiting an answer at most; a task due while this many wait is dropped and counted. @default 1000 */
    maxOutstandingCalls: settings.positiveInt(100_000).default(1000),
    /** Each task's deadline, from when it is sent. @default 10000 */
    taskTimeoutMs: settings.positiveInt(3_600_000).default(10_000),
    /** Median simulated upstream time of the first and of the last integration. @default [20, 80] */
    medianSleepMsRange: z.tuple([settings.nonNegativeInt(60_000), settings.nonNegativeInt(60_000)]).default([20, 80]),
    /** Log-normal spread of upstream times. @default 0.8 */
    sleepSigma: z.coerce.number().min(0, 'expected a number from 0 to 3').max(3, 'expected a number from 0 to 3').default(0.8),
    /** Longest simulated upstream call. @default 2000 */
    maxSleepMs: settings.nonNegativeInt(600_000).default(2000),
    /**
     * Fields of every task's JSON payload, next to the drawn {"sleepMs"}; a "sleepMs" here
     * replaces the draw. By default the payload is only the draw.
     */
    payload: payloadTemplate.optional(),
    /** Periodic spikes: the first starts after this long, the next this long after it, ...; 0: none. @default 0 */
    spikeEveryMs: settings.nonNegativeInt(maxSpikeMs).default(0),
    /** A one-shot spike this long after the start. */
    spikeAtMs: settings.nonNegativeInt(maxSpikeMs).optional(),
    /** How long each spike lasts; shorter than spikeEveryMs. @default 30000 */
    spikeDurationMs: settings.positiveInt(maxSpikeMs).default(30_000),
    /** During a spike, background tasks are sent at this many times their rate; user-present ones are not. @default 10 */
    spikeFactor: z.coerce
      .number({ error: 'expected a number from 0 to 1000' })
      .min(0, 'expected a number from 0 to 1000')
      .max(1000, 'expected a number from 0 to 1000')
      .default(10),
    /** On close, how long to wait for outstanding answers before cancelling them. @default 5000 */
    drainTimeoutMs: settings.nonNegativeInt(600_000).default(5000),
  })
  .strict();

type SpikeFields = Pick<
  z.output<typeof loadGeneratorOptionFields>,
  'ratePerS' | 'userPresentShare' | 'spikeEveryMs' | 'spikeAtMs' | 'spikeDurationMs' | 'spikeFactor'
>;

type SpikeKey = 'spikeEveryMs' | 'ratePerS';

/**
 * What is wrong across the spike settings, by the setting to change (one the user gave: a
 * default alone cannot be wrong). Shared with the CLI, which speaks in seconds.
 */
export function spikeProblems(options: SpikeFields): { key: SpikeKey; message: string }[] {
  const problems: { key: SpikeKey; message: string }[] = [];
  if (options.spikeEveryMs > 0 && options.spikeDurationMs >= options.spikeEveryMs) {
    problems.push({
      key: 'spikeEveryMs',
      message: `expected longer than a spike lasts (${options.spikeDurationMs / 1000} s), so that steady load comes between spikes`,
    });
  }
  const peakRatePerS = options.ratePerS * (options.userPresentShare + (1 - options.userPresentShare) * options.spikeFactor);
  // The default rate times the largest factor stays under the limit, so the rate was given.
  if ((options.spikeEveryMs > 0 || options.spikeAtMs !== undefined) && peakRatePerS > maxRatePerS) {
    problems.push({
      key: 'ratePerS',
      message: `a spike (background x${options.spikeFactor}) would send ${Math.round(peakRatePerS)} tasks/s; expected at most ${maxRatePerS} then`,
    });
  }
  return problems;
}

/** Options of the load generator: one schema validates them, fills defaults and gives the types. */
export const loadGeneratorOptionsSchema = loadGeneratorOptionFields.superRefine((options, ctx) => {
  for (const { key, message } of spikeProblems(options)) ctx.addIssue({ code: 'custom', path: [key], message });
});

export type LoadGeneratorOptions = z.input<typeof loadGeneratorOptionsSchema>;
export type LoadGeneratorConfig = z.output<typeof loadGeneratorOptionsSchema>;
