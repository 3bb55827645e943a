/**
 * The soak: the whole system under a steady load for minutes to hours, with the faults of
 * production coming back in turn (a worker killed and started again, a rollback and its resume,
 * a Redis restart, an Unleash restart), sampling what grows when something leaks: every
 * process's heap, RSS, handles and event-loop delay, the ledger's keys and Redis's memory, and
 * task latency. A series that keeps growing (a least-squares slope after the first 5 minutes, per
 * hour) fails the run, and so does a latency p99 in the last 5 minutes above 1.2x the first's; the
 * latency summaries' keys, which fill up to a known bound over their retention, fail it when they
 * pass that bound. A process's heap is judged by two heap snapshots, after the first 5 minutes and
 * at the end, which tell the program's data from V8's metadata (heap-snapshot.ts); its sampled heap
 * series when it has no two (started again too late).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TestContext } from 'node:test';
import { performance } from 'node:perf_hooks';
import { startBankSimulator, bankUrlEnv } from './bank';
import { finishCase, sleep } from './case';
import { snapshotNodeOptions, takeHeapSnapshot, type HeapSummary } from './heap-snapshot';
import { startControlPlaneProcess, uniqueFlags } from './control-plane';
import { TaskLog, startClosedLoad } from './load';
import { parseMetrics, scrapeMetrics, type MetricsText } from './metrics';
import { latencyMs, percentile } from './report';
import { keyPrefix, startStack, startWorkerProcess, type WorkerSpec } from './stack';
import { latencyDefaults } from '@headroom/fleet';
import type { UnleashProcess } from './unleash/process';
import { FleetWatch } from './watch';
import { ControlPlaneApi, task } from '@headroom/testkit';
import type { SoakHeapSnapshots, SoakReport, SoakSeries } from '@headroom/bench';

export type { SoakHeapSnapshots, SoakReport, SoakSeries };

export interface SoakOptions {
  minutes: number;
  sampleEveryMs: number;
  /** Started by the caller (it takes seconds); the soak stops and starts it again. */
  unleash: UnleashProcess;
  progress?: (line: string) => void;
}

const baselineSpecs: WorkerSpec[] = ['w0', 'w1', 'w2'].map((workerId) => ({ workerId, cluster: 'baseline', maxParallelism: 4, handlers: 'bank' }));
const candidateSpecs: WorkerSpec[] = ['c0', 'c1'].map((workerId) => ({ workerId, cluster: 'candidate', maxParallelism: 4, handlers: 'bank' }));
/**
 * Slopes are fitted after the first 5 minutes (of the run, and of a process started again): those
 * are warm-up (code compiled, connections opened, V8's heap grown to its working size, caches
 * filled).
 */
const warmUpMs = 5 * 60_000;
/** Heap and RSS rise and fall with each GC: the lowest of each run of this many samples is fitted (what survives a collection). */
const samplesPerLow = 4;
/**
 * What survives a full collection rises and falls too, over minutes: V8 keeps code and weakly
 * held objects through several collections and lets them go at a later, memory-reducing one
 * (measured: a balancer's figure climbs 3-4 MiB over 3 minutes, then falls back to where it
 * was). Its floor over each window of this length is fitted: a leak raises the floor.
 */
const heapFloorWindowMs = 5 * 60_000;
/** The latency summaries: one key per slot, kept for a retention (fleet/src/latency.ts); they fill up to that bound, then stay. */
const latencyKeysBound = Math.ceil(latencyDefaults.retentionMs / latencyDefaults.slotMs) + 10;
/**
 * Growth per hour that fails a series, by what it measures: relative to its mean, and at least
 * this much. The heap after a full collection and Redis's memory besides the latency summaries
 * are the soak's goals (≤ 1 MiB/h, flat); the others catch a gross leak.
 *
 * The heap after a full collection is judged without V8's code and bytecode (`heap-objects-after-gc`):
 * that part rises for an hour or more as V8 compiles code paths the first time they run (each
 * kind of fault has its own) and churns as it flushes bytecode and compiles it again, bounded by
 * the program's size, while a leak of ours is in the objects. Heap snapshots of workers and
 * balancers 7.5 minutes apart in the soak: the workers' growth was V8's code (0.7-1.0 MB) and
 * about 80 KB of V8's bookkeeping of optimised code (maps' dependent-code lists, which V8's code
 * statistics do not count, so they stay in the objects), nothing of ours; a balancer's had 246
 * more finished waiters of ours, a leak since fixed (balancer/src/wait-queue.ts). The whole
 * figure and the code are reported beside it.
 */
