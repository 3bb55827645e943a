import { z } from 'zod';
import { settings } from '@headroom/common';
import { usageText, type OptionSpec } from '@headroom/common';
import { databaseSchema } from '@headroom/control-plane';
import { bankSimulatorOptionsSchema } from '@headroom/sim';

const keyPrefixSetting = z.string().regex(/^[A-Za-z0-9:._-]{1,64}$/, 'expected 1-64 characters of A-Z, a-z, 0-9, ":", ".", "_", "-"');
// Whole numbers: Unleash's gradual rollout takes whole percentages.
const percent = z.coerce
  .number({ error: 'expected a percentage from 0 to 100' })
  .int('expected a whole percentage from 0 to 100')
  .min(0, 'expected a percentage from 0 to 100')
  .max(100, 'expected a percentage from 0 to 100');
const seconds = (min: number, max: number, hint: string) =>
  z.coerce
    .number({ error: `expected seconds, ${hint}` })
    .min(min, `expected seconds >= ${min}, ${hint}`)
    .max(max, `expected seconds <= ${max}`);

/** Balancers the demo runs at most: each is a process on a machine that also runs everything else. */
export const maxDemoBalancers = 8;
const balancerCount = z.coerce
  .number({ error: `expected a whole number from 1 to ${maxDemoBalancers}` })
  .int(`expected a whole number from 1 to ${maxDemoBalancers}`)
  .min(1, `expected a whole number from 1 to ${maxDemoBalancers}`)
  .max(maxDemoBalancers, `expected a whole number from 1 to ${maxDemoBalancers}`);

/** What workers run (see workload.ts). */
export const workloadNames = ['bank', 'sleep'] as const;

/** What `npm start` runs; one schema validates, fills defaults and gives the types. */
export const demoOptionsSchema = z
  .object({
    /** Workers of the baseline cluster. @default 3 */
    baselineWorkers: settings.positiveInt(32).default(3),
    /** Tasks each baseline worker runs at once. @default 1 */
    baselineParallelism: settings.positiveInt(1000).default(1),
    /** @default 2 */
    candidateWorkers: settings.positiveInt(32).default(2),
    /** @default 10 */
    candidateParallelism: settings.positiveInt(1000).default(10),
    /** Share of task keys routed to the candidate cluster at start, written to the flag through the control plane. @default 50 */
    candidatePercent: percent.default(50),
    /** Tasks the load generator sends per second. @default 20 */
    ratePerS: z.coerce
      .number({ error: 'expected tasks per second' })
      .positive('expected a rate above 0')
      .max(10_000, 'expected at most 10000 tasks/s')
      .default(20),
    /** What workers run: the bank handlers against a bank simulator of the demo's own, or the sleep-only demo handlers. @default 'bank' */
    workload: z.enum(workloadNames, { error: `expected one of ${workloadNames.join(', ')}` }).default('bank'),
    /**
     * Multiplies the simulated banks' latencies. A task averages about 1.3 s at 1 (bank-d's heavy
     * tail); at 0.1 the default load keeps the single-slot baseline cluster about half busy. @default 0.1
     */
    bankTimeScale: bankSimulatorOptionsSchema.shape.timeScale.unwrap().default(0.1),
    /** @default 0.1 */
    userPresentShare: settings.share().default(0.1),
    /** Balancers, all on the same ledger and flags; the load generator sends to each in turn. 2 by default, so the UI shows each one's acknowledgements. @default 2 */
    balancers: balancerCount.default(2),
    /** Port of the first balancer; 0 picks a free port. The others always pick free ports. @default 7700 */
    balancerPort: settings.nonNegativeInt(65_535).default(7700),
    /** Port of the control plane's REST API; 0 picks a free port. @default 8080, or a free port when 8080 is taken */
    controlPlanePort: settings.nonNegativeInt(65_535).optional(),
    /** @default 'redis://127.0.0.1:6379'. One Redis: the demo starts a private one when nothing answers there. */
    redisUrl: settings
      .redisUrl()
      .refine(
        (url) => /^rediss?:\/\//.test(url),
        'the demo runs on one Redis: expected redis:// or rediss:// (Sentinel is for the components run on their own)',
      )
      .default('redis://127.0.0.1:6379'),
    /** Ledger key prefix; by default one of its own per run, `demo:<random>`. */
    keyPrefix: keyPrefixSetting.optional(),
    /** "demo": once everything runs, start the demo's rollout plan (the autopilot, docs/rollouts.md); "none": do not. @default 'none' */
    rollout: z.enum(['none', 'demo'], { error: 'expected none or demo' }).default('none'),
    /** Stop after this long once the load runs; 0 runs until Ctrl-C. @default 0 */
    durationS: seconds(0, 7 * 24 * 3600, '0 for until Ctrl-C').default(0),
    /** @default 5 */
    statusIntervalS: seconds(0.5, 3600, 'e.g. 5').default(5),
    /** An Unleash server to use, with both tokens; by default the demo runs its own on an embedded PostgreSQL. */
    unleashUrl: z.url({ protocol: /^https?$/, error: 'expected an http(s) URL such as http://127.0.0.1:4242' }).optional(),
    /** Admin (or service account) token: the control plane changes flags with it. */
    unleashAdminToken: z.string().min(1).optional(),
    /** Client (backend) token of the environment the flags are read in: balancer and workers read flags with it. */
    unleashClientToken: z.string().min(1).optional(),
    /** PostgreSQL for the control plane's audit log; by default the embedded one Unleash runs on. Required with --unleash-url. */
    databaseUrl: databaseSchema.shape.url.optional(),
  })
  .strict()
  .superRefine((options, ctx) => {
    const tokens = ['unleashAdminToken', 'unleashClientToken'] as const;
    for (const key of tokens) {
      if (options.unleashUrl !== undefined && options[key] === undefined) {
        ctx.addIssue({ code: 'custom', path: [key], message: 'required with --unleash-url' });
      } else if (options.unleashUrl === undefined && options[key] !== undefined) {
        ctx.addIssue({
          code: 'custom',
          path: [key],
          message: 'only used with --unleash-url (UNLEASH_URL); without it the demo runs an Unleash of its own with tokens of its own',
        });
      }
    }
    if (options.unleashUrl !== undefined && options.databaseUrl === undefined) {
      ctx.addIssue({
        code: 'custom',
        path: ['databaseUrl'],
        message: "required with --unleash-url: the control plane's audit log needs a PostgreSQL (without --unleash-url it uses the embedded one)",
      });
    }
  });

