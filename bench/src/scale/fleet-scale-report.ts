import { formatSpread } from '../report/stats';
import { markdownTable } from '../report/table';
import { median, type FleetLoad, type FleetScaleResult, type FleetScaleRun, type FleetScaleSettings, type FleetWindow } from './fleet-scale';
import { carriedAtPlannedShare, measuredLoad } from './fleet-scale-summary';

const whole = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en-US') : 'n/a');

/** "hincrby 4.97, zadd 1.98": most first, the negligible left out. */
const counts = (values: Record<string, number>, digits = 2) =>
  Object.entries(values)
    .filter(([, n]) => n >= 0.05)
    .sort(([, a], [, b]) => b - a)
    .map(([command, n]) => `${command} ${n.toFixed(digits)}`)
    .join(', ');

/** Microseconds inside scripts per second over some windows (commandstats: EVALSHA and EVAL). */
const scriptUsecPerSecond = (windows: readonly FleetWindow[]) => {
  const seconds = windows.reduce((sum, w) => sum + w.seconds, 0);
  const usec = windows.reduce((sum, w) => sum + (w.commands.evalsha?.usec ?? 0) + (w.commands.eval?.usec ?? 0), 0);
  return usec / seconds;
};

/** Inside scripts per idle and per busy worker-second: commandstats' time, which the machine's other work disturbs less than INFO cpu. */
function insideScriptsPerWorkerSecond(run: FleetScaleRun, busyWorkers: number, workers: number): { idle: number; busy: number } {
  const idle = (scriptUsecPerSecond(run.workersIdle) - scriptUsecPerSecond(run.empty)) / workers;
  return { idle, busy: idle + (scriptUsecPerSecond(run.busy) - scriptUsecPerSecond(run.fleetIdle)) / busyWorkers };
}

function summaryTable(run: FleetScaleRun, settings: FleetScaleSettings): string {
  const s = settings.sim;
  const load = measuredLoad(run);
  const carried = carriedAtPlannedShare(run, settings);
  const inside = insideScriptsPerWorkerSecond(run, settings.busyWorkers, s.workers);
  return markdownTable(
    [
      'per task, µs (at tasks/s)',
      'of which inside scripts',
      'per idle worker-second, µs',
      `per busy worker-second (${s.slotsPerWorker} tasks), µs`,
      'of which inside the heartbeat script, idle / busy',
      'per balancer-second, µs',
      "share of Redis's thread at that rate",
      `tasks/s at ${settings.plannedShareOfThread * 100}% of the thread`,
    ],
    [
      [
        load ? `${formatSpread(load.perTaskUs, 1)} at ${whole(load.tasksPerSecond.median)}/s` : 'n/a',
        load ? load.scriptUsecPerTask.toFixed(1) : 'n/a',
        formatSpread(run.perIdleWorkerSecondUs, 1),
        formatSpread(run.perBusyWorkerSecondUs, 1),
        `${inside.idle.toFixed(1)} / ${inside.busy.toFixed(1)}`,
        formatSpread(run.perBalancerSecondUs, 0),
        load ? `${(load.shareOfThread.median * 100).toFixed(1)}%` : 'n/a',
        carried.measured
          ? `${whole(carried.tasksPerSecond)} (measured: driven at it, ${whole(carried.reservedPerSecond ?? Number.NaN)} reserved a second, at ${((carried.shareOfThread ?? 0) * 100).toFixed(1)}%; linear: ${whole(run.tasksPerSecondAtPlannedShare)})`
          : `${whole(carried.tasksPerSecond)} (extrapolated, linear)`,
      ],
    ],
  );
}

function loadsTable(run: FleetScaleRun): string {
  return markdownTable(
    [
      'target tasks/s',
      'why this rate',
      'reserved tasks/s',
      'in flight (expected)',
      'Redis µs/s',
      'share',
      'per task, µs',
      'inside scripts, µs',
      'harness cores',
      'harness kept up',
      'ledger anomalies',
    ],
    run.loads.map((load) => [
      whole(load.targetTasksPerSecond),
      load.chosenAs,
      whole(load.tasksPerSecond.median),
      `${whole(load.inFlightAtStart.median)} (${whole(load.expectedInFlight)})`,
      whole(load.redisCpuUsPerSecond.median),
      `${(load.shareOfThread.median * 100).toFixed(1)}%`,
      formatSpread(load.perTaskUs, 1),
      load.scriptUsecPerTask.toFixed(1),
      load.harnessCores.median.toFixed(2),
      load.keptUp ? 'yes' : `no: ${load.whyNotKeptUp.join('; ')}`,
      load.anomalies.length === 0 ? 'none' : load.anomalies.join('; '),
    ]),
  );
}

