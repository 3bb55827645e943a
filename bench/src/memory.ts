/**
 * memory: a balancer holding 100,000 queued tasks. One balancer (--max-queued-tasks 100000) and
 * one worker at max parallelism 1, each its own process; the load generator in another sends
 * 110,000 tasks that each sleep longer than the run: the first takes the only slot, the next
 * 100,000 wait in the balancer's queue, and the last 10,000 find it full. The balancer's /metrics
 * (queue depth, RSS, heap) is read all along; then the generator goes away, which cancels every
 * waiting call. Repeated with a fresh fleet.
 */
import { performance } from 'node:perf_hooks';
import { sleep } from '@headroom/common';
import { Cleanups } from './fleet/cleanups';
import { benchPlace, startProcessFleet } from './fleet/headroom-fleet';
import { getText } from './fleet/http-get';
import { parsePrometheusText } from './fleet/runtime-metrics';
import { LoadGenerator } from './load/generator';
import type { Goal } from './report/goals';
import { startRun, type BenchmarkOptions, type RunHeader } from './report/run-header';
import { spread, type Spread } from './report/stats';

export interface MemorySettings {
  /** The balancer's --max-queued-tasks. */
  maxQueuedTasks: number;
  /** Tasks sent beyond the limit: each should be refused at once. */
  tasksBeyondLimit: number;
  /** How fast the generator sends (open loop). */
  sendTasksPerSecond: number;
  /** Every task sleeps this long, so the one that runs holds the only slot for the whole run. */
  taskSleepMs: number;
  /** Each task's deadline: longer than a run, so none ends on its own before the generator goes away. */
  callTimeoutMs: number;
  /** Queue depths at which the balancer's memory is noted, besides empty and full. */
  depthMarks: readonly number[];
  metricsIntervalMs: number;
  /** After the generator went away: time for the cancellations to reach the balancer and a GC to run. */
  settleMs: number;
  /** Longest a run may take to fill the queue. */
  fillTimeoutMs: number;
  repetitions: number;
}

export const fullSettings: MemorySettings = {
  maxQueuedTasks: 100_000,
  tasksBeyondLimit: 10_000,
  sendTasksPerSecond: 5_000,
  taskSleepMs: 600_000,
  callTimeoutMs: 600_000,
  depthMarks: [25_000, 50_000, 75_000],
  metricsIntervalMs: 250,
  settleMs: 3_000,
  fillTimeoutMs: 90_000,
  repetitions: 3,
};

/** Seconds in all: proves the benchmark still runs end to end, measures nothing worth reading. */
export const smokeSettings: MemorySettings = {
  ...fullSettings,
  maxQueuedTasks: 2_000,
  tasksBeyondLimit: 200,
  sendTasksPerSecond: 2_000,
  depthMarks: [1_000],
  settleMs: 1_000,
  fillTimeoutMs: 20_000,
  repetitions: 1,
};

/** The balancer's memory at one moment. */
export interface MemorySample {
  atMs: number;
  queued: number;
  rssBytes: number;
  heapUsedBytes: number;
  /** Tasks answered HR_ERR_QUEUE_FULL so far (headroom_balancer_queue_full_total). */
  refusedQueueFull: number;
}

export interface MemoryRun {
  repetition: number;
  empty: MemorySample;
  /** The first sample at or past each mark, and when the queue first held maxQueuedTasks. */
  marks: MemorySample[];
  full: MemorySample;
  /** Once every task beyond the limit was refused, the queue still full. */
  afterRefusals: MemorySample;
  /** After the generator went away and the queue emptied. */
  afterCancel: MemorySample;
  /** (full - empty) / maxQueuedTasks. */
  rssBytesPerQueuedTask: number;
  heapBytesPerQueuedTask: number;
  /** afterRefusals - full: what the refused tasks left behind. */
  rssGrowthWhileRefusingBytes: number;
  heapGrowthWhileRefusingBytes: number;
  refusedQueueFull: number;
  /** The most the queue held by the balancer's own gauge. */
  maxQueued: number;
  fillSeconds: number;
  /** Every sample, in order. */
  samples: MemorySample[];
}

