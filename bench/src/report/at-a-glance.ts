/**
 * The table at the top of bench/RESULTS.md: every goal of the benchmarks issue, the figure the
 * latest full run of its benchmark measured, and whether it was met. Made from the JSON records
 * in bench/results/, so it always agrees with the sections below it.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { formatMeasured, formatMet, type Goal } from './goals';
import { resultsDir } from './results-file';
import { markdownTable } from './table';

/** The benchmarks, by their numbering in bench/RESULTS.md; `goalsFrom`: where the item's current goals come from. */
export const issueItems: readonly { item: number; benchmark: string; goalsFrom?: string }[] = [
  { item: 1, benchmark: 'overhead' },
  // Against what teams run without Headroom (no shared count, workers queueing), not ledger-admitting round-robin.
  { item: 2, benchmark: 'routing', goalsFrom: 'issue 16' },
  { item: 3, benchmark: 'priority' },
  { item: 4, benchmark: 'rollback' },
  { item: 5, benchmark: 'parallelism' },
  { item: 6, benchmark: 'memory' },
  { item: 7, benchmark: 'scale' },
  // A slow bank must not take the other integrations' slots; a background spike must not make users wait; high load.
  { item: 8, benchmark: 'incidents', goalsFrom: 'issue 35' },
  { item: 8, benchmark: 'limits-cost', goalsFrom: 'issue 35' },
  // A limit in auto mode: settled within 60 s of an incident's start, back within 60 s of its end.
  { item: 9, benchmark: 'auto-limit' },
];

interface Recorded {
  startedAt: string;
  goals?: Goal[];
}

export function atAGlanceMarkdown(dir = resultsDir): string {
  const rows: string[][] = [];
  for (const { item, benchmark, goalsFrom } of issueItems) {
    const number = goalsFrom ? `${item} (${goalsFrom})` : String(item);
    const file = path.join(dir, `${benchmark}.json`);
    if (!fs.existsSync(file)) {
      rows.push([number, benchmark, 'not run yet', '', '', '', '']);
      continue;
    }
    const recorded = JSON.parse(fs.readFileSync(file, 'utf8')) as Recorded;
    for (const goal of recorded.goals ?? [])
      rows.push([number, benchmark, goal.name, goal.target, formatMeasured(goal), formatMet(goal), recorded.startedAt.slice(0, 10)]);
  }
  return `## At a glance

Each goal of the benchmarks issue, from the latest full run of its benchmark (the sections below have the tables, the commands and what the figures mean). Measured on this shared 2-core machine, with everything on it.

${markdownTable(['#', 'benchmark', 'goal', 'target', 'measured', 'met', 'run'], rows)}
`;
}
