import type { LimitsCostResult } from './limits-cost';
import { goalsTable } from './report/goals';
import { formatMachine } from './report/machine';
import { formatSpread } from './report/stats';
import { markdownTable } from './report/table';

export function limitsCostTables(result: LimitsCostResult): string {
  const variantLabel = {
    none: 'no integration named',
    'in-flight': 'an in-flight limit on each of 20 integrations',
    'in-flight-and-rate': 'the same and a start rate',
  };
  const settle = markdownTable(
    [
      'part 1: settle calls',
      'Redis main-thread µs per task',
      'of it inside the script',
      'tasks per settle call',
      '÷ none, main thread (median of rounds, range)',
      '÷ none, inside the script',
    ],
    result.settle.map((c) => [
      variantLabel[c.variant],
      formatSpread(c.cpuUs, 1),
      formatSpread(c.scriptUs, 1),
      formatSpread(c.tasksPerCall, 1),
      formatSpread(c.cpuRatio, 2),
      formatSpread(c.scriptRatio, 2),
    ]),
  );
  const perRun = markdownTable(
    ['pair', 'integration limits', 'tasks/s asked', 'tasks/s sent', 'Redis µs per task', 'of it in scripts', 'kept up'],
    result.runs.flatMap((run) =>
      run.loads.map((load) => [
        String(run.pair),
        run.variant === 'every' ? 'one on each of 20 integrations' : 'none (no integration named)',
        load.targetTasksPerSecond.toLocaleString('en-US'),
        load.tasksPerSecond.toFixed(0),
        load.perTaskUs.toFixed(1),
        load.scriptUsecPerTask.toFixed(1),
        load.keptUp ? 'yes' : 'no',
      ]),
    ),
  );
  const compared = markdownTable(
    ['tasks/s', 'µs per task without limits', 'with a limit on each integration', 'with ÷ without, per pair', 'median ratio', 'every run kept up'],
    result.byRate.map((r) => [
      r.targetTasksPerSecond.toLocaleString('en-US'),
      formatSpread(r.withoutUs, 1),
      formatSpread(r.withUs, 1),
      r.ratioByPair.map((ratio) => `${ratio.toFixed(2)}x`).join(', '),
      `${r.ratio.median.toFixed(2)}x`,
      r.keptUp ? 'yes' : 'no',
    ]),
  );
  return `${settle}\n\n${perRun}\n\n${compared}\n\n${goalsTable(result.goals)}`;
}

export function limitsCostMarkdown(result: LimitsCostResult): string {
  const s = result.settings;
  const sim = s.fleetScale.sim;
  return `## limits-cost

${result.mode === 'smoke' ? '**Smoke run: tiny load, figures not meaningful.**\n\n' : ''}- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}; Redis ${result.redisVersion}, each run on a private redis-server of its own
- Command: \`${result.command}\` (from the repository root; \`npm run bench -- limits-cost --smoke\` for the few-second version the tests run)
- What: the Redis main thread's CPU per task (INFO cpu; per task = the load's beyond the idle fleet's ÷ tasks/s, as the scale benchmark's fleet-scale part computes it) with reservations that name no integration, against reservations that each name one of ${sim.integrations} integrations with a limit of its own (half the cluster: kept to, never reached). Per-integration limits are on by default, so a real fleet pays the second.
- Part 1, settle calls alone: a private redis-server, a ledger of ${s.settle.workers.toLocaleString('en-US')} workers of ${s.settle.slotsPerWorker} slots holding ${s.settle.heldLeases.toLocaleString('en-US')} leases; each task releases a held lease and reserves a new one, ${s.settle.concurrency} at once through one \`Ledger\` (which batches them into settle calls as a balancer's does), ${s.settle.tasksPerPhase.toLocaleString('en-US')} tasks per phase. Three variants: no integration named; each task naming one of ${s.settle.integrations} integrations with an in-flight limit (half the cluster: kept to, never reached); the same with a start rate of 1,000,000/s too (the rate's bookkeeping on every start, never a refusal). ${s.settle.rounds} rounds of one phase of each variant, the order rotated every round; each ratio is taken within its round.
- Part 2, the whole fleet: the scale benchmark's fleet-scale harness: ${sim.workers.toLocaleString('en-US')} simulated workers of ${sim.slotsPerWorker} slots and ${sim.balancers} balancers calling the real ledger (\`fleet/src/ledger.ts\`, \`fleet/lua/\`) at the real periods; loads of ${s.fleetScale.tasksPerSecond.map((r) => r.toLocaleString('en-US')).join(' and ')} tasks/s, ${s.fleetScale.windows} windows of ${s.fleetScale.loadWindowMs / 1000} s each after a ${s.fleetScale.loadWarmUpMs / 1000} s warm-up. ${s.pairs} pair(s) of runs, each run in a process of its own on a fresh redis-server, the order within a pair swapped every pair; the ratio is taken within each pair (the machine's load changes between pairs), and its median is the figure.

${limitsCostTables(result)}
`;
}
