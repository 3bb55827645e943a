/**
 * A rollout plan: the steps the autopilot takes to move integrations to the candidate cluster,
 * and the gates each step must hold before the next. Validated whole before anything changes;
 * each problem names its field.
 */
import { z } from 'zod';
import { maxParallelismLimit } from '@headroom/flags';
import { latencyDefaults } from '@headroom/fleet';

/** The lines a step must stay within, per integration (latency, errors) and for the candidate's workers (runtime). */
export interface Gates {
  /** Candidate p50 ÷ baseline p50 on the same integration, same window. */
  p50Ratio: number;
  p95Ratio: number;
  /** Candidate error rate minus baseline error rate (shares of tasks, 0..1). */
  errorRateIncrease: number;
  /** Share of time the candidate's busiest worker spent in GC pauses (0..1). */
  gcShare: number;
  /** Event-loop utilisation of the candidate's busiest worker (0..1). */
  eventLoopUtilization: number;
  /** Event-loop delay p99 of the candidate's worst worker, ms. */
  eventLoopDelayP99Ms: number;
  /** Heap used ÷ limit of the candidate's fullest worker (0..1). */
  heapShare: number;
}

export const gateNames = [
  'p50Ratio',
  'p95Ratio',
  'errorRateIncrease',
  'gcShare',
  'eventLoopUtilization',
  'eventLoopDelayP99Ms',
  'heapShare',
] as const satisfies readonly (keyof Gates)[];
export type GateName = (typeof gateNames)[number];

/** What a plan gets for a gate it does not set: docs/rollouts.md explains each. */
export const defaultGates: Readonly<Gates> = Object.freeze({
  p50Ratio: 1.1,
  p95Ratio: 1.25,
  errorRateIncrease: 0.01,
  gcShare: 0.1,
  eventLoopUtilization: 0.9,
  eventLoopDelayP99Ms: 200,
  heapShare: 0.85,
});

/** A gate is "close" (the autopilot holds, and says so) past this share of the way to its line (from 1 for a ratio, from 0 for the rest). */
export const closeToLineShare = 0.9;

export const planLimits = {
  maxSteps: 20,
  maxIntegrations: 64,
  maxHoldSeconds: 24 * 3600,
  /** The latency summaries are kept an hour (latencyDefaults.retentionMs). */
  maxWindowSeconds: latencyDefaults.retentionMs / 1000,
  /** A window shorter than one latency slot would compare a partial slot with itself. */
  minWindowSeconds: latencyDefaults.slotMs / 1000,
  maxMinSamples: 1_000_000,
};

const wholeNumber = (min: number, max: number, what = 'a whole number') =>
  z
    .number({ error: `expected ${what} from ${min} to ${max}` })
    .int(`expected ${what} from ${min} to ${max}`)
    .min(min, `expected ${what} from ${min} to ${max}`)
    .max(max, `expected ${what} from ${min} to ${max}`);
const ratioLine = z.number({ error: 'expected a number from 1 to 10' }).min(1, 'expected a number from 1 to 10').max(10, 'expected a number from 1 to 10');
const shareLine = z
  .number({ error: 'expected a number from 0 to 1' })
  .gt(0, 'expected a number above 0, at most 1')
  .max(1, 'expected a number above 0, at most 1');

const gatesSchema = z
  .object({
    p50Ratio: ratioLine.optional().describe(`Candidate p50 ÷ baseline p50, per integration (default ${defaultGates.p50Ratio})`),
    p95Ratio: ratioLine.optional().describe(`Candidate p95 ÷ baseline p95, per integration (default ${defaultGates.p95Ratio})`),
    errorRateIncrease: z
      .number({ error: 'expected a number from 0 to 1' })
      .min(0, 'expected a number from 0 to 1')
      .max(1, 'expected a number from 0 to 1')
      .optional()
      .describe(`Candidate error rate minus baseline error rate (default ${defaultGates.errorRateIncrease})`),
    gcShare: shareLine.optional().describe(`GC share of the candidate's busiest worker (default ${defaultGates.gcShare})`),
    eventLoopUtilization: shareLine
      .optional()
      .describe(`Event-loop utilisation of the candidate's busiest worker (default ${defaultGates.eventLoopUtilization})`),
    eventLoopDelayP99Ms: wholeNumber(1, 60_000)
      .optional()
      .describe(`Event-loop delay p99 of the candidate's worst worker, ms (default ${defaultGates.eventLoopDelayP99Ms})`),
    heapShare: shareLine.optional().describe(`Heap used ÷ limit of the candidate's fullest worker (default ${defaultGates.heapShare})`),
  })
  .strict();

const searchSchema = z
  .object({
    from: wholeNumber(1, maxParallelismLimit).describe('Max parallelism the search starts at'),
    factor: z
      .number({ error: 'expected a number above 1, at most 4' })
      .gt(1, 'expected a number above 1, at most 4')
      .max(4, 'expected a number above 1, at most 4')
      .default(1.5)
      .describe('Each raise multiplies by this (rounded up; default 1.5)'),
    max: wholeNumber(1, maxParallelismLimit).describe('Highest max parallelism the search tries'),
  })
  .strict()
  .refine((s) => s.max >= s.from, { message: 'expected max >= from', path: ['max'] });