export type DemoConfig = z.output<typeof demoOptionsSchema>;

const option = (
  key: keyof DemoConfig,
  flag: string,
  valueName: string,
  description: string,
  env = `HEADROOM_DEMO_${flag.replace(/-/g, '_').toUpperCase()}`,
): OptionSpec => ({
  key,
  flag,
  valueName,
  description,
  env,
});

export const demoOptionSpecs: OptionSpec[] = [
  option('baselineWorkers', 'baseline-workers', 'N', 'workers in the baseline cluster, 1..32'),
  option('baselineParallelism', 'baseline-parallelism', 'N', 'tasks each baseline worker runs at once, 1..1000'),
  option('candidateWorkers', 'candidate-workers', 'N', 'workers in the candidate cluster, 1..32'),
  option('candidateParallelism', 'candidate-parallelism', 'N', 'tasks each candidate worker runs at once, 1..1000'),
  option(
    'candidatePercent',
    'candidate-percent',
    'P',
    'share of task keys sent to the candidate cluster at start, a whole number 0..100, set through the control plane',
  ),
  option('ratePerS', 'rate', 'N', 'tasks per second from the load generator'),
  option('workload', 'workload', 'NAME', 'bank: bank handlers calling a bank simulator the demo starts; sleep: handlers that only wait'),
  option('bankTimeScale', 'bank-time-scale', 'X', "multiplies the simulated banks' latencies, e.g. 1 for their real speed at a lower --rate"),
  option('userPresentShare', 'user-present-share', 'S', 'share of USER_PRESENT tasks, 0..1'),
  option('balancers', 'balancers', 'N', `balancers, 1..${maxDemoBalancers}; the load generator sends to each in turn`),
  option('balancerPort', 'balancer-port', 'PORT', 'port of the first balancer on 127.0.0.1, 0 for any free one; the others take any free one'),
  option(
    'controlPlanePort',
    'control-plane-port',
    'PORT',
    "port of the control plane's REST API on 127.0.0.1, 0 for any free one (default 8080, or any free one when 8080 is taken)",
  ),
  option('redisUrl', 'redis-url', 'URL', 'Redis to use; if nothing answers and redis-server is on the PATH, a private one is started', 'REDIS_URL'),
  option('keyPrefix', 'key-prefix', 'PREFIX', 'ledger key prefix (default demo:<random>, a new one per run, its keys deleted at exit)'),
  option(
    'rollout',
    'rollout',
    'PLAN',
    "demo: once everything runs, start the demo's rollout plan (the autopilot moves the bank integrations to the candidate step by step, judged by the latency ratio, and rolls one back by itself when its gates break; docs/rollouts.md); none: do not",
  ),
  option('durationS', 'duration-s', 'S', 'stop by itself after S seconds of load, 0 for until Ctrl-C'),
  option('statusIntervalS', 'status-interval-s', 'S', 'seconds between status lines'),
  option(
    'unleashUrl',
    'unleash-url',
    'URL',
    'Unleash server to use, e.g. http://127.0.0.1:4242 (default: one of its own on an embedded PostgreSQL)',
    'UNLEASH_URL',
  ),
  {
    ...option('unleashAdminToken', 'unleash-admin-token', 'TOKEN', 'admin token of that server; required with --unleash-url', 'UNLEASH_ADMIN_TOKEN'),
    secret: true,
  },
  {
    ...option(
      'unleashClientToken',
      'unleash-client-token',
      'TOKEN',
      'client (backend) token of that server; required with --unleash-url',
      'UNLEASH_CLIENT_TOKEN',
    ),
    secret: true,
  },
  option(
    'databaseUrl',
    'database-url',
    'URL',
    "PostgreSQL for the control plane's audit log (schema headroom), e.g. postgres://user:password@host:5432/db; required with --unleash-url (default: the embedded PostgreSQL of the demo's own Unleash)",
    'HEADROOM_DATABASE_URL',
  ),
];

