#!/usr/bin/env node
/**
 * Benchmarks of Headroom. Programs, not tests: they print a table, write JSON to bench/results/
 * and refresh bench/RESULTS.md, and exit 0 whatever the figures (non-zero only when a benchmark broke).
 *   npm run bench                      every benchmark
 *   npm run bench -- overhead          one
 *   npm run bench -- overhead --smoke  seconds, tiny load (what the test runs)
 * Benchmarks: overhead (the balancer's cost), rollback (how fast a rollback reaches every balancer),
 * gc-semispace (a parallel worker's GC time at two V8 semi-space sizes).
 * Options: --out FILE (JSON path), --cpu-prof-dir DIR (profile the balancer process; overhead), REDIS_URL.
 * rollback also needs PostgreSQL for its Unleash server (HEADROOM_TEST_PG_URL, see @headroom/unleash-local).
 */
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { runGcSemiSpace } from './gc-semispace';
import { gcSemiSpaceMarkdown, gcSemiSpaceTables } from './gc-semispace-report';
import { runOverhead } from './overhead';
import { overheadMarkdown, overheadTables } from './overhead-report';
import { resultsDir, updateResultsSection, writeJson } from './report/results-file';
import { runRollback } from './rollback';
import { rollbackMarkdown, rollbackTables } from './rollback-report';

interface RunOptions {
  smoke: boolean;
  outPath: string | undefined;
  cpuProfileDir: string | undefined;
  command: string;
  signal: AbortSignal;
}

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const progress = (line: string) => process.stdout.write(`  ${line}\n`);

const benchmarks: Record<string, (options: RunOptions) => Promise<void>> = {
  overhead: (options) =>
    report(
      'overhead',
      options,
      runOverhead({
        smoke: options.smoke,
        command: options.command,
        redisUrl,
        signal: options.signal,
        ...(options.cpuProfileDir ? { balancerCpuProfileDir: path.resolve(options.cpuProfileDir) } : {}),
        progress,
      }),
      { tables: overheadTables, markdown: overheadMarkdown },
    ),
  rollback: (options) => report('rollback', options, runRollback({ smoke: options.smoke, command: options.command, redisUrl, signal: options.signal, progress }), { tables: rollbackTables, markdown: rollbackMarkdown }),
  'gc-semispace': (options) =>
    report('gc-semispace', options, runGcSemiSpace({ smoke: options.smoke, command: options.command, redisUrl, signal: options.signal, progress }), { tables: gcSemiSpaceTables, markdown: gcSemiSpaceMarkdown }),
};

/** Writes the JSON, prints the tables, and refreshes the benchmark's section of bench/RESULTS.md. */
async function report<R>(name: string, options: RunOptions, running: Promise<R>, format: { tables(result: R): string; markdown(result: R): string }): Promise<void> {
  const result = await running;
  // Only a full run to the default place is the record; a smoke run must not overwrite it.
  const recordPath = path.join(resultsDir, `${name}.json`);
  const outPath = options.outPath ? path.resolve(options.outPath) : options.smoke ? path.join(os.tmpdir(), 'headroom-bench', `${name}.smoke.json`) : recordPath;
  writeJson(outPath, result);
  process.stdout.write(`\n${format.tables(result)}\n\nJSON: ${outPath}\n`);
  if (!options.smoke && outPath === recordPath) {
    updateResultsSection(name, format.markdown(result));
    process.stdout.write('bench/RESULTS.md refreshed\n');
  }
}

const usage = `Usage: node bench/dist/src/run.js [${Object.keys(benchmarks).join(' | ')}] [--smoke] [--out FILE] [--cpu-prof-dir DIR]`;

// First Ctrl-C (or SIGTERM): stop the load and clean up (children, Redis keys). Second: leave at once.
const interrupted = new AbortController();

async function main(): Promise<number> {
  const { values, positionals } = parseArgs({
    options: { smoke: { type: 'boolean', default: false }, out: { type: 'string' }, 'cpu-prof-dir': { type: 'string' }, help: { type: 'boolean', default: false } },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    return 0;
  }
  const unknown = positionals.filter((name) => !(name in benchmarks));
  if (unknown.length > 0) {
    process.stderr.write(`unknown benchmark ${unknown.join(', ')}; expected one of: ${Object.keys(benchmarks).join(', ')}\n${usage}\n`);
    return 2;
  }
  const names = positionals.length > 0 ? positionals : Object.keys(benchmarks);
  if (values.out && names.length > 1) {
    process.stderr.write('--out takes one benchmark: name it\n');
    return 2;
  }
  const args = process.argv.slice(2).join(' ');
  const command = process.env.npm_lifecycle_event === 'bench' ? `npm run bench${args ? ` -- ${args}` : ''}` : `node bench/dist/src/run.js${args ? ` ${args}` : ''}`;

  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (interrupted.signal.aborted) process.exit(130);
      process.stderr.write(`\n${signal}: stopping and cleaning up (again to leave at once)\n`);
      interrupted.abort(new Error(`interrupted by ${signal}`));
    });
  }
  for (const name of names) {
    process.stdout.write(`${name}${values.smoke ? ' (smoke)' : ''}\n`);
    await benchmarks[name]!({ smoke: values.smoke, outPath: values.out, cpuProfileDir: values['cpu-prof-dir'], command, signal: interrupted.signal });
  }
  return 0;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    if (interrupted.signal.aborted) {
      process.stderr.write('bench: interrupted; the processes it started are stopped and its Redis keys deleted\n');
      process.exit(130);
    }
    process.stderr.write(`bench: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