const stepSchema = z
  .object({
    candidatePercent: wholeNumber(0, 100).describe("Percent of the plan's integrations' task keys sent to the candidate"),
    maxParallelism: wholeNumber(1, maxParallelismLimit).optional().describe("The candidate cluster's max parallelism during this step"),
    search: searchSchema
      .optional()
      .describe('Instead of maxParallelism: raise it while the gates hold, back off one raise when one breaks, keep the highest that held'),
    holdSeconds: wholeNumber(1, planLimits.maxHoldSeconds)
      .optional()
      .describe("How long every gate must hold before the next step (or raise); default the plan's holdSeconds"),
  })
  .strict()
  .refine((s) => (s.maxParallelism === undefined) !== (s.search === undefined), {
    message: 'expected either maxParallelism or search, not both and not neither',
    path: ['maxParallelism'],
  });

/** The plan as a request gives it (POST /api/v1/rollouts). */
export function planSchema(knownIntegrations: readonly string[]) {
  return z
    .object({
      name: z
        .string({ error: 'expected a name' })
        .regex(/^[A-Za-z0-9 ._:-]{1,80}$/, 'expected 1-80 characters of A-Z, a-z, 0-9, space, ".", "_", ":", "-"')
        .describe('Shown in the UI and the audit log'),
      integrations: z
        .array(
          z.string({ error: 'expected an integration name' }).refine((name) => knownIntegrations.includes(name), {
            message: `unknown integration; accepted: ${knownIntegrations.join(', ') || '(none configured)'}`,
          }),
        )
        .min(1, 'expected at least one integration')
        .max(planLimits.maxIntegrations, `expected at most ${planLimits.maxIntegrations} integrations`)
        .refine((names) => new Set(names).size === names.length, 'expected each integration once')
        .describe('The integrations the plan moves; each is judged, and rolled back, on its own'),
      windowSeconds: wholeNumber(planLimits.minWindowSeconds, planLimits.maxWindowSeconds)
        .default(30)
        .describe('Length of the window each gate compares (candidate and baseline, the same window); default 30'),
      holdSeconds: wholeNumber(1, planLimits.maxHoldSeconds)
        .default(60)
        .describe('How long every gate must hold before the next step, unless a step says; default 60'),
      minSamples: wholeNumber(1, planLimits.maxMinSamples)
        .default(50)
        .describe('Tasks each cluster must have run of an integration in the window before its gates are judged; fewer: "not enough data"; default 50'),
      gates: gatesSchema.default({}).describe('Lines; a gate not given keeps its default'),
      steps: z.array(stepSchema).min(1, 'expected at least one step').max(planLimits.maxSteps, `expected at most ${planLimits.maxSteps} steps`),
    })
    .strict()
    .superRefine((plan, ctx) => {
      plan.steps.forEach((step, index) => {
        const holdSeconds = step.holdSeconds ?? plan.holdSeconds;
        if (holdSeconds < plan.windowSeconds) {
          ctx.addIssue({
            code: 'custom',
            path: ['steps', index, 'holdSeconds'],
            message: `expected at least windowSeconds (${plan.windowSeconds}): a gate must hold for one whole window`,
          });
        }
        const previous = plan.steps[index - 1];
        if (previous && step.candidatePercent < previous.candidatePercent) {
          ctx.addIssue({
            code: 'custom',
            path: ['steps', index, 'candidatePercent'],
            message: `expected at least the step before's ${previous.candidatePercent}: a plan only moves traffic towards the candidate`,
          });
        }
      });
      if (plan.holdSeconds < plan.windowSeconds && plan.steps.some((s) => s.holdSeconds === undefined)) {
        ctx.addIssue({
          code: 'custom',
          path: ['holdSeconds'],
          message: `expected at least windowSeconds (${plan.windowSeconds}): a gate must hold for one whole window`,
        });
      }
    });
}

export type PlanInput = z.input<ReturnType<typeof planSchema>>;
type ParsedPlan = z.output<ReturnType<typeof planSchema>>;

/** A validated plan with every default filled in. */
export interface Plan extends Omit<ParsedPlan, 'gates' | 'steps'> {
  gates: Gates;
  steps: PlanStep[];
}

export interface PlanStep {
  candidatePercent: number;
  maxParallelism?: number;
  search?: { from: number; factor: number; max: number };
  holdSeconds: number;
}

/** The parsed request with the defaults a plan keeps (so that a later default change does not change a running plan). */
export function completePlan(parsed: ParsedPlan): Plan {
  return {
    ...parsed,
    gates: { ...defaultGates, ...Object.fromEntries(Object.entries(parsed.gates).filter(([, line]) => line !== undefined)) },
    steps: parsed.steps.map((step) => ({
      candidatePercent: step.candidatePercent,
      ...(step.maxParallelism !== undefined ? { maxParallelism: step.maxParallelism } : {}),
      ...(step.search ? { search: step.search } : {}),
      holdSeconds: step.holdSeconds ?? parsed.holdSeconds,
    })),
  };
}
