import { goalsTable } from './report/goals';
import { formatMachine } from './report/machine';
import { failedCalls, formatSpread } from './report/stats';
import { markdownTable } from './report/table';
import type { Measurement, OverheadResult } from './overhead';
import { cpuGroups, type CpuGroup } from './overhead-paths';

const failed = failedCalls;

/** "95 / 160 / 210 / 30 / 0": CPU µs per task of each process group, in cpuGroups' order; "?" where not read. */
function cpuCells(microsPerTask: Partial<Record<CpuGroup, number>> | undefined): string {
  return cpuGroups.map((group) => (microsPerTask?.[group] === undefined ? '?' : String(Math.round(microsPerTask[group])))).join(' / ');
}

const cpuHeader = `CPU µs/task: ${cpuGroups.join(' / ')}`;
const busy = (m: Measurement) => (m.machineBusyPercentOfCore === undefined ? '?' : String(m.machineBusyPercentOfCore));
/** Our processes together, percent of one core over the measured window: the machine's busy share minus this is other work. */
const ours = (m: Measurement) => (m.cpu ? String(Math.round(Object.values(m.cpu.percentOfCore).reduce((sum, percent) => sum + percent, 0))) : '?');

export function overheadTables(result: OverheadResult): string {
  const labelOf = (target: string) => result.paths.find((path) => path.target === target)?.label ?? target;
  const direct = result.ceiling.best.direct?.tasksPerSecond ?? 0;
  const goalLevel = result.latency.find((level) => level.isGoalLevel);

  const summary = markdownTable(
    [
      'path',
      'ceiling tasks/s',
      'x direct',
      `p50 / p99 ms at ${goalLevel?.label ?? 'goal level'}`,
      'added p50 / p99 ms',
      `${cpuHeader} (at ceiling)`,
      `${cpuHeader} (at ${goalLevel?.label ?? 'goal level'})`,
    ],
    result.paths.map((path) => {
      const best = result.ceiling.best[path.target];
      const atGoal = goalLevel?.paths.find((p) => p.target === path.target);
      return [
        path.label,
        best ? String(Math.round(best.tasksPerSecond)) : '?',
        best && direct > 0 ? (best.tasksPerSecond / direct).toFixed(2) : '?',
        atGoal ? `${atGoal.p50Ms.median.toFixed(2)} / ${atGoal.p99Ms.median.toFixed(2)}` : '?',
        atGoal?.addedP50Ms && atGoal.addedP99Ms ? `${atGoal.addedP50Ms.median.toFixed(2)} / ${atGoal.addedP99Ms.median.toFixed(2)}` : '–',
        cpuCells(best?.cpu?.microsPerTask),
        cpuCells(atGoal?.cpuMicrosPerTask),
      ];
    }),
  );
  const ceiling = markdownTable(
    [
      'path (closed loop)',
      'outstanding',
      'tasks/s',
      'p50 ms',
      'p99 ms',
      'failed or dropped',
      cpuHeader,
      'our processes, % of a core',
      'machine busy, % of a core',
    ],
    result.ceiling.runs.map((run) => [
      labelOf(run.target),
      String(run.concurrency),
      String(Math.round(run.tasksPerSecond)),
      run.latency.p50Ms.toFixed(2),
      run.latency.p99Ms.toFixed(2),
      String(failed(run)),
      cpuCells(run.cpu?.microsPerTask),
      ours(run),
      busy(run),
    ]),
  );
  const latency = markdownTable(
    ['offered load (open loop)', 'tasks/s', 'path', 'p50 ms', 'p99 ms', 'added p50 ms', 'added p99 ms', cpuHeader, 'failed or dropped'],
    result.latency.flatMap((level) =>
      level.paths.map((path) => [
        `${level.label}${level.isGoalLevel ? ' (goal level)' : ''}`,
        String(level.tasksPerSecond),
        path.label,
        formatSpread(path.p50Ms),
        formatSpread(path.p99Ms),
        path.addedP50Ms ? formatSpread(path.addedP50Ms) : '–',
        path.addedP99Ms ? formatSpread(path.addedP99Ms) : '–',
        cpuCells(path.cpuMicrosPerTask),
        String(path.failedCalls),
      ]),
    ),
  );
  const repetitions = result.settings.latency.repetitions;
  return [
    summary,
    '',
    `Ceiling: closed loop, each path at each number of calls outstanding (${
      result.paths
        .filter((path) => path.lanesCappedAtSlots)
        .map((path) => path.target)
        .join(', ') || 'no path'
    }: lanes capped at the workers' slots, as nothing queues them), after every path ran ${result.settings.ceiling.firstWarmupPerPathMs} ms unmeasured. "Machine busy" minus "our processes" is other work on the machine.`,
    '',
    ceiling,
    '',
    `Latency: median over ${repetitions} repetition${repetitions === 1 ? '' : 's'} (min..max), the paths alternating within each repetition (${result.paths.map((path) => path.target).join(', ')}); added = path − direct per repetition. CPU: median over the repetitions.`,
    '',
    latency,
    '',
    goalsTable(result.goals),
    '',
    `Ledger after the last phase (cluster ${result.ledgerAtEnd.cluster}): ${result.ledgerAtEnd.leases} leases held, ${result.ledgerAtEnd.totalFree} of ${result.ledgerAtEnd.totalCapacity} slots free.`,
    ...result.notJudged.map((line) => `\nNot judged: ${line}.`),
    ...('skipped' in result.haproxy ? [`\nHAProxy: ${result.haproxy.skipped}.`] : []),
  ].join('\n');
}

