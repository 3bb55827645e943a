/**
 * memory: a balancer holding 100,000 queued tasks. One balancer (--max-queued-tasks 100000) and
 * one worker at max parallelism 1, each its own process; a load generator in another sends
 * 100,001 tasks that each sleep longer than the run: the first takes the only slot, the others
 * wait in the balancer's queue. A second generator then sends 10,000 more, which find the queue
 * full. The balancer's /metrics (queue depth, RSS, heap) is read all along, and after a full GC
 * (a preloaded hook, fleet/gc-on-signal.ts) when empty, full, after the refusals, and after the
 * first generator went away, which cancels every waiting call.
 */
import * as path from 'node:path';
import { performance } from 'node:perf_hooks';
import { balancerErrorCodes } from '@headroom/balancer';
import { sleep } from '@headroom/common';
import { Cleanups } from './fleet/cleanups';
import { benchPlace, startProcessFleet } from './fleet/headroom-fleet';
import { getText } from './fleet/http-get';
import { parsePrometheusText } from './fleet/runtime-metrics';
import { gcSignal } from './fleet/gc-totals';
import { LoadGenerator } from './load/generator';
import type { OpenLoopSpec } from './load/protocol';
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
  /**
   * Queue depths at which the balancer's memory is noted, besides empty and full: each step
   * between two gives one figure of bytes per queued task, so a run repeats the measurement.
   */
  depthMarks: readonly number[];
  metricsIntervalMs: number;
  /** After the queue emptied, before the last reading. */
  settleMs: number;
  /** Longest a run may take to fill the queue. */
  fillTimeoutMs: number;
  repetitions: number;
}

export const fullSettings: MemorySettings = {
  maxQueuedTasks: 100_000,
  tasksBeyondLimit: 10_000,
  // About what one balancer takes in on this machine when others' work shares it: faster only piles calls up in the generator.
  sendTasksPerSecond: 2_500,
  taskSleepMs: 600_000,
  callTimeoutMs: 600_000,
  depthMarks: [20_000, 40_000, 60_000, 80_000],
  metricsIntervalMs: 250,
  settleMs: 3_000,
  fillTimeoutMs: 150_000,
  // Filling 100,000 takes most of a minute: one run, whose five steps of 20,000 give five figures of bytes per task.
  repetitions: 1,
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
  // empty, full, afterRefusals and afterCancel are read just after a full GC in the balancer: heap = what it retains.
  /** (full - empty) / tasks queued. */
  rssBytesPerQueuedTask: number;
  heapBytesPerQueuedTask: number;
  /** The same between each two marks: empty, the depth marks, full. */
  steps: { fromQueued: number; toQueued: number; rssBytesPerQueuedTask: number; heapBytesPerQueuedTask: number }[];
  /** afterRefusals - full: what the refused tasks left behind. */
  rssGrowthWhileRefusingBytes: number;
  heapGrowthWhileRefusingBytes: number;
  refusedQueueFull: number;
  /** How the generator saw the tasks beyond the limit answered, by code. */
  refusedByCode: Record<string, number>;
  /** The most the queue held by the balancer's own gauge. */
  maxQueued: number;
  fillSeconds: number;
  /** Every sample, in order. */
  samples: MemorySample[];
}

export interface MemoryResult extends RunHeader<'memory', MemorySettings> {
  runs: MemoryRun[];
  /** Over the runs: empty to full. */
  rssBytesPerQueuedTask: Spread;
  heapBytesPerQueuedTask: Spread;
  /** Over every step of every run. */
  rssBytesPerQueuedTaskByStep: Spread;
  heapBytesPerQueuedTaskByStep: Spread;
  rssAtFullMiB: Spread;
  heapAtFullMiB: Spread;
  rssGrowthWhileRefusingMiB: Spread;
  /** Heap (after a full GC) one refused task left behind, over what one queued task holds. */
  heapRetainedPerRefusedOverQueued: Spread;
  /** Heap (after a full GC) above the empty balancer's once the clients left, over the full queue's. */
  heapLeftAfterCancelShare: Spread;
  goals: Goal[];
}

export type MemoryOptions = BenchmarkOptions;

const mib = (bytes: number) => bytes / 1024 / 1024;
const queueFullCode = balancerErrorCodes.queueFull;
const gcOnSignal = path.join(__dirname, 'fleet', 'gc-on-signal.js');

