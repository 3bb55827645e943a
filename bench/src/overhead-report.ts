import { goalsTable } from './report/goals';
import { formatMachine } from './report/machine';
import { failedCalls, formatSpread } from './report/stats';
import { markdownTable } from './report/table';
import type { Measurement, OverheadResult } from './overhead';

const failed = failedCalls;

function cpu(m: Measurement): string {
  const c = m.cpuPercentOfCore;
  const workers = Object.entries(c)
    .filter(([name]) => name.startsWith('worker-'))
    .map(([, percent]) => percent);
  const show = (value: number | undefined) => (value === undefined ? '?' : String(value));
  return `${show(c.balancer)} / ${workers.length > 0 ? workers.join('+') : '?'} / ${show(c.generator)} / ${show(c.redis)}`;
}

export function overheadTables(result: OverheadResult): string {
  const ceiling = markdownTable(
    ['path (closed loop)', 'outstanding', 'tasks/s', 'p50 ms', 'p99 ms', 'failed or dropped', 'CPU % of a core: balancer / workers / generator / redis'],
    result.ceiling.runs.map((run) => [
      run.target === 'direct' ? 'direct to workers' : 'through balancer',
      String(run.concurrency),
      String(Math.round(run.tasksPerSecond)),
      run.latency.p50Ms.toFixed(2),
      run.latency.p99Ms.toFixed(2),
      String(failed(run)),
      cpu(run),
    ]),
  );
  const latency = markdownTable(
    ['offered load (open loop)', 'tasks/s', 'direct p50 ms', 'balancer p50 ms', 'added p50 ms', 'direct p99 ms', 'balancer p99 ms', 'added p99 ms', 'failed or dropped'],
    result.latency.map((level) => [
      level.label,
      String(level.tasksPerSecond),
      formatSpread(level.directP50Ms),
      formatSpread(level.balancerP50Ms),
      formatSpread(level.addedP50Ms),
      formatSpread(level.directP99Ms),
      formatSpread(level.balancerP99Ms),
      formatSpread(level.addedP99Ms),
      String(level.failedCalls),
    ]),
  );
  const repetitions = result.settings.latency.repetitions;
  return [
    ceiling,
    '',
    `Latency: median over ${repetitions} repetition${repetitions === 1 ? '' : 's'} (min..max), direct and balancer alternating; added = balancer − direct per repetition.`,
    '',
    latency,
    '',
    goalsTable(result.goals),
  ].join('\n');
}

export function overheadMarkdown(result: OverheadResult): string {
  const s = result.settings;
  return `## overhead

${result.mode === 'smoke' ? '**Smoke run: tiny load, figures not meaningful.**\n\n' : ''}- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}; Redis ${result.redisVersion}, shared, on 127.0.0.1
- Command: \`${result.command}\` (from the repository root)
- Setup: 1 balancer and ${s.workerCount} workers (cluster baseline, max parallelism ${s.maxParallelismPerWorker} each, \`echo\` handler, ${s.payloadBytes}-byte payload), each its own process; the load generator is a fourth process. Everything shares the ${result.machine.nproc} cores, so the figures include that contention.
- Ceiling: closed loop, ${s.ceiling.warmupMs} ms warm-up then ${s.ceiling.durationMs} ms measured; "direct" calls Worker.Execute on the same workers.
- Latency: open loop (calls sent on schedule whatever the answers; latency counted from when each call was due), ${s.latency.leadInMs} ms lead-in then ${s.latency.durationMs} ms measured per window; a call due while ${s.latency.maxOutstanding} are outstanding is dropped (not sent).

${overheadTables(result)}
`;
}