export interface MemoryResult extends RunHeader<'memory', MemorySettings> {
  runs: MemoryRun[];
  rssBytesPerQueuedTask: Spread;
  heapBytesPerQueuedTask: Spread;
  rssAtFullMiB: Spread;
  heapAtFullMiB: Spread;
  rssGrowthWhileRefusingMiB: Spread;
  goals: Goal[];
}

export type MemoryOptions = BenchmarkOptions;

const mib = (bytes: number) => bytes / 1024 / 1024;

async function readBalancer(metricsUrl: string, startedAt: number, signal: AbortSignal): Promise<MemorySample> {
  // A balancer taking in thousands of tasks a second answers /metrics late, not never.
  const samples = parsePrometheusText(await getText(metricsUrl, 30_000, signal));
  const total = (name: string) => samples.filter((s) => s.name === name).reduce((sum, s) => sum + s.value, 0);
  return {
    atMs: performance.now() - startedAt,
    queued: total('headroom_balancer_queue_depth'),
    rssBytes: total('process_resident_memory_bytes'),
    heapUsedBytes: total('nodejs_heap_size_used_bytes'),
    refusedQueueFull: total('headroom_balancer_queue_full_total'),
  };
}

export async function runMemory(options: MemoryOptions): Promise<MemoryResult> {
  const settings = options.smoke ? smokeSettings : fullSettings;
  const run = await startRun('memory', options, settings);
  const { progress, signal } = options;

  const measure = async (repetition: number): Promise<MemoryRun> => {
    const { keyPrefix, logDir } = benchPlace('memory');
    const cleanups = new Cleanups();
    try {
      const fleet = await startProcessFleet(
        keyPrefix,
        {
          redisUrl: options.redisUrl,
          workers: [{ cluster: 'baseline', count: 1, maxParallelismPerWorker: 1 }],
          balancerArgs: ['--metrics-port', '0', '--max-queued-tasks', String(settings.maxQueuedTasks), '--max-task-timeout-ms', String(settings.callTimeoutMs)],
          logDir,
        },
        cleanups.register,
      );
      const metricsUrl = fleet.balancers[0]!.metricsUrl;
      if (!metricsUrl) throw new Error(`the balancer did not say where it serves /metrics (logs in ${logDir})`);
      const generator = await LoadGenerator.start({
        balancerAddresses: fleet.balancers.map((b) => b.address),
        workers: [],
        task: { integration: 'bank-a', payload: JSON.stringify({ sleepMs: settings.taskSleepMs }) },
        callTimeoutMs: settings.callTimeoutMs,
      });
      cleanups.register(() => generator.close());
      const startedAt = performance.now();
      const samples: MemorySample[] = [];
      const read = async () => {
        const sample = await readBalancer(metricsUrl, startedAt, signal);
        samples.push(sample);
        return sample;
      };
      const empty = await read();

      const tasks = settings.maxQueuedTasks + 1 + settings.tasksBeyondLimit;
      const phase = generator.run(
        {
          kind: 'open',
          target: 'balancer',
          tasksPerSecond: settings.sendTasksPerSecond,
          warmupMs: 0,
          durationMs: (tasks / settings.sendTasksPerSecond) * 1000,
          maxOutstanding: tasks,
        },
        signal,
      );
      // The generator is closed below while its calls wait: the phase then fails, as expected.
      phase.catch(() => undefined);

      // Bounded by fillTimeoutMs: until every task beyond the limit has been refused.
      const refusedAll = () => samples[samples.length - 1]!.refusedQueueFull >= settings.tasksBeyondLimit;
      while (!refusedAll()) {
        if (performance.now() - startedAt > settings.fillTimeoutMs) {
          throw new Error(`the queue did not fill within ${settings.fillTimeoutMs} ms: ${JSON.stringify(samples[samples.length - 1])}`);
        }
        await sleep(settings.metricsIntervalMs, signal);
        await read();
      }
      // One more interval: refusals still in flight settle.
      await sleep(settings.metricsIntervalMs, signal);
      const afterRefusals = await read();
      const full = samples.find((s) => s.queued >= settings.maxQueuedTasks) ?? afterRefusals;
      const marks = [...settings.depthMarks, settings.maxQueuedTasks].map((mark) => samples.find((s) => s.queued >= mark)).filter((s): s is MemorySample => s !== undefined);

      // The clients go away: every waiting call is cancelled, and the queue must empty.
      await generator.close();
      let afterCancel = await read();
      const settleUntil = performance.now() + settings.settleMs;
      while (performance.now() < settleUntil) {
        await sleep(settings.metricsIntervalMs, signal);
        afterCancel = await read();
      }
      return {
        repetition,
        empty,
        marks,
        full,
        afterRefusals,
        afterCancel,
        rssBytesPerQueuedTask: (full.rssBytes - empty.rssBytes) / full.queued,
        heapBytesPerQueuedTask: (full.heapUsedBytes - empty.heapUsedBytes) / full.queued,
        rssGrowthWhileRefusingBytes: afterRefusals.rssBytes - full.rssBytes,
        heapGrowthWhileRefusingBytes: afterRefusals.heapUsedBytes - full.heapUsedBytes,
        refusedQueueFull: afterRefusals.refusedQueueFull,
        maxQueued: Math.max(...samples.map((s) => s.queued)),
        fillSeconds: full.atMs / 1000,
        samples,
      };
    } finally {
      await cleanups.runAll();
    }
  };

  progress(`${settings.repetitions} runs: ${settings.maxQueuedTasks} tasks queued at one balancer, ${settings.tasksBeyondLimit} more sent beyond its limit, ${settings.sendTasksPerSecond} tasks/s`);
  const runs: MemoryRun[] = [];
  for (let repetition = 1; repetition <= settings.repetitions; repetition++) {
    const r = await measure(repetition);
    runs.push(r);
    progress(
      `#${repetition}: ${r.full.queued} queued in ${r.fillSeconds.toFixed(1)} s; RSS ${mib(r.empty.rssBytes).toFixed(0)} → ${mib(r.full.rssBytes).toFixed(0)} MiB (${r.rssBytesPerQueuedTask.toFixed(0)} B a task), ` +
        `heap ${mib(r.empty.heapUsedBytes).toFixed(0)} → ${mib(r.full.heapUsedBytes).toFixed(0)} MiB (${r.heapBytesPerQueuedTask.toFixed(0)} B a task); ` +
        `${r.refusedQueueFull} refused (queue full), RSS then ${mib(r.afterRefusals.rssBytes).toFixed(0)} MiB; after the clients left: ${r.afterCancel.queued} queued, RSS ${mib(r.afterCancel.rssBytes).toFixed(0)} MiB, heap ${mib(r.afterCancel.heapUsedBytes).toFixed(0)} MiB`,
    );
  }

  const of = (pick: (r: MemoryRun) => number) => spread(runs.map(pick));
  const maxQueued = Math.max(...runs.map((r) => r.maxQueued));
  const refusedShort = Math.min(...runs.map((r) => r.refusedQueueFull)) < settings.tasksBeyondLimit;
  const growthMiB = of((r) => mib(r.rssGrowthWhileRefusingBytes));
  return {
    ...run.header(),
    runs,
    rssBytesPerQueuedTask: of((r) => r.rssBytesPerQueuedTask),
    heapBytesPerQueuedTask: of((r) => r.heapBytesPerQueuedTask),
    rssAtFullMiB: of((r) => mib(r.full.rssBytes)),
    heapAtFullMiB: of((r) => mib(r.full.heapUsedBytes)),
    rssGrowthWhileRefusingMiB: growthMiB,
    goals: [
      { name: `most tasks the queue held (limit ${settings.maxQueuedTasks})`, target: `<= ${settings.maxQueuedTasks}`, measured: maxQueued, met: maxQueued <= settings.maxQueuedTasks },
      {
        name: `tasks beyond the limit answered HR_ERR_QUEUE_FULL (fewest of the runs, of ${settings.tasksBeyondLimit})`,
        target: `= ${settings.tasksBeyondLimit}`,
        measured: Math.min(...runs.map((r) => r.refusedQueueFull)),
        met: !refusedShort,
      },
      {
        // Refusing must not cost memory: allow the noise of an allocator and a GC cycle, about 1% of the full queue's RSS.
        name: 'RSS growth while refusing, MiB (median)',
        target: '<= 1% of RSS at full',
        measured: growthMiB.median,
        digits: 1,
        met: growthMiB.median <= 0.01 * of((r) => mib(r.full.rssBytes)).median,
      },
    ],
  };
}
