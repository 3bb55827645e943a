/**
 * What each fault case measured, written to one JSON file per run of the suite (the test files
 * of one `node --test` run share its process id as their parent), for docs/reliability.md.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { TaskLog, Submission } from './load';
import type { InvariantResult, Tally } from './invariant';

export interface CaseReport {
  /** The case's name, as in docs/reliability.md. */
  case: string;
  tasks: Tally;
  /** Named durations of the case (ms): how long service degraded, until a worker left the ledger, ... */
  measuredMs: Record<string, number>;
  /** Other figures of the case (counts, ratios). */
  figures?: Record<string, number | string | boolean>;
  highWaterMarks: InvariantResult['highWaterMarks'];
  /** From the end of the load until the ledger agreed with every live worker. */
  convergedMs: number;
  wallMs: number;
}

export interface RunReport {
  runnerPid: number;
  updatedAt: string;
  cases: Record<string, CaseReport & { at: string }>;
}

/** HEADROOM_FAULTS_REPORT, or <tmp>/headroom-faults/run-<pid of the test file's `node --test`>.json. */
export function reportPath(): string {
  return process.env.HEADROOM_FAULTS_REPORT ?? path.join(os.tmpdir(), 'headroom-faults', `run-${process.ppid}.json`);
}

/**
 * Adds the case to this run's file. Without HEADROOM_FAULTS_REPORT each test file has a file of
 * its own, so files that run at once do not write the same one; with it, run them one at a time.
 */
export function recordCase(report: CaseReport): string {
  const file = reportPath();
  fs.mkdirSync(path.dirname(file), { recursive: true });
  let run: RunReport = { runnerPid: process.ppid, updatedAt: '', cases: {} };
  if (fs.existsSync(file)) run = JSON.parse(fs.readFileSync(file, 'utf8')) as RunReport;
  const at = new Date().toISOString();
  run.updatedAt = at;
  run.cases[report.case] = { ...report, at };
  fs.writeFileSync(file, `${JSON.stringify(run, null, 2)}\n`);
  return file;
}

/** Latency of an answered submission. */
export function latencyMs(s: Submission): number {
  return (s.answeredAtMs ?? Number.NaN) - s.submittedAtMs;
}

export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return Number.NaN;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

/**
 * How long service degraded after a fault, as the clients saw it: from `faultAtMs` to the last
 * answer after it that was not healthy (not a result, or slower than `healthyLatencyMs`). 0 when
 * every answer after the fault was healthy.
 */
export function degradedMs(
  log: TaskLog,
  faultAtMs: number,
  healthyLatencyMs: number,
  isHealthy: (s: Submission) => boolean = (s) => s.answer?.ok === true && !s.answer.response.error,
): number {
  let lastUnhealthyAtMs = faultAtMs;
  for (const s of log.answeredBetween(faultAtMs)) {
    if (!isHealthy(s) || latencyMs(s) > healthyLatencyMs) lastUnhealthyAtMs = Math.max(lastUnhealthyAtMs, s.answeredAtMs!);
  }
  return Math.round(lastUnhealthyAtMs - faultAtMs);
}