const growthLimits: Record<string, { relative: number; absolute: number }> = {
  'heap-objects-after-gc': { relative: 0, absolute: 2 ** 20 },
  rss: { relative: 0.5, absolute: 40 * 2 ** 20 },
  handles: { relative: 0.5, absolute: 20 },
  'keys-besides-latency': { relative: 0.5, absolute: 50 },
  'memory-besides-latency': { relative: 0, absolute: 2 ** 20 },
};
/**
 * The heap after a full collection is a figure of the last one: a process that allocates little
 * (the control plane) makes one full collection in ten minutes or more, and its series is then a
 * step or two, which a slope cannot tell from a leak. With fewer collections than this after its
 * warm-up, a process's heap used is judged instead (through its lows, with the same limit): it
 * also rises with the garbage promoted between full collections, so it may over-state a leak,
 * never hide one.
 */
const minFullCollectionsToFit = 4;
/** Task latency p99 of the last 5 minutes against the first 5: at most this ratio. */
const maxP99Ratio = 1.2;

/**
 * A process's heap is judged by its heap snapshots when it has two (after the warm-up, and at the
 * end: heap-snapshot.ts): the program's data in them may grow at most this much per hour, the
 * soak's goal for the heap. Its fitted series are reported, with a note.
 */
export function judgeBySnapshots(series: SoakSeries[], snapshots: SoakHeapSnapshots[], judged: boolean): void {
  const limit = growthLimits['heap-objects-after-gc']!.absolute;
  for (const pair of snapshots) {
    pair.grows = judged && pair.programSlopePerHour > limit;
    const note = `judged by its heap snapshots: the program's data ${pair.programSlopePerHour >= 0 ? '+' : ''}${(pair.programSlopePerHour / 2 ** 20).toFixed(2)} MiB/h, V8's metadata ${pair.v8SlopePerHour >= 0 ? '+' : ''}${(pair.v8SlopePerHour / 2 ** 20).toFixed(2)} MiB/h`;
    for (const s of series.filter((s) => s.name === `${pair.process}/heap` || s.name === `${pair.process}/heap-objects-after-gc`)) {
      s.grows = false;
      s.note = note;
    }
  }
}

/** Samples by series name (`<process>/<metric>` or `redis/<metric>`), as the soak takes them. */
export type SoakSamples = Map<string, { unit: string; points: { atMs: number; value: number }[] }>;

/**
 * Fits every series after its warm-up and says which grow without bound (see growthLimits,
 * heapFloorWindowMs and minFullCollectionsToFit for how each kind is fitted and judged).
 */