export function overheadMarkdown(result: OverheadResult): string {
  const s = result.settings;
  const haproxy = 'skipped' in result.haproxy ? `not run: ${result.haproxy.skipped}` : `HAProxy ${result.haproxy.version} (\`${result.haproxy.binary}\`)`;
  return `## overhead

${result.mode === 'smoke' ? '**Smoke run: tiny load, figures not meaningful.**\n\n' : ''}- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}, ${result.loadAverageAtEnd1m} when it ended; Redis ${result.redisVersion}, shared, on 127.0.0.1
- Command: \`${result.command}\` (from the repository root)
- Setup: 1 balancer and ${s.workerCount} workers (cluster baseline, max parallelism ${s.maxParallelismPerWorker} each, \`echo\` handler, ${s.payloadBytes}-byte payload), each its own process; ${haproxy} in front of the same workers (h2c both sides, one thread, no logging); the load generator is a process of its own. Everything shares the ${result.machine.nproc} cores, so the figures include that contention, and other work on the machine ("machine busy" counts ours and theirs).
- Paths: ${result.paths.map((path) => `${path.target} (${path.label})`).join(', ')}. "direct" calls Worker.Execute on the workers with a made-up lease id (no ledger), the generator spreading the calls over them; "haproxy" makes the same calls naming no worker through HAProxy, which picks one (\`balance leastconn\`, \`maxconn\` ${s.maxParallelismPerWorker} per worker, more waiting in its queue; the workers run \`--accept-unaddressed\`); "balancer" is Balancer.Submit; "proxyless" is \`@headroom/client/proxyless\` in the generator (its own two Redis connections, the balancer's key prefix, clusters and policy, one attempt per task): it reserves the slot in the ledger and calls the worker itself.
- CPU per task: each process's CPU time (user + system from /proc/<pid>/stat, 10 ms ticks) over the measured window, read by the generator at the window's edges, divided by the tasks answered in it; "workers" sums the workers. On the proxyless path the routing work runs in the caller: its "generator" figure includes the client's ledger work, and the balancer's figure is its idle cost.
- Ceiling: closed loop, ${s.ceiling.warmupMs} ms warm-up then ${s.ceiling.durationMs} ms measured.
- Latency: open loop (calls sent on schedule whatever the answers; latency counted from when each call was due), ${s.latency.leadInMs} ms lead-in then ${s.latency.durationMs} ms measured per window; a call due while ${s.latency.maxOutstanding} are outstanding is dropped (not sent). The goal level is ${s.latency.goalRate.maxTasksPerSecond} tasks/s or ${Math.round(s.latency.goalRate.shareOfBalancerCeiling * 100)}% of the balancer's ceiling, whichever is lower.

${overheadTables(result)}
`;
}
