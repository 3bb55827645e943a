/**
 * The frame every fault case shares: bounded waits that measure, and the end of a case (the
 * invariant, then the record of what was measured).
 */
import type { TestContext } from 'node:test';
import { performance } from 'node:perf_hooks';
import { eventually } from '@headroom/testkit';
import { assertInvariant, codedErrors, type InvariantOptions, type InvariantResult } from './invariant';
import { recordCase, type CaseReport } from './report';
import type { TaskLog } from './load';
import type { FaultStack } from './stack';
import type { FleetWatch } from './watch';

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Polls `check` (every 50 ms, for at most `timeoutMs`) until it holds; answers the ms since `sinceMs`. */
export async function msUntil(what: string, timeoutMs: number, check: () => Promise<boolean> | boolean, sinceMs = performance.now()): Promise<number> {
  await eventually(what, timeoutMs, async () => ((await check()) ? true : undefined));
  return Math.round(performance.now() - sinceMs);
}

export interface CaseEnd extends InvariantOptions {
  name: string;
  startedAtMs: number;
  measuredMs: Record<string, number>;
  figures?: CaseReport['figures'];
}

/** Checks the invariant (the load must have stopped), records the case and tells the test log. */
export async function finishCase(t: TestContext, stack: FaultStack, log: TaskLog, watch: FleetWatch, end: CaseEnd): Promise<InvariantResult> {
  const result = await assertInvariant(stack, log, watch, end);
  const report: CaseReport = {
    // The suite run again on a Redis Cluster (faults-on-cluster.test.ts) records its cases apart.
    case: process.env.HEADROOM_TEST_REDIS === 'cluster' ? `${end.name} [on Redis Cluster]` : end.name,
    tasks: result.tally,
    measuredMs: end.measuredMs,
    ...(end.figures ? { figures: end.figures } : {}),
    highWaterMarks: result.highWaterMarks,
    convergedMs: result.convergedMs,
    wallMs: Math.round(performance.now() - end.startedAtMs),
  };
  const file = recordCase(report);
  const { submitted, ok, lost, connectionErrors } = result.tally;
  t.diagnostic(
    `${end.name}: ${submitted} tasks, ${ok} ok, ${codedErrors(result.tally)} coded errors ${JSON.stringify({ ...result.tally.taskErrors, ...result.tally.refused })}, ${connectionErrors} connection errors, ${lost} lost`,
  );
  t.diagnostic(
    `measured ms ${JSON.stringify(end.measuredMs)}; ledger converged ${result.convergedMs} ms after the load; figures ${JSON.stringify(end.figures ?? {})}; written to ${file}`,
  );
  return result;
}
