import { z } from 'zod';
import { settings } from '@headroom/common';

const integrationList = z.preprocess(
  (value) => (typeof value === 'string' ? value.split(',').map((name) => name.trim()).filter((name) => name !== '') : value),
  z.array(settings.name()).min(1, 'expected at least one integration').max(64, 'expected at most 64 integrations'),
);

/** The integrations tasks are spread over unless told otherwise. */
export const defaultIntegrations: readonly string[] = Object.freeze(['bank-a', 'bank-b', 'bank-c']);

/** Options of the load generator: one schema validates them, fills defaults and gives the types. */
export const loadGeneratorOptionsSchema = z
  .object({
    /** host:port of a balancer. */
    balancerAddress: settings.hostPort(),
    /** Tasks started per second, whatever the answers do (open loop). @default 50 */
    ratePerS: z.coerce.number({ error: 'expected tasks per second, e.g. 50' }).positive('expected a rate above 0').max(100_000, 'expected at most 100000 tasks/s').default(50),
    /** Share of tasks marked USER_PRESENT; the rest are BACKGROUND. @default 0.1 */
    userPresentShare: settings.share().default(0.1),
    /** Integrations tasks are spread over (evenly). @default ['bank-a', 'bank-b', 'bank-c'] */
    integrations: integrationList.default([...defaultIntegrations]),
    /** Distinct task keys (accounts). @default 1000 */
    keyCount: settings.positiveInt(100_000_000).default(1000),
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
    /** On close, how long to wait for outstanding answers before cancelling them. @default 5000 */
    drainTimeoutMs: settings.nonNegativeInt(600_000).default(5000),
  })
  .strict();

export type LoadGeneratorOptions = z.input<typeof loadGeneratorOptionsSchema>;
export type LoadGeneratorConfig = z.output<typeof loadGeneratorOptionsSchema>;