/** The highest rate again with everything else real processes send, beside the same rate's ledger alone; '' when not measured. */
function othersTable(run: FleetScaleRun): string {
  const withOthers = run.withOthers;
  const alone = withOthers && run.loads.find((load) => load.targetTasksPerSecond === withOthers.targetTasksPerSecond);
  if (!withOthers || !alone) return '';
  const perSecond = (load: FleetLoad, command: string) => median(load.windows.map((w) => (w.commands[command]?.calls ?? 0) / w.seconds));
  const names = [...new Set(withOthers.windows.flatMap((w) => Object.keys(w.commands)))].filter((command) => command !== 'info');
  const added = Object.fromEntries(
    names.map((command) => [command, perSecond(withOthers, command) - perSecond(alone, command)]).filter(([, n]) => (n as number) >= 1),
  );
  return markdownTable(
    [
      'tasks/s',
      'share of the thread, the ledger alone (the load above)',
      'with the others too',
      'the others, µs/s',
      'commands per second the others add',
      'harness kept up',
      'ledger anomalies',
    ],
    [
      [
        whole(withOthers.tasksPerSecond.median),
        `${(alone.shareOfThread.median * 100).toFixed(1)}%`,
        `${(withOthers.shareOfThread.median * 100).toFixed(1)}%`,
        whole(withOthers.redisCpuUsPerSecond.median - alone.redisCpuUsPerSecond.median),
        counts(added, 0),
        withOthers.keptUp ? 'yes' : `no: ${withOthers.whyNotKeptUp.join('; ')}`,
        withOthers.anomalies.length === 0 ? 'none' : withOthers.anomalies.join('; '),
      ],
    ],
  );
}

function consistencyTable(run: FleetScaleRun): string {
  const c = run.consistency;
  const mismatches = [...c.whileRunning.mismatches, ...c.afterAllEnded.mismatches];
  return markdownTable(
    [
      'while running: tasks the workers run / ledger in flight',
      'after every task ended: reserved / released / ledger in flight',
      'totals free / capacity',
      'mismatches',
    ],
    [
      [
        `${whole(c.whileRunning.tasksRunning)} / ${whole(c.whileRunning.ledgerInflight)} on ${whole(c.whileRunning.workers)} workers`,
        `${whole(c.afterAllEnded.tasksReserved)} / ${whole(c.afterAllEnded.releasesSent)} / ${whole(c.afterAllEnded.ledgerInflight)}`,
        `${whole(c.afterAllEnded.totalFree)} / ${whole(c.afterAllEnded.totalCapacity)}`,
        mismatches.length === 0 ? 'none' : mismatches.slice(0, 5).join('; '),
      ],
    ],
  );
}

/** The linear model's figure, and what the same costs would take at the goal's rate. */
function linearLine(run: FleetScaleRun, settings: FleetScaleSettings): string {
  const s = settings.sim;
  const share = settings.plannedShareOfThread * 100;
  const load = measuredLoad(run);
  const atGoalUs = load
    ? run.emptyCpuUsPerSecond.median +
      s.workers * run.perIdleWorkerSecondUs.median +
      s.balancers * run.perBalancerSecondUs.median +
      settings.goalTasksPerSecond * load.perTaskUs.median
    : Number.NaN;
  return `(${share}% x 1,000,000 µs − empty − workers × idle worker-second − balancers × balancer-second) ÷ per task = ${whole(run.tasksPerSecondAtPlannedShare)} tasks/s at ${share}% of the thread, from ${run.tasksPerSecondAtPlannedShareFrom}; at ${whole(settings.goalTasksPerSecond)} tasks/s the same costs would take ${((atGoalUs / 1e6) * 100).toFixed(0)}% of the thread.`;
}

