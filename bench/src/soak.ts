/**
 * soak: the fault suite's soak (faults/src/soak.ts) for `minutes`, in a process of its
 * own (`node --test faults/dist/test/soak.test.js`, as the tests run it for 2 minutes), then its
 * report: every sampled series with its slope per hour, the faults, latency by quarter.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { startRun, type BenchmarkOptions, type RunHeader } from './report/run-header';

export interface SoakSeries {
  /** What was sampled: `<process>/<metric>`, or `redis/<metric>`; a process started again is a new series. */
  name: string;
  unit: string;
  /** Samples taken. */
  sampled: number;
  /** Points fitted (after the warm-up; for heap and RSS, the lowest of every few samples). */
  points: number;
  mean: number;
  /** Least-squares slope over the samples after the warm-up (the first 5 minutes of the run and of the process), per hour. */
  slopePerHour: number;
  /** Whether the slope counts as growth without bound (only judged on runs of 10 minutes or more). */
  grows: boolean;
  /** Why it was not judged as its kind is, when it was not (e.g. too few full collections to fit). */
  note?: string;
  /** Every sample: [seconds since the load started, value] (one every sampleEveryMs: 120 in 30 minutes). */
  values: [number, number][];
}

/** One process's two heap snapshots (faults/src/heap-snapshot.ts): after the warm-up, and at the end of the run, both under the load. */
export interface SoakHeapSnapshots {
  process: string;
  /** When each was taken, seconds after the load started. */
  atSeconds: [number, number];
  /** What JavaScript created (objects, closures, strings, arrays' elements, buffers), in each. */
  programBytes: [number, number];
  /** V8's metadata (code, feedback, scope infos, object shapes, internal structures), in each. */
  v8Bytes: [number, number];
  programSlopePerHour: number;
  v8SlopePerHour: number;
  /** The program's data grew more than 1 MiB/h (judged on runs of 10 minutes or more). */
  grows: boolean;
}

export interface SoakReport {
  minutes: number;
  sampleEveryMs: number;
  lanes: number;
  slots: number;
  /** Tasks sent, answered and lost, as the fault suite's invariant counts them. */
  tasks: { submitted: number; ok: number; connectionErrors: number; lost: number; taskErrors: Record<string, number>; refused: Record<string, number> };
  faults: { atSeconds: number; what: string }[];
  /** Task latency (client side, ms) in each quarter of the run. */
  latencyByQuarter: { p50: number; p99: number; answered: number }[];
  /** Task latency in the first and the last 5 minutes (a half each for shorter runs); their p99 ratio is judged (≤ 1.2). */
  latencyFirstAndLast: {
    minutes: number;
    first: { p50: number; p99: number; answered: number };
    last: { p50: number; p99: number; answered: number };
    p99Ratio: number;
  };
  series: SoakSeries[];
  /** Processes alive from the warm-up's end (the run's, or their own when started again) to the run's end: their heap is judged by these. */
  heapSnapshots: SoakHeapSnapshots[];
  /** Series that grew, and latency if its p99 rose; empty for a run that passes. */
  grew: string[];
  judged: boolean;
}

export interface SoakSettings {
  minutes: number;
}

export interface SoakResult extends RunHeader<'soak', SoakSettings> {
  soak: SoakReport;
}

const repoRoot = path.join(__dirname, '..', '..', '..');

export async function runSoakBenchmark(options: BenchmarkOptions & { minutes: number }): Promise<SoakResult> {
  const minutes = options.smoke ? 2 : options.minutes;
  const run = await startRun('soak', options, { minutes });
  const reportPath = path.join(fs.mkdtempSync(path.join(os.tmpdir(), 'headroom-soak-')), 'soak.json');
  const child = spawn(process.execPath, ['--test', '--test-reporter=tap', path.join(repoRoot, 'faults', 'dist', 'test', 'soak.test.js')], {
    cwd: repoRoot,
    env: { ...process.env, HEADROOM_SOAK_MINUTES: String(minutes), HEADROOM_SOAK_REPORT: reportPath },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const onAbort = () => child.kill('SIGTERM');
  options.signal.addEventListener('abort', onAbort, { once: true });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-20_000);
    for (const line of chunk.toString().split('\n')) if (/^# soak /.test(line)) options.progress(line.slice(2));
  });
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  options.signal.removeEventListener('abort', onAbort);
  if (!fs.existsSync(reportPath)) throw new Error(`the soak wrote no report (exit ${code}):\n${output}`);
  const soak = JSON.parse(fs.readFileSync(reportPath, 'utf8')) as SoakReport;
  if (code !== 0) options.progress(`the soak's checks failed (exit ${code}); the report says what grew or was lost`);
  return { ...run.header(), soak };
}
