#!/usr/bin/env node
/**
 * headroom-loadgen: sends tasks to one balancer or several (in turn) at a fixed rate and reports what came back.
 *   node sim/dist/src/loadgen/cli.js --balancer 127.0.0.1:7700 --rate 50 --duration-s 60
 *   ... --balancer 127.0.0.1:7700,127.0.0.1:7701   (half the tasks to each)
 *   ... --spike-every-s 120 --spike-duration-s 30 --spike-factor 10   (background x10 for 30 s every 2 min)
 * Every flag can also be set by env (HEADROOM_LOADGEN_RATE, ...); flags win.
 */
import { z } from 'zod';
import { ConfigError } from '@headroom/common';
import { readOptions, usageText, type OptionSpec } from '@headroom/common';
import { formatLoadReport } from './format';
import { startLoadGenerator, type LoadReport } from './load-generator';
import { defaultIntegrations, loadGeneratorOptionFields, maxBalancers, spikeProblems } from './options';

const maxSpikeS = 7 * 24 * 3600;
const spikeSeconds = (min: number, hint: string) =>
  z.coerce
    .number({ error: `expected seconds, ${hint}` })
    .min(min, `expected seconds >= ${min}, ${hint}`)
    .max(maxSpikeS, `expected seconds <= ${maxSpikeS}`);

/** The library's options, with the spike times in seconds. */
const cliFields = loadGeneratorOptionFields.omit({ spikeEveryMs: true, spikeAtMs: true, spikeDurationMs: true }).extend({
  /** --balancer HOST:PORT[,HOST:PORT...] */
  balancerAddresses: z
    .string()
    .transform((list) => list.split(',').map((address) => address.trim()))
    .pipe(loadGeneratorOptionFields.shape.balancerAddresses),
  /** 0 runs until SIGINT/SIGTERM. */
  durationS: z.coerce.number({ error: 'expected seconds, 0 for until stopped' }).min(0, 'expected seconds >= 0, 0 for until stopped').default(0),
  reportIntervalS: z.coerce.number({ error: 'expected seconds' }).min(0.1, 'expected seconds >= 0.1').max(3600, 'expected seconds <= 3600').default(5),
  format: z.enum(['text', 'json'], { error: 'expected text or json' }).default('text'),
  spikeEveryS: spikeSeconds(0, '0 for no periodic spikes')
    .refine((s) => s === 0 || s >= 0.1, { message: 'expected 0 (no periodic spikes) or seconds >= 0.1', abort: true })
    .default(0),
  spikeAtS: spikeSeconds(0, 'e.g. 60').optional(),
  spikeDurationS: spikeSeconds(0.01, 'e.g. 30').default(30),
});

type CliConfig = z.output<typeof cliFields>;

/** What the generator takes: the CLI's own settings left out, seconds made milliseconds. */
function toGeneratorOptions({ durationS, reportIntervalS, format, spikeEveryS, spikeAtS, spikeDurationS, ...rest }: CliConfig) {
  const ms = (seconds: number) => Math.round(seconds * 1000);
  return { ...rest, spikeEveryMs: ms(spikeEveryS), spikeDurationMs: ms(spikeDurationS), ...(spikeAtS === undefined ? {} : { spikeAtMs: ms(spikeAtS) }) };
}

const cliSchema = cliFields.superRefine((config, ctx) => {
  const cliKeys = { spikeEveryMs: 'spikeEveryS', ratePerS: 'ratePerS' } as const;
  for (const { key, message } of spikeProblems(toGeneratorOptions(config))) ctx.addIssue({ code: 'custom', path: [cliKeys[key]], message });
});

const option = (key: keyof CliConfig, flag: string, valueName: string, description: string): OptionSpec => ({
  key,
  flag,
  valueName,
  description,
  env: `HEADROOM_LOADGEN_${flag.replace(/-/g, '_').toUpperCase()}`,
});