/** How the fleet was simulated and measured: the paragraph above the tables. */
function setupParagraph(result: FleetScaleResult): string {
  const { settings, run } = result;
  const s = settings.sim;
  return `The ledger with the issue's fleet: ${whole(s.workers)} simulated workers of ${s.slotsPerWorker} slots in one cluster (\`baseline\`; the balancers also sweep and read the empty \`candidate\`, as real ones serve both) and ${s.balancers} simulated balancers, all in the benchmark's process, each on its own Redis connection as a real process has: a worker's connection carries its heartbeat every ${s.heartbeatIntervalMs} ms (the worker's default) times the scale the ledger answers for the cluster's size (every ${whole(run.heartbeatPeriodMs)} ms here); a balancer's carries its reserves (priority ${s.userPresentShare * 100}% user / ${100 - s.userPresentShare * 100}% background, waitIfNone true as Admission asks) and the releases of the tasks it dispatched (the worker's answer reaching it at once), both batched by the real Ledger (at most one call per cluster every 2 ms), a sweep of each cluster every ${s.sweepIntervalMs} ms and a directory read every ${s.directoryRefreshIntervalMs} ms, and it holds a subscriber connection. Nothing is multiplexed: no connection carries two simulated processes. Balancers' connections pipeline automatically (connectRedis), workers' do not in the harness (a worker seldom has two commands in one tick, and an ioredis pipeline per call was most of the harness's CPU); what Redis receives is the same. Tasks run a log-normal time (median ${s.durations.medianMs} ms, p99 ${s.durations.p99OverMedian}x the median, mean ${whole(result.meanTaskDurationMs)} ms); each load starts in its steady state (rate x mean in flight, each with the time left of a task found running) and runs ${settings.loadWarmUpMs} ms before ${settings.windows} windows of ${settings.loadWindowMs} ms (idle and busy states: ${settings.windows} windows of ${settings.idleWindowMs} ms); medians (min..max) over the windows of all repetitions. ${settings.repetitions} repetition${settings.repetitions === 1 ? '' : 's'}, each in a process of its own (a fresh heap) on a fresh private redis-server. What real processes send besides the ledger (worker reports, latency summaries, balancer heartbeats) is left out of the loads below${settings.othersAtHighestRate ? ', and measured in a load of its own (after them)' : ''}.`;
}

/** Part 3 of the scale benchmark: the ledger with the target fleet. */
export function fleetScaleTables(result: FleetScaleResult): string {
  const { settings, run } = result;
  const s = settings.sim;
  const others = othersTable(run);
  const load = measuredLoad(run);
  return [
    setupParagraph(result),
    '',
    summaryTable(run, settings),
    '',
    `Per idle worker-second = (workers idle − empty Redis) ÷ workers, connections included; per balancer-second = (balancers too − workers idle) ÷ balancers; per busy worker-second = per idle + (every worker running ${s.slotsPerWorker} tasks − idle fleet) ÷ workers; per task = (under load − idle fleet) ÷ tasks/s: its reserve and release and its lease's upkeep while it runs. Loads:`,
    '',
    loadsTable(run),
    '',
    ...(others
      ? [
          `Everything together: the highest rate again (after a warm-up of ${s.latencyReportIntervalMs} ms, a latency-report period), each simulated process also sending, through the real classes, what a real one sends besides the ledger: a worker its report for the admin UI with the first heartbeat due ${s.reportIntervalMs} ms after the last (on the same connection, pipelined as a real worker's, so the two go in one write) and its tasks' latency summaries every ${s.latencyReportIntervalMs} ms (the tasks spread over ${s.integrations} integrations), a balancer its heartbeat to the balancer register every ${s.balancerHeartbeatIntervalMs} ms. The issue's goals (below) are the ledger's; this is what one Redis carries in all:`,
          '',
          others,
          '',
        ]
      : []),
    'Redis commands (INFO commandstats: a script is one evalsha, and its commands count again under their own names):',
    '',
    markdownTable(
      ['commands per task (at the rate above)', 'commands per idle worker-second', 'commands per busy worker-second'],
      [[counts(load?.commandsPerTask ?? {}), counts(run.commandsPerIdleWorkerSecond), counts(run.commandsPerBusyWorkerSecond)]],
    ),
    '',
    markdownTable(['µs inside each command per task (commandstats; inside scripts counted in evalsha too)'], [[counts(load?.usecPerTaskByCommand ?? {}, 1)]]),
    '',
    `Consistency (free = capacity − in flight on every worker, checked in the ledger with tasks running and again after every task ended):`,
    '',
    consistencyTable(run),
    '',
    `Linear in the rate, from the costs measured at the highest rate the harness drove (what "extrapolated" means above: the cost per task falls as the rate rises, since batches grow, so a line from one rate understates what a higher one carries):`,
    '',
    `- ${linearLine(run, settings)}`,
  ].join('\n');
}
