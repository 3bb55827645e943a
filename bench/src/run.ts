#!/usr/bin/env node
/**
 * Benchmarks of Headroom. Programs, not tests: they print a table, write JSON to bench/results/
 * and refresh bench/RESULTS.md, and exit 0 whatever the figures (non-zero only when a benchmark broke).
 *   npm run bench                      every benchmark but the soak
 *   npm run bench -- soak --minutes 30 the soak: runs only when named
 *   npm run bench -- overhead          one
 *   npm run bench -- overhead --smoke  seconds, tiny load (what the test runs)
 * Benchmarks (in the order of bench/RESULTS.md): overhead (1, the balancer's cost), routing (2, slot policies on a
 * fleet of unlike workers), priority (3, user-present tasks under a background spike), rollback (4,
 * how fast a rollback reaches every balancer), parallelism (5, one bank worker at max parallelism
 * 1..50), memory (6, 100,000 tasks queued at a balancer), scale (7, Redis's cost per task and per
 * worker, and what one Redis carries; with its fleet-scale mode, 4,000 simulated workers);
 * gc-semispace (a parallel worker's GC time at two V8
 * semi-space sizes); autopilot (how long the rollout autopilot takes from a slow candidate's
 * first slow answer to the last balancer's acknowledgement of its rollback); incidents (a slow
 * bank among four integrations, a background spike and high load, Headroom with and without
 * per-integration limits against the alternatives); limits-cost (what keeping to per-integration
 * limits costs Redis per task); auto-limit (how fast a limit in auto mode falls in a slow bank's
 * incident and comes back after it); soak (the whole system for
 * --minutes with faults in turn, judged on what grows).
 * Each refreshes its section of bench/RESULTS.md and the table at its top.
 * Options: --out FILE (JSON path), --cpu-prof-dir DIR (profile the balancer process; overhead),
 * --scenario a,b (incidents: slow-bank, background-spike, high-load; all by default; the others
 * keep the recorded run's figures), --repetitions N (incidents), REDIS_URL.
 * rollback also needs PostgreSQL for its Unleash server (HEADROOM_TEST_PG_URL, see @headroom/unleash-local);
 * scale needs redis-server on the PATH (it starts a private one).
 */
import * as os from 'node:os';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import { runAutoLimit } from './auto-limit';
import { autoLimitMarkdown, autoLimitTables } from './auto-limit-report';
import { runAutopilot } from './autopilot';
import { autopilotMarkdown, autopilotTables } from './autopilot-report';
import { runGcSemiSpace } from './gc-semispace';
import { parseScenarios, runIncidents, scenarioNames, type ScenarioName } from './incidents';
import { carryOverScenarios } from './incidents-carry-over';
import { runLimitsCost } from './limits-cost';
import { limitsCostMarkdown, limitsCostTables } from './limits-cost-report';
import { incidentsMarkdown, incidentsTables } from './incidents-report';
import { gcSemiSpaceMarkdown, gcSemiSpaceTables } from './gc-semispace-report';
import { runMemory } from './memory';
import { memoryMarkdown, memoryTables } from './memory-report';
import { runOverhead } from './overhead';
import { runParallelism } from './parallelism';
import { runPriority } from './priority';
import { priorityMarkdown, priorityTables } from './priority-report';
import { parallelismMarkdown, parallelismTables } from './parallelism-report';
import { overheadMarkdown, overheadTables } from './overhead-report';
import { atAGlanceMarkdown } from './report/at-a-glance';
import { resultsDir, updateResultsSection, writeJson } from './report/results-file';
import { runRollback } from './rollback';
import { rollbackMarkdown, rollbackTables } from './rollback-report';
import { runRouting } from './routing';
import { runScale } from './scale';
import { scaleMarkdown, scaleTables } from './scale-report';
import { runSoakBenchmark } from './soak';
import { soakMarkdown, soakTables } from './soak-report';
import { routingMarkdown, routingTables } from './routing-report';

interface RunOptions {
  smoke: boolean;
  /** soak only: how long it runs. */
  minutes: number;
  /** incidents only: the scenarios to run, and how many times (undefined: its settings'). */
  scenarios: ScenarioName[];
  repetitions: number | undefined;
  outPath: string | undefined;
  cpuProfileDir: string | undefined;
  command: string;
  signal: AbortSignal;
}