/** Tries to read /metrics this many times: a balancer taking in thousands of tasks a second on a busy machine answers late, or lets a connection time out. */
const metricsAttempts = 3;

async function readBalancer(metricsUrl: string, startedAt: number, signal: AbortSignal): Promise<MemorySample> {
  let text: string | undefined;
  for (let attempt = 1; text === undefined; attempt++) {
    try {
      text = await getText(metricsUrl, 30_000, signal);
    } catch (error) {
      if (attempt >= metricsAttempts || signal.aborted) throw error;
    }
  }
  const samples = parsePrometheusText(text);
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
          // A full GC on demand (SIGUSR2), so that heap figures are what the balancer retains.
          balancerNodeFlags: ['--expose-gc', '--require', gcOnSignal],
          logDir,
        },
        cleanups.register,
      );
      const balancerPid = fleet.pids.get('balancer')!;
      const metricsUrl = fleet.balancers[0]!.metricsUrl;
      if (!metricsUrl) throw new Error(`the balancer did not say where it serves /metrics (logs in ${logDir})`);
      // One generator fills the queue (its calls wait), the other then sends the tasks beyond the limit.
      const startGenerator = async () => {
        const generator = await LoadGenerator.start({
          balancerAddresses: fleet.balancers.map((b) => b.address),
          workers: [],
          task: { integration: 'bank-a', payload: JSON.stringify({ sleepMs: settings.taskSleepMs }) },
          callTimeoutMs: settings.callTimeoutMs,
        });
        cleanups.register(() => generator.close());
        return generator;
      };
      const filler = await startGenerator();
      const beyond = await startGenerator();
      const startedAt = performance.now();
      const samples: MemorySample[] = [];
      const read = async () => {
        const sample = await readBalancer(metricsUrl, startedAt, signal);
        samples.push(sample);
        return sample;
      };
      /** Reads the balancer after a full GC: what it retains. */
      const readCollected = async () => {
        process.kill(balancerPid, gcSignal);
        await sleep(settings.metricsIntervalMs, signal);
        return read();
      };
      /** Reads until `done` holds; bounded by fillTimeoutMs from the start. */
      const readUntil = async (what: string, done: (sample: MemorySample) => boolean) => {
        while (!done(samples[samples.length - 1]!)) {
          if (performance.now() - startedAt > settings.fillTimeoutMs)
            throw new Error(`${what} not within ${settings.fillTimeoutMs} ms: ${JSON.stringify(samples[samples.length - 1])}`);
          await sleep(settings.metricsIntervalMs, signal);
          await read();
        }
      };
      const openLoop = (tasks: number): OpenLoopSpec => ({
        kind: 'open',
        target: 'balancer',
        tasksPerSecond: settings.sendTasksPerSecond,
        warmupMs: 0,
        durationMs: (tasks / settings.sendTasksPerSecond) * 1000,
        maxOutstanding: tasks,
      });

      const empty = await readCollected();
      // One task takes the only slot, the others wait. Their calls wait until the filler is
      // closed below (the phase then fails, as expected): no limit on the phase before that.
      const filling = filler.run(openLoop(settings.maxQueuedTasks + 1), signal, undefined, settings.fillTimeoutMs + 60_000);
      filling.catch(() => undefined);
      await readUntil('the queue filled', (s) => s.queued >= settings.maxQueuedTasks);
      const full = await readCollected();
      const marks = [...settings.depthMarks, settings.maxQueuedTasks]
        .map((mark) => samples.find((s) => s.queued >= mark))
        .filter((s): s is MemorySample => s !== undefined);

      // The queue is full: every task beyond it must be answered at once, with an error.
      const refusing = await beyond.run(openLoop(settings.tasksBeyondLimit), signal);
      await readUntil('the refusals counted', (s) => s.refusedQueueFull >= settings.tasksBeyondLimit);
      const afterRefusals = await readCollected();

      // The clients go away: every waiting call is cancelled, and the queue must empty.
      await filler.close();
      await readUntil('the queue emptied', (s) => s.queued === 0);
      await sleep(settings.settleMs, signal);
      const afterCancel = await readCollected();
      return {
        repetition,
        empty,
        marks,
        full,
        afterRefusals,
        afterCancel,
        rssBytesPerQueuedTask: (full.rssBytes - empty.rssBytes) / full.queued,
        heapBytesPerQueuedTask: (full.heapUsedBytes - empty.heapUsedBytes) / full.queued,
        steps: marks.map((to, i) => {
          const from = i === 0 ? empty : marks[i - 1]!;
          const tasks = to.queued - from.queued;
          return {
            fromQueued: from.queued,
            toQueued: to.queued,
            rssBytesPerQueuedTask: (to.rssBytes - from.rssBytes) / tasks,
            heapBytesPerQueuedTask: (to.heapUsedBytes - from.heapUsedBytes) / tasks,
          };
        }),
        rssGrowthWhileRefusingBytes: afterRefusals.rssBytes - full.rssBytes,
        heapGrowthWhileRefusingBytes: afterRefusals.heapUsedBytes - full.heapUsedBytes,
        refusedQueueFull: afterRefusals.refusedQueueFull,
        refusedByCode: refusing.errorsByCode,
        maxQueued: Math.max(...samples.map((s) => s.queued)),
        fillSeconds: full.atMs / 1000,
        samples,
      };
    } finally {
      await cleanups.runAll();
    }
  };

  progress(
    `${settings.repetitions} run${settings.repetitions === 1 ? '' : 's'}: ${settings.maxQueuedTasks} tasks queued at one balancer, ${settings.tasksBeyondLimit} more sent beyond its limit, ${settings.sendTasksPerSecond} tasks/s`,
  );
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
  const fewestQueueFull = Math.min(...runs.map((r) => r.refusedByCode[queueFullCode] ?? 0));
  // Retained (heap after a full GC) per refused task, as a share of what a queued task retains.
  const refusedOverQueued = of((r) => r.heapGrowthWhileRefusingBytes / settings.tasksBeyondLimit / r.heapBytesPerQueuedTask);
  // Heap retained once the clients left, above the empty balancer's, as a share of what the full queue retained.
  const leftAfterCancel = of((r) => (r.afterCancel.heapUsedBytes - r.empty.heapUsedBytes) / (r.full.heapUsedBytes - r.empty.heapUsedBytes));
  return {
    ...run.header(),
    runs,
    rssBytesPerQueuedTask: of((r) => r.rssBytesPerQueuedTask),
    heapBytesPerQueuedTask: of((r) => r.heapBytesPerQueuedTask),
    rssBytesPerQueuedTaskByStep: spread(runs.flatMap((r) => r.steps.map((step) => step.rssBytesPerQueuedTask))),
    heapBytesPerQueuedTaskByStep: spread(runs.flatMap((r) => r.steps.map((step) => step.heapBytesPerQueuedTask))),
    rssAtFullMiB: of((r) => mib(r.full.rssBytes)),
    heapAtFullMiB: of((r) => mib(r.full.heapUsedBytes)),
    rssGrowthWhileRefusingMiB: of((r) => mib(r.rssGrowthWhileRefusingBytes)),
    heapRetainedPerRefusedOverQueued: refusedOverQueued,
    heapLeftAfterCancelShare: leftAfterCancel,
    goals: [
      {
        name: `balancer heap retained per queued task, bytes (after a full GC, empty to ${settings.maxQueuedTasks.toLocaleString('en-US')} queued)`,
        target: 'state it (no target)',
        measured: of((r) => r.heapBytesPerQueuedTask).median,
        met: 'stated',
      },
      { name: 'balancer RSS per queued task, bytes', target: 'state it (no target)', measured: of((r) => r.rssBytesPerQueuedTask).median, met: 'stated' },
      {
        name: `most tasks the queue held (limit ${settings.maxQueuedTasks})`,
        target: `<= ${settings.maxQueuedTasks}`,
        measured: maxQueued,
        met: maxQueued <= settings.maxQueuedTasks,
      },
      {
        name: `tasks beyond the limit answered ${queueFullCode}, as the client saw them (of ${settings.tasksBeyondLimit})`,
        target: `= ${settings.tasksBeyondLimit}`,
        measured: fewestQueueFull,
        met: fewestQueueFull === settings.tasksBeyondLimit,
      },
      {
        name: 'heap a refused task leaves behind, as a share of what a queued task holds (after a full GC)',
        target: '<= 1%',
        measured: refusedOverQueued.median * 100,
        digits: 2,
        met: refusedOverQueued.median <= 0.01,
      },
      {
        name: 'heap still held once the clients left, as a share of what the full queue held (after a full GC)',
        target: '<= 5%',
        measured: leftAfterCancel.median * 100,
        digits: 1,
        met: leftAfterCancel.median <= 0.05,
      },
    ],
  };
}