export function judgeSeries(
  samples: SoakSamples,
  timing: { loadStartedAtMs: number; redisRestartedAtMs: number; sampleEveryMs: number; judged: boolean },
): SoakSeries[] {
  const fittedFromMs = timing.loadStartedAtMs + warmUpMs;
  const series: SoakSeries[] = [...samples].map(([name, { unit, points }]) => {
    const metric = name.split('/')[1]!;
    // A process started again warms up again; Redis restarted empty refills its keys for a minute.
    // (A process's series start at its first sample: the heap after GC at its first full collection, later.)
    const processStartedAtMs = samples.get(`${name.split('/')[0]}/heap`)?.points[0]?.atMs ?? points[0]?.atMs ?? 0;
    const fromMs = name.startsWith('redis/')
      ? Math.max(fittedFromMs, timing.redisRestartedAtMs + 60_000)
      : Math.max(fittedFromMs, processStartedAtMs + warmUpMs);
    let fitted = points.filter((p) => p.atMs >= fromMs);
    const perLow =
      metric === 'heap' || metric === 'rss'
        ? samplesPerLow
        : metric.endsWith('-after-gc')
          ? Math.max(1, Math.round(heapFloorWindowMs / timing.sampleEveryMs))
          : 1;
    if (perLow > 1) {
      const lows: typeof fitted = [];
      for (let i = 0; i + perLow <= fitted.length; i += perLow) {
        const run = fitted.slice(i, i + perLow);
        lows.push(run.reduce((low, p) => (p.value < low.value ? p : low)));
      }
      fitted = lows;
    }
    const mean = fitted.length > 0 ? fitted.reduce((a, p) => a + p.value, 0) / fitted.length : 0;
    const slope = slopePerHour(fitted);
    const limit = growthLimits[metric];
    const grows =
      timing.judged &&
      (metric === 'latency-keys'
        ? points.some((p) => p.value > latencyKeysBound)
        : limit !== undefined && fitted.length >= 4 && slope > Math.max(limit.absolute, limit.relative * mean));
    const values = points.map((p): [number, number] => [Math.round((p.atMs - timing.loadStartedAtMs) / 1000), p.value]);
    if (metric === 'heap-objects-after-gc') {
      // Each full collection sets the figure anew; two giving the same figure to the byte are rare
      // enough that distinct values count them (an undercount only sends the process to the fallback).
      const fullCollections = new Set(points.filter((p) => p.atMs >= fromMs).map((p) => p.value)).size;
      if (fullCollections < minFullCollectionsToFit) {
        return {
          name,
          unit,
          sampled: points.length,
          points: fitted.length,
          mean,
          slopePerHour: slope,
          grows: false,
          values,
          note: `${fullCollections} full collections after the warm-up: judged on heap used`,
        };
      }
    }
    // A process started again late in the run has too little left after its warm-up to fit.
    if (limit !== undefined && fitted.length < 4 && points.length > 0) {
      return {
        name,
        unit,
        sampled: points.length,
        points: fitted.length,
        mean,
        slopePerHour: slope,
        grows: false,
        values,
        note: `not judged: ${fitted.length} points fitted after the warm-up (4 needed)`,
      };
    }
    return { name, unit, sampled: points.length, points: fitted.length, mean, slopePerHour: slope, grows, values };
  });
  const objectsLimit = growthLimits['heap-objects-after-gc']!.absolute;
  for (const heap of series.filter((s) => s.name.endsWith('/heap'))) {
    const objects = series.find((s) => s.name === `${heap.name}-objects-after-gc`);
    if (objects && !objects.note?.endsWith('judged on heap used')) continue;
    heap.grows = timing.judged && heap.points >= 4 && heap.slopePerHour > objectsLimit;
    heap.note = `judged for its heap after GC (${objects ? objects.note!.split(':')[0] : 'no full collection read'})`;
  }
  return series;
}

/** Least-squares slope of value over time, per hour. */
export function slopePerHour(points: readonly { atMs: number; value: number }[]): number {
  const n = points.length;
  if (n < 2) return 0;
  const meanT = points.reduce((a, p) => a + p.atMs, 0) / n;
  const meanV = points.reduce((a, p) => a + p.value, 0) / n;
  let num = 0;
  let den = 0;
  for (const p of points) {
    num += (p.atMs - meanT) * (p.value - meanV);
    den += (p.atMs - meanT) ** 2;
  }
  return den === 0 ? 0 : (num / den) * 3_600_000;
}