const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const progress = (line: string) => process.stdout.write(`  ${line}\n`);

/** What every benchmark takes from the command line. */
const common = (options: RunOptions) => ({ smoke: options.smoke, command: options.command, redisUrl, signal: options.signal, progress });

// In the order `npm run bench` runs them: the numbering of bench/RESULTS.md, then the extra finding.
const benchmarks: Record<string, (options: RunOptions) => Promise<void>> = {
  overhead: (options) =>
    report(
      'overhead',
      options,
      runOverhead({ ...common(options), ...(options.cpuProfileDir ? { balancerCpuProfileDir: path.resolve(options.cpuProfileDir) } : {}) }),
      {
        tables: overheadTables,
        markdown: overheadMarkdown,
      },
    ),
  routing: (options) => report('routing', options, runRouting(common(options)), { tables: routingTables, markdown: routingMarkdown }),
  priority: (options) => report('priority', options, runPriority(common(options)), { tables: priorityTables, markdown: priorityMarkdown }),
  rollback: (options) => report('rollback', options, runRollback(common(options)), { tables: rollbackTables, markdown: rollbackMarkdown }),
  parallelism: (options) => report('parallelism', options, runParallelism(common(options)), { tables: parallelismTables, markdown: parallelismMarkdown }),
  memory: (options) => report('memory', options, runMemory(common(options)), { tables: memoryTables, markdown: memoryMarkdown }),
  // On a private redis-server of its own: REDIS_URL is not used.
  scale: (options) => report('scale', options, runScale(common(options)), { tables: scaleTables, markdown: scaleMarkdown }),
  'gc-semispace': (options) => report('gc-semispace', options, runGcSemiSpace(common(options)), { tables: gcSemiSpaceTables, markdown: gcSemiSpaceMarkdown }),
  // The rollout autopilot's detection and rollback of a slow candidate.
  autopilot: (options) => report('autopilot', options, runAutopilot(common(options)), { tables: autopilotTables, markdown: autopilotMarkdown }),
  // Issue 35: a slow bank, a background spike, high load; Headroom with and without per-integration limits, against the alternatives.
  incidents: (options) =>
    report(
      'incidents',
      options,
      runIncidents({ ...common(options), scenarios: options.scenarios, ...(options.repetitions ? { repetitions: options.repetitions } : {}) }).then((result) =>
        // Scenarios not run keep the recorded run's figures (only when this run becomes the record).
        options.outPath ? result : carryOverScenarios(result, path.join(resultsDir, 'incidents.json')),
      ),
      { tables: incidentsTables, markdown: incidentsMarkdown },
    ),
  // What keeping to per-integration limits costs Redis per task, on the scale benchmark's harness.
  'limits-cost': (options) => report('limits-cost', options, runLimitsCost(common(options)), { tables: limitsCostTables, markdown: limitsCostMarkdown }),
  // How fast an integration's limit in auto mode follows a slow bank's incident, down and back.
  'auto-limit': (options) => report('auto-limit', options, runAutoLimit(common(options)), { tables: autoLimitTables, markdown: autoLimitMarkdown }),
  // Runs only when named (30 minutes by default: --minutes N).
  soak: (options) =>
    report('soak', options, runSoakBenchmark({ ...common(options), minutes: options.minutes }), { tables: soakTables, markdown: soakMarkdown }),
};
/** What `npm run bench` runs when no benchmark is named: all but the soak. */
const defaultBenchmarks = Object.keys(benchmarks).filter((name) => name !== 'soak');

/** Writes the JSON, prints the tables, and refreshes the benchmark's section of bench/RESULTS.md. */
async function report<R>(
  name: string,
  options: RunOptions,
  running: Promise<R>,
  format: { tables(result: R): string; markdown(result: R): string },
): Promise<void> {
  const result = await running;
  // Only a full run to the default place is the record; a smoke run must not overwrite it.
  const recordPath = path.join(resultsDir, `${name}.json`);
  const outPath = options.outPath ? path.resolve(options.outPath) : options.smoke ? path.join(os.tmpdir(), 'headroom-bench', `${name}.smoke.json`) : recordPath;
  writeJson(outPath, result);
  process.stdout.write(`\n${format.tables(result)}\n\nJSON: ${outPath}\n`);
  if (!options.smoke && outPath === recordPath) {
    updateResultsSection(name, format.markdown(result));
    updateResultsSection('at-a-glance', atAGlanceMarkdown(), undefined, true);
    process.stdout.write('bench/RESULTS.md refreshed\n');
  }
}

