import { z } from 'zod';
import { profileLimits } from '@headroom/proto';
import type { RequestSchemas } from './schemas';

const durationWords = `expected a whole number of milliseconds from ${profileLimits.minDurationMs} to ${profileLimits.maxDurationMs}`;

/** Most profiles one list returns. */
export const maxProfilesListed = 100;

/** The request schemas of /profiles. */
export function profileRequestSchemas(workerId: RequestSchemas['workerId']) {
  return {
    profileStart: z
      .object({
        workerId: workerId.describe('The worker to profile (GET /workers lists them)'),
        durationMs: z
          .number({ error: durationWords })
          .int(durationWords)
          .min(profileLimits.minDurationMs, durationWords)
          .max(profileLimits.maxDurationMs, durationWords)
          .default(10_000)
          .describe('How long to sample its CPU'),
      })
      .strict(),
    profileId: z.string().regex(/^\d{1,16}-[0-9a-f]{8}$/, 'expected a profile id such as 1700000000000-0a1b2c3d'),
    profileListQuery: z
      .object({
        limit: z.coerce
          .number({ error: `expected a whole number from 1 to ${maxProfilesListed}` })
          .int()
          .min(1, `expected a whole number from 1 to ${maxProfilesListed}`)
          .max(maxProfilesListed, `expected a whole number from 1 to ${maxProfilesListed}`)
          .default(20),
      })
      .strict(),
  };
}

export type ProfileRequestSchemas = ReturnType<typeof profileRequestSchemas>;