export async function runSoak(t: TestContext, options: SoakOptions): Promise<SoakReport> {
  const say = options.progress ?? (() => undefined);
  const startedAtMs = performance.now();
  const durationMs = options.minutes * 60_000;
  // Every process this soak starts can be made to write a heap snapshot (heap-snapshot.ts).
  const snapshotDir = fs.mkdtempSync(path.join(os.tmpdir(), 'headroom-soak-heap-'));
  const nodeOptionsBefore = process.env.NODE_OPTIONS;
  process.env.NODE_OPTIONS = [nodeOptionsBefore, snapshotNodeOptions(snapshotDir)].filter(Boolean).join(' ');
  t.after(() => {
    if (nodeOptionsBefore === undefined) delete process.env.NODE_OPTIONS;
    else process.env.NODE_OPTIONS = nodeOptionsBefore;
    fs.rmSync(snapshotDir, { recursive: true, force: true });
  });
  const bank = await startBankSimulator(t);
  process.env[bankUrlEnv] = bank.url;
  const flags = uniqueFlags(options.unleash);
  const stack = await startStack(t, { workers: [...baselineSpecs, ...candidateSpecs], balancerCount: 2, flags });
  const control = await startControlPlaneProcess(t, stack.redisUrl, options.unleash.adminToken, flags, ['bank-a', 'bank-b']);
  await control.api.setTraffic({ integrations: { 'bank-a': 50, 'bank-b': 50 } });

  const slots = [...baselineSpecs, ...candidateSpecs].reduce((sum, spec) => sum + spec.maxParallelism, 0);
  // 70% of the slots kept busy: each lane sends its next task when the last is answered.
  const lanes = Math.round(0.7 * slots);
  const log = new TaskLog();
  const watch = new FleetWatch(stack).start();
  const loadStartedAtMs = performance.now();
  const load = startClosedLoad(t, log, {
    lanes,
    maxTasks: Math.ceil(options.minutes * 60 * 400),
    maxDurationMs: durationMs + 60_000,
    balancerFor: (lane) => stack.balancers[lane % 2]!,
    // The account and one page of transactions, one task in eight with a user waiting.
    taskFor: (_lane, seq) =>
      task({
        integration: seq % 2 === 0 ? 'bank-a' : 'bank-b',
        priority: seq % 8 === 0 ? 'USER_PRESENT' : 'BACKGROUND',
        payload: Buffer.from(JSON.stringify({ maxPages: 1 })),
        deadlineUnixMs: Date.now() + 30_000,
      }),
  });

  const faults: SoakReport['faults'] = [];
  const at = () => Math.round((performance.now() - loadStartedAtMs) / 1000);
  let redisRestartedAtMs = 0;
  const faultsInTurn: [string, () => Promise<void>][] = [
    [
      'kill -9 a worker, start it again 2 s later',
      async () => {
        const victim = stack.liveWorkers('baseline')[faults.length % 3]!;
        await stack.stop(victim, 'SIGKILL');
        await sleep(2000);
        stack.workers.push(
          await startWorkerProcess(
            t,
            stack.redisUrl,
            baselineSpecs.find((s) => s.workerId === victim.id)!,
            flags,
          ),
        );
      },
    ],
    [
      'roll bank-a back, resume it 3 s later',
      async () => {
        await control.api.rollback({ integration: 'bank-a', reason: 'soak' });
        await sleep(3000);
        await control.api.resume({ integration: 'bank-a', reason: 'soak' });
      },
    ],
    [
      'restart Redis (empty: no persistence)',
      async () => {
        await stack.restartRedis(300);
        redisRestartedAtMs = performance.now();
      },
    ],
    [
      'restart Unleash',
      async () => {
        await options.unleash.stop();
        await sleep(2000);
        await options.unleash.start();
      },
    ],
  ];
  const cycleMs = Math.min(durationMs / (faultsInTurn.length + 1), 5 * 60_000);

  const samples: SoakSamples = new Map();
  const record = (name: string, unit: string, value: number) => {
    let series = samples.get(name);
    if (!series) samples.set(name, (series = { unit, points: [] }));
    series.points.push({ atMs: performance.now(), value });
  };
  const sampleProcess = (name: string, metrics: MetricsText) => {
    record(`${name}/heap`, 'bytes', metrics.value('nodejs_heap_size_used_bytes'));
    // 0 until the process's first full collection.
    const afterGc = metrics.value('headroom_heap_after_major_gc_bytes');
    if (afterGc > 0) record(`${name}/heap-after-gc`, 'bytes', afterGc);
    const code = metrics.value('headroom_heap_code_after_major_gc_bytes');
    if (code > 0) {
      record(`${name}/heap-code-after-gc`, 'bytes', code);
      record(`${name}/heap-objects-after-gc`, 'bytes', metrics.value('headroom_heap_objects_after_major_gc_bytes'));
    }
    record(`${name}/rss`, 'bytes', metrics.value('process_resident_memory_bytes'));
    record(`${name}/handles`, 'handles', metrics.value('nodejs_active_handles_total'));
    record(`${name}/eventloop-p99`, 'seconds', metrics.value('nodejs_eventloop_lag_p99_seconds'));
  };
  const controlMetrics = new ControlPlaneApi({ apiUrl: control.api.apiUrl, token: null, timeoutMs: 2500 });
  const sample = async () => {
    const processes = [...stack.liveWorkers(), ...stack.liveBalancers()];
    await Promise.all(
      processes.map(async (p) => {
        try {
          sampleProcess(`${p.kind}:${p.id}:${p.process.child.pid}`, await scrapeMetrics(p.metricsPort));
        } catch {
          // A process being killed or restarted misses a sample.
        }
      }),
    );
    try {
      sampleProcess(`control-plane:${control.process.child.pid}`, parseMetrics(await controlMetrics.metrics()));
    } catch {
      // Missed once.
    }
    try {
      const all = await stack.ledgerRedis.dbsize();
      const latencyKeys = await stack.ledgerRedis.keys(`{${keyPrefix}:latency}:*`);
      record('redis/keys-besides-latency', 'keys', all - latencyKeys.length);
      record('redis/latency-keys', 'keys', latencyKeys.length);
      const memory = /used_memory:(\d+)/.exec(await stack.ledgerRedis.info('memory'));
      // The latency summaries grow up to their bound (checked by their key count); the rest is
      // what must stay flat.
      let latencyBytes = 0;
      for (const key of latencyKeys) latencyBytes += Number((await stack.ledgerRedis.memory('USAGE', key)) ?? 0);
      if (memory) {
        record('redis/memory', 'bytes', Number(memory[1]));
        record('redis/memory-besides-latency', 'bytes', Number(memory[1]) - latencyBytes);
      }
    } catch {
      // Redis restarting.
    }
  };

  // Heap snapshots of every process after the warm-up (before the fault due then; a process started
  // again, after its own) and at the end. None falls in the latency windows compared (the first
  // and the last), since writing one stops a process for a second or so.
  const warmUpOfRunMs = Math.min(warmUpMs, durationMs / 2);
  const lastWindowStartsAtMs = loadStartedAtMs + durationMs - warmUpOfRunMs;
  const liveProcesses = () => [
    ...[...stack.liveWorkers(), ...stack.liveBalancers()].map((p) => ({ name: `${p.kind}:${p.id}:${p.process.child.pid}`, pid: p.process.child.pid! })),
    { name: `control-plane:${control.process.child.pid}`, pid: control.process.child.pid! },
  ];
  const firstSeenAtMs = new Map(liveProcesses().map((p) => [p.name, loadStartedAtMs]));
  const firstSnapshots = new Map<string, HeapSummary & { atMs: number }>();
  const snapshotTried = new Set<string>();
  const snapshot = async (p: { name: string; pid: number }, into: Map<string, HeapSummary & { atMs: number }>) => {
    snapshotTried.add(p.name);
    try {
      into.set(p.name, await takeHeapSnapshot(p.pid, snapshotDir));
    } catch (error) {
      say(`soak: no heap snapshot of ${p.name}: ${error instanceof Error ? error.message : String(error)}`);
    }
  };
  const takeDueSnapshots = async () => {
    const now = performance.now();
    for (const p of liveProcesses()) if (!firstSeenAtMs.has(p.name)) firstSeenAtMs.set(p.name, now);
    if (now < loadStartedAtMs + warmUpOfRunMs) return;
    const due = liveProcesses().filter((p) => {
      if (snapshotTried.has(p.name)) return false;
      const seenAtMs = firstSeenAtMs.get(p.name)!;
      return seenAtMs <= loadStartedAtMs || (seenAtMs + warmUpOfRunMs <= now && now < lastWindowStartsAtMs);
    });
    for (const p of due) await snapshot(p, firstSnapshots);
    if (due.length > 0) {
      say(`soak ${at()} s: heap snapshots of ${due.map((p) => p.name).join(', ')}`);
      // The faults keep their schedule after the pause.
      nextFaultAtMs = Math.max(nextFaultAtMs, performance.now());
    }
  };

  let nextFaultAtMs = loadStartedAtMs + cycleMs;
  let nextSampleAtMs = loadStartedAtMs;
  // A loaded machine can push the last fault past the end (snapshots and recoveries take longer):
  // the run then goes on until every fault came once, at most one more duration.
  const everyFaultCame = () => faults.length >= faultsInTurn.length;
  while (performance.now() - loadStartedAtMs < durationMs || (!everyFaultCame() && performance.now() - loadStartedAtMs < 2 * durationMs)) {
    const now = performance.now();
    if (now - loadStartedAtMs >= durationMs) nextFaultAtMs = Math.min(nextFaultAtMs, now);
    if (now >= nextSampleAtMs) {
      nextSampleAtMs += options.sampleEveryMs;
      await sample();
    }
    await takeDueSnapshots();
    if (now >= nextFaultAtMs) {
      nextFaultAtMs += cycleMs;
      const [what, run] = faultsInTurn[faults.length % faultsInTurn.length]!;
      faults.push({ atSeconds: at(), what });
      say(`soak ${at()} s: ${what}`);
      await run();
    }
    await sleep(Math.max(0, Math.min(nextSampleAtMs, nextFaultAtMs) - performance.now()));
  }
  const endedAtMs = performance.now();
  // Under the same load as the first ones (a process between tasks holds less), after the last
  // latency window.
  const lastSnapshots = new Map<string, HeapSummary & { atMs: number }>();
  for (const p of liveProcesses().filter((p) => firstSnapshots.has(p.name))) await snapshot(p, lastSnapshots);
  await load.stop();
  const heapSnapshots: SoakHeapSnapshots[] = [...lastSnapshots].map(([name, last]) => {
    const first = firstSnapshots.get(name)!;
    const perHour = (from: number, to: number) => ((to - from) / (last.atMs - first.atMs)) * 3_600_000;
    return {
      process: name,
      atSeconds: [Math.round((first.atMs - loadStartedAtMs) / 1000), Math.round((last.atMs - loadStartedAtMs) / 1000)],
      programBytes: [first.program, last.program],
      v8Bytes: [first.v8, last.v8],
      programSlopePerHour: perHour(first.program, last.program),
      v8SlopePerHour: perHour(first.v8, last.v8),
      grows: false,
    };
  });
  const result = await finishCase(t, stack, log, watch, {
    name: `soak (${options.minutes} min)`,
    startedAtMs,
    convergeTimeoutMs: 15_000,
    measuredMs: { duration: Math.round(endedAtMs - loadStartedAtMs) },
    figures: { faults: faults.length },
  });

  const judged = options.minutes >= 10;
  const series = judgeSeries(samples, { loadStartedAtMs, redisRestartedAtMs, sampleEveryMs: options.sampleEveryMs, judged });
  judgeBySnapshots(series, heapSnapshots, judged);
  const latencyBetween = (fromMs: number, toMs: number) => {
    const answered = log.answeredBetween(fromMs, toMs).filter((s) => s.answer?.ok);
    const latencies = answered.map(latencyMs);
    return { p50: Math.round(percentile(latencies, 50)), p99: Math.round(percentile(latencies, 99)), answered: answered.length };
  };
  const quarterMs = (endedAtMs - loadStartedAtMs) / 4;
  const latencyByQuarter = [0, 1, 2, 3].map((q) => latencyBetween(loadStartedAtMs + q * quarterMs, loadStartedAtMs + (q + 1) * quarterMs));
  const edgeMs = Math.min(warmUpMs, (endedAtMs - loadStartedAtMs) / 2);
  const firstAndLast = { first: latencyBetween(loadStartedAtMs, loadStartedAtMs + edgeMs), last: latencyBetween(endedAtMs - edgeMs, endedAtMs) };
  const p99Ratio = firstAndLast.first.p99 > 0 ? firstAndLast.last.p99 / firstAndLast.first.p99 : 0;
  const grew = series.filter((s) => s.grows).map((s) => `${s.name}: +${Math.round(s.slopePerHour)} ${s.unit}/h (mean ${Math.round(s.mean)})`);
  for (const pair of heapSnapshots.filter((p) => p.grows))
    grew.push(`${pair.process}/heap snapshots: the program's data +${Math.round(pair.programSlopePerHour)} bytes/h`);
  if (judged && p99Ratio > maxP99Ratio)
    grew.push(`latency p99: ${firstAndLast.last.p99} ms in the last ${edgeMs / 60_000} min, ${p99Ratio.toFixed(2)}x the first (at most ${maxP99Ratio}x)`);
  return {
    minutes: options.minutes,
    sampleEveryMs: options.sampleEveryMs,
    lanes,
    slots,
    tasks: result.tally,
    faults,
    latencyByQuarter,
    latencyFirstAndLast: { minutes: edgeMs / 60_000, ...firstAndLast, p99Ratio },
    series,
    heapSnapshots,
    grew,
    judged,
  };
}