const usage = `Usage: node bench/dist/src/run.js [${Object.keys(benchmarks).join(' | ')}] [--smoke] [--out FILE] [--cpu-prof-dir DIR] [--minutes N (soak, default 30)] [--scenario ${scenarioNames.join(',')} (incidents, default all)] [--repetitions N (incidents, default 2)]`;

// First Ctrl-C (or SIGTERM): stop the load and clean up (children, Redis keys). Second: leave at once.
const interrupted = new AbortController();

async function main(): Promise<number> {
  let parsed;
  try {
    parsed = parseArgs({
      options: {
        smoke: { type: 'boolean', default: false },
        out: { type: 'string' },
        'cpu-prof-dir': { type: 'string' },
        minutes: { type: 'string', default: '30' },
        scenario: { type: 'string' },
        repetitions: { type: 'string' },
        help: { type: 'boolean', default: false },
      },
      allowPositionals: true,
      strict: true,
    });
  } catch (error) {
    // An unknown option, or a value that looks like one (`--minutes -3`): say so, not a stack.
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n${usage}\n`);
    return 2;
  }
  const { values, positionals } = parsed;
  if (values.help) {
    process.stdout.write(`${usage}\n`);
    return 0;
  }
  const unknown = positionals.filter((name) => !(name in benchmarks));
  if (unknown.length > 0) {
    process.stderr.write(`unknown benchmark ${unknown.join(', ')}; expected one of: ${Object.keys(benchmarks).join(', ')}\n${usage}\n`);
    return 2;
  }
  const minutes = Number(values.minutes);
  if (!Number.isInteger(minutes) || minutes < 1 || minutes > 24 * 60) {
    process.stderr.write(`--minutes: got ${JSON.stringify(values.minutes)}, expected a whole number of minutes from 1 to 1440\n${usage}\n`);
    return 2;
  }
  let scenarios: ScenarioName[];
  try {
    scenarios = parseScenarios(values.scenario);
  } catch (error) {
    process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n${usage}\n`);
    return 2;
  }
  const names = positionals.length > 0 ? positionals : defaultBenchmarks;
  const repetitions = values.repetitions === undefined ? undefined : Number(values.repetitions);
  if (repetitions !== undefined && !(Number.isInteger(repetitions) && repetitions >= 1 && repetitions <= 10)) {
    process.stderr.write(`--repetitions: got ${JSON.stringify(values.repetitions)}, expected a whole number from 1 to 10\n${usage}\n`);
    return 2;
  }
  for (const option of ['scenario', 'repetitions'] as const) {
    if (values[option] !== undefined && !names.includes('incidents')) {
      process.stderr.write(`--${option}: only the incidents benchmark takes it; name incidents\n${usage}\n`);
      return 2;
    }
  }
  if (values.out && names.length > 1) {
    process.stderr.write('--out takes one benchmark: name it\n');
    return 2;
  }
  const args = process.argv.slice(2).join(' ');
  const command =
    process.env.npm_lifecycle_event === 'bench' ? `npm run bench${args ? ` -- ${args}` : ''}` : `node bench/dist/src/run.js${args ? ` ${args}` : ''}`;

  for (const signal of ['SIGINT', 'SIGTERM'] as const) {
    process.on(signal, () => {
      if (interrupted.signal.aborted) process.exit(130);
      process.stderr.write(`\n${signal}: stopping and cleaning up (again to leave at once)\n`);
      interrupted.abort(new Error(`interrupted by ${signal}`));
    });
  }
  for (const name of names) {
    process.stdout.write(`${name}${values.smoke ? ' (smoke)' : ''}\n`);
    await benchmarks[name]!({
      smoke: values.smoke,
      minutes,
      scenarios,
      repetitions,
      outPath: values.out,
      cpuProfileDir: values['cpu-prof-dir'],
      command,
      signal: interrupted.signal,
    });
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
