#!/usr/bin/env node
/**
 * headroom-loadgen: sends tasks to a balancer at a fixed rate and reports what came back.
 *   node sim/dist/src/loadgen/cli.js --balancer 127.0.0.1:7700 --rate 50 --duration-s 60
 * Every flag can also be set by env (HEADROOM_LOADGEN_RATE, ...); flags win.
 */
import { z } from 'zod';
import { ConfigError } from '@headroom/common';
import { readOptions, usageText, type OptionSpec } from '@headroom/common';
import { formatLoadReport } from './format';
import { startLoadGenerator, type LoadReport } from './load-generator';
import { defaultIntegrations, loadGeneratorOptionsSchema } from './options';

const cliSchema = loadGeneratorOptionsSchema.extend({
  /** 0 runs until SIGINT/SIGTERM. */
  durationS: z.coerce.number({ error: 'expected seconds, 0 for until stopped' }).min(0, 'expected seconds >= 0, 0 for until stopped').default(0),
  reportIntervalS: z.coerce.number({ error: 'expected seconds' }).min(0.1, 'expected seconds >= 0.1').max(3600, 'expected seconds <= 3600').default(5),
  format: z.enum(['text', 'json'], { error: 'expected text or json' }).default('text'),
});

const option = (key: string, flag: string, valueName: string, description: string): OptionSpec => ({
  key,
  flag,
  valueName,
  description,
  env: `HEADROOM_LOADGEN_${flag.replace(/-/g, '_').toUpperCase()}`,
});

const specs: OptionSpec[] = [
  option('balancerAddress', 'balancer', 'HOST:PORT', 'balancer to send tasks to (required)'),
  option('ratePerS', 'rate', 'N', 'tasks sent per second, whatever the answers (default 50)'),
  option('userPresentShare', 'user-present-share', 'S', 'share of USER_PRESENT tasks, 0..1; the rest are BACKGROUND (default 0.1)'),
  option('integrations', 'integrations', 'A,B,...', `integrations, medians of 20..80 ms from first to last (default ${defaultIntegrations.join(',')})`),
  option('keyCount', 'keys', 'N', 'distinct task keys (default 1000)'),
  option('durationS', 'duration-s', 'S', 'stop after this many seconds; 0 runs until SIGINT/SIGTERM (default 0)'),
  option('maxOutstandingCalls', 'max-outstanding', 'N', 'calls awaiting answers at most; tasks due beyond are dropped and counted (default 1000)'),
  option('taskTimeoutMs', 'task-timeout-ms', 'MS', 'deadline of each task (default 10000)'),
  option('maxSleepMs', 'max-sleep-ms', 'MS', 'longest simulated upstream call (default 2000)'),
  option('reportIntervalS', 'report-interval-s', 'S', 'seconds between reports (default 5)'),
  option('format', 'format', 'text|json', 'report format; json prints one object a line (default text)'),
];

function print(format: 'text' | 'json', event: 'report' | 'final', report: LoadReport): void {
  if (format === 'json') process.stdout.write(`${JSON.stringify({ event, ...report })}\n`);
  else process.stdout.write(`${event === 'final' ? 'final, ' : ''}${formatLoadReport(report, event === 'final' ? 'total' : 'window')}\n`);
}

async function main(): Promise<void> {
  const parsed = readOptions(cliSchema, specs, process.argv.slice(2), process.env);
  if (parsed.help) {
    process.stdout.write(`${usageText('Usage: headroom-loadgen --balancer HOST:PORT [options]', specs)}\n`);
    return;
  }
  const { durationS, reportIntervalS, format, ...options } = parsed.config;
  const generator = startLoadGenerator(options);
  if (format === 'json') {
    process.stdout.write(`${JSON.stringify({ event: 'started', balancerAddress: options.balancerAddress, ratePerS: options.ratePerS, pid: process.pid })}\n`);
  } else {
    process.stdout.write(`sending ${options.ratePerS} tasks/s to ${options.balancerAddress}${durationS > 0 ? ` for ${durationS} s` : ''}; Ctrl-C stops\n`);
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