const specs: OptionSpec[] = [
  option(
    'balancerAddresses',
    'balancer',
    'HOST:PORT[,...]',
    `balancer to send tasks to, or up to ${maxBalancers} separated by commas that get them in turn (required)`,
  ),
  option('ratePerS', 'rate', 'N', 'tasks sent per second outside spikes, whatever the answers'),
  option('userPresentShare', 'user-present-share', 'S', 'share of USER_PRESENT tasks, 0..1; the rest are BACKGROUND'),
  {
    ...option(
      'integrations',
      'integrations',
      'A[:W],B[:W],...',
      'integrations with optional weights (1 when none): bank-a:3,bank-b sends 3 of 4 tasks to bank-a; medians of 20..80 ms from first to last',
    ),
    defaultText: defaultIntegrations.join(','),
  },
  option('keyCount', 'keys', 'N', 'distinct task keys (accounts)'),
  option(
    'keySkew',
    'key-skew',
    'X',
    'how much busier the busiest keys are, 0..3: a Zipf-like power law; 0: all alike, 1: the busiest 1% of 5000 keys get ~46% of tasks',
  ),
  option(
    'payload',
    'payload',
    'JSON',
    'fields added to every task\'s JSON payload, e.g. {"allocateKb":64}; a "sleepMs" here replaces the drawn upstream time (default: only the draw)',
  ),
  option('spikeEveryS', 'spike-every-s', 'S', 'a spike every S seconds, the first after S seconds of steady load; 0: none'),
  option('spikeAtS', 'spike-at-s', 'S', 'one spike S seconds after the start (default none)'),
  option('spikeDurationS', 'spike-duration-s', 'S', 'how long each spike lasts, shorter than --spike-every-s'),
  option('spikeFactor', 'spike-factor', 'X', 'during a spike BACKGROUND tasks are sent at X times their rate, USER_PRESENT ones at theirs, 0..1000'),
  option('durationS', 'duration-s', 'S', 'stop after this many seconds; 0 runs until SIGINT/SIGTERM'),
  option('maxOutstandingCalls', 'max-outstanding', 'N', 'calls awaiting answers at most; tasks due beyond are dropped and counted'),
  option('taskTimeoutMs', 'task-timeout-ms', 'MS', 'deadline of each task'),
  option('maxSleepMs', 'max-sleep-ms', 'MS', 'longest simulated upstream call'),
  option('reportIntervalS', 'report-interval-s', 'S', 'seconds between reports; the final one shows steady and spike phases apart'),
  option('format', 'format', 'text|json', 'report format; json prints one object a line'),
];

function print(format: 'text' | 'json', event: 'report' | 'final', report: LoadReport): void {
  if (format === 'json') process.stdout.write(`${JSON.stringify({ event, ...report })}\n`);
  else process.stdout.write(`${event === 'final' ? 'final, ' : ''}${formatLoadReport(report, event === 'final' ? 'total' : 'window')}\n`);
}

function describeSpikes(config: CliConfig): string {
  const spikes = [
    ...(config.spikeEveryS > 0 ? [`every ${config.spikeEveryS} s`] : []),
    ...(config.spikeAtS === undefined ? [] : [`once at ${config.spikeAtS} s`]),
  ];
  return spikes.length === 0 ? '' : `, background x${config.spikeFactor} for ${config.spikeDurationS} s ${spikes.join(' and ')}`;
}

async function main(): Promise<void> {
  const parsed = readOptions(cliSchema, specs, process.argv.slice(2), process.env);
  if (parsed.help) {
    process.stdout.write(`${usageText('Usage: headroom-loadgen --balancer HOST:PORT[,HOST:PORT...] [options]', specs, cliSchema)}\n`);
    return;
  }
  const { durationS, reportIntervalS, format } = parsed.config;
  const options = toGeneratorOptions(parsed.config);
  const generator = startLoadGenerator(options);
  if (format === 'json') {
    process.stdout.write(
      `${JSON.stringify({ event: 'started', balancerAddresses: generator.config.balancerAddresses, ratePerS: generator.config.ratePerS, pid: process.pid })}\n`,
    );
  } else {
    process.stdout.write(
      `sending ${generator.config.ratePerS} tasks/s to ${generator.config.balancerAddresses.join(', ')}${describeSpikes(parsed.config)}${durationS > 0 ? ` for ${durationS} s` : ''}; Ctrl-C stops\n`,
    );
  }
  const reporting = setInterval(() => print(format, 'report', generator.report()), reportIntervalS * 1000);
  const stop = async () => {
    clearInterval(reporting);
    print(format, 'final', await generator.close());
    process.exit(0);
  };
  process.once('SIGTERM', () => void stop());
  process.once('SIGINT', () => void stop());
  if (durationS > 0) setTimeout(() => void stop(), durationS * 1000);
}

main().catch((error: unknown) => {
  process.stderr.write(`headroom-loadgen: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(error instanceof ConfigError ? 2 : 1);
});