export const demoUsage = `${usageText('Usage: npm start -- [options]    (or: node demo/dist/src/cli.js [options])', demoOptionSpecs, demoOptionsSchema)}

Runs on this machine: Redis (if none answers), Unleash (without --unleash-url: a real Unleash
server on an embedded PostgreSQL in a temporary directory, deleted at exit), the control plane
(REST API; the operator and viewer tokens it accepts are made up at start and printed),
balancers (--balancers) and workers that read their flags from Unleash, a bank simulator
(four banks: bank-a fast and steady .. bank-d slow with a heavy tail, 0.2-5% errors), a baseline cluster of
single-slot workers, a candidate cluster of parallel workers whose handlers call the banks,
and a load generator sending to each balancer in turn (integrations bank-a:3, bank-b:2, bank-c:1, bank-d:1 by weight, each
with a share of its own; with --workload sleep: bank-a, bank-b, bank-c, no simulator). The
initial candidate share is written through the control plane; change it while the demo
runs with, e.g.
  curl -X PUT -H "Authorization: Bearer <operator token>" -H "Content-Type: application/json" \\
       -d '{"integrations": {"bank-a": 80, "bank-b": 80, "bank-c": 20}}' http://127.0.0.1:8080/api/v1/traffic
  curl -X POST -H "Authorization: Bearer <operator token>" -H "Content-Type: application/json" \\
       -d '{"integration": "bank-a"}' http://127.0.0.1:8080/api/v1/rollback
and make a bank misbehave (the simulator's address is printed at start) with, e.g.
  curl -X POST -H 'content-type: application/json' -d '{"bank":"bank-b","kind":"slow","factor":4}' http://127.0.0.1:<port>/incidents
Once all runs, it prints ready-to-paste commands that start one more balancer, baseline
worker or candidate worker on the same ledger and flags (run them from the repository root;
stop them before the demo). Ctrl-C stops the demo's own processes. Flags win over env.
Invalid options exit with status 2.`;
