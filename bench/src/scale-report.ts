import { goalsTable } from './report/goals';
import { formatMachine } from './report/machine';
import { formatSpread } from './report/stats';
import { markdownTable } from './report/table';
import type { ScaleResult } from './scale';
import { fleetScaleTables } from './scale/fleet-scale-report';

const whole = (n: number) => Math.round(n).toLocaleString('en-US');
/** "evalsha 2.00, publish 1.00": the commands Redis counted (a script's own commands too), most first. */
const commandCounts = (counts: Record<string, number>) =>
  Object.entries(counts)
    .sort(([, a], [, b]) => b - a)
    .map(([name, n]) => `${name} ${n.toFixed(2)}`)
    .join(', ');

export function scaleTables(result: ScaleResult): string {
  const s = result.settings;
  const scripts = markdownTable(
    ['operation', 'µs inside scripts per operation (commandstats)', "µs of Redis's thread per operation (INFO cpu)"],
    result.scripts.map((c) => [c.script, formatSpread(c.usecPerCall, 1), formatSpread(c.mainThreadCpuUsPerCall, 1)]),
  );
  const fleet = markdownTable(
    [
      '#',
      'empty µs/s',
      'workers idle µs/s',
      '+ balancers idle µs/s',
      'under load µs/s',
      'tasks/s',
      'µs per worker-second',
      'µs per balancer-second',
      'µs per task',
      'commands per task',
      'commands per worker-second',
      'failed',
    ],
    result.fleetRuns.map((m) => [
      String(m.repetition),
      whole(m.emptyCpuUsPerSecond),
      whole(m.workersIdleCpuUsPerSecond),
      whole(m.fleetIdleCpuUsPerSecond),
      whole(m.loadCpuUsPerSecond),
      m.tasksPerSecond.toFixed(0),
      m.perWorkerSecondUs.toFixed(1),
      m.perBalancerSecondUs.toFixed(0),
      m.perTaskUs.toFixed(1),
      commandCounts(m.commandsPerTask),
      commandCounts(m.commandsPerWorkerSecond),
      String(m.failedTasks),
    ]),
  );
  const capacity = markdownTable(
    [
      'deployment',
      'Redis shards',
      'busy workers per shard',
      'balancers',
      `tasks/s at ${s.plannedShareOfCore * 100}% of each thread`,
      'tasks/s at 100% (saturated)',
    ],
    result.capacity.map((row) => [
      row.label,
      String(row.redisShards),
      whole(row.workers),
      String(row.balancers),
      whole(row.plannedTasksPerSecond),
      whole(row.saturatedTasksPerSecond),
    ]),
  );
  const idle = result.perWorkerSecondUs.median;
  const w = idle + result.busyWorkerExtraUs;
  const scriptCpu = (name: string) => result.scripts.find((c) => c.script === name)?.mainThreadCpuUsPerCall.median ?? Number.NaN;
  const heartbeatIdle = scriptCpu('heartbeat-idle');
  const reserveAndRelease = scriptCpu('reserve') + scriptCpu('release');
  const b = result.perBalancerSecondUs.median;
  const t = result.perTaskUs.median;
  return [
    `Scripts alone (${s.scripts.repetitions} repetition${s.scripts.repetitions === 1 ? '' : 's'}, median (min..max); ${s.scripts.callsPerScript} operations each, ${s.scripts.concurrency} in flight from one connection (reservations and releases then go ${s.scripts.concurrency} to a settle call, as a busy balancer batches them; heartbeats and sweeps one per call), ${s.scripts.workers} workers in the ledger, heartbeats carrying ${s.scripts.leasesPerHeartbeat} leases):`,
    '',
    scripts,
    '',
    `Real processes on the private Redis (${s.fleet.workers} workers, then ${s.fleet.balancers} balancers, idle ${s.fleet.idleWindowMs} ms each; then ${s.fleet.tasksPerSecond} tasks/s for ${s.fleet.loadWindowMs} ms). Redis main-thread CPU in µs per second of wall time; per worker-second = (workers idle − empty) ÷ workers; per balancer-second = (balancers idle − workers idle) ÷ balancers; per task = (under load − idle) ÷ tasks/s:`,
    '',
    fleet,
    '',
    `An idle worker costs Redis ${idle.toFixed(0)} µs a second: mostly its heartbeat, once a second (${heartbeatIdle.toFixed(0)} µs when heartbeats come pipelined on one connection, as in the scripts table; a worker's arrives alone on its own connection, so Redis also reads, parses and answers it by itself), and a report of its figures for the admin UI every few seconds (the SET above). A worker running ${s.scripts.leasesPerHeartbeat} tasks costs ${result.busyWorkerExtraUs.toFixed(0)} µs more per heartbeat (heartbeat-busy − heartbeat-idle). Likewise a task's reservation and release take ${reserveAndRelease.toFixed(0)} µs in batches of ${s.scripts.concurrency}, against ${t.toFixed(0)} µs as the real balancers of this small fleet send them (a few tasks per batch window).`,
    '',
    `The model, with the medians (per busy worker-second W = ${w.toFixed(1)} µs, per balancer-second B = ${b.toFixed(0)} µs, per task T = ${t.toFixed(1)} µs): Redis runs commands on one thread, so a deployment fits while workers × W + balancers × B + tasks/s × T stays under the share of a second it may use (${s.plannedShareOfCore * 100}% planned, leaving the rest for bursts, balancers waking queued tasks over pub/sub, and persistence). tasks/s = (share × 1,000,000 − workers × W − balancers × B) ÷ T. With Redis Cluster, every key of one Headroom cluster shares a hash tag, so each cluster's ledger lives on one shard: a shard carries its cluster's workers and tasks, and every balancer's sweeps and reads of that cluster (counted here in full on every shard, which overstates it); tasks/s adds up over shards.`,
    '',
    capacity,
    '',
    `One Redis thread alone would carry ${whole(1e6 / t)} tasks/s with no workers or balancers, or ${whole(1e6 / w)} busy workers (${whole(1e6 / idle)} idle ones) and no tasks.`,
    '',
    `### Fleet scale (issue 14): ${whole(result.fleetScale.settings.sim.workers)} workers`,
    '',
    fleetScaleTables(result.fleetScale),
    '',
    goalsTable(result.goals),
  ].join('\n');
}

export function scaleMarkdown(result: ScaleResult): string {
  return `## scale

${result.mode === 'smoke' ? '**Smoke run: tiny load, figures not meaningful.**\n\n' : ''}- Date: ${result.startedAt}
- Machine: ${formatMachine(result.machine)}; a private redis-server ${result.privateRedisVersion} on 127.0.0.1 started by the benchmark (no persistence), so that only our commands count
- Command: \`${result.command}\` (from the repository root)
- Setup: first the ledger's scripts called directly from the benchmark's process through the real \`Ledger\` (\`fleet/\`), then real worker and balancer processes (demo handlers, each task sleeping ${result.settings.fleet.taskSleepMs} ms) and a load-generator process, and last the fleet-scale mode (${result.fleetScale.settings.sim.workers.toLocaleString('en-US')} simulated workers on a fresh private redis-server; its own section below). Redis's own accounting: \`INFO commandstats\` (time inside each command; scripts arrive as EVALSHA) and \`INFO cpu\` (\`used_cpu_user_main_thread\` + \`used_cpu_sys_main_thread\`: parsing and network included). Everything shares the ${result.machine.nproc} cores, Redis included.

${scaleTables(result)}
`;
}
