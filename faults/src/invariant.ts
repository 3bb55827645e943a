/**
 * THE INVARIANT, checked after every fault:
 *  1. every submitted task got exactly one final answer: a result, or an error with a Headroom
 *     code (a connection error only from a balancer the case killed);
 *  2. no worker ran more tasks at once than its max parallelism (its own high-water mark), and
 *     some worker reached it (the load was enough to break the rule);
 *  3. after recovery the ledger agrees with the live workers: the same workers, and each one's
 *     free slots = its max parallelism - the tasks it runs by its own count; no lease is left
 *     over, the cluster totals add up and no balancer is still marked waiting;
 *  4. each live balancer counted one outcome per task it was sent.
 */
import * as assert from 'node:assert/strict';
import { performance } from 'node:perf_hooks';
import * as grpc from '@grpc/grpc-js';
import { clusterKeys, freeSlotsOfScore } from '@headroom/fleet';
import { eventually } from '@headroom/testkit';
import { scrapeMetrics } from './metrics';
import { readWorker, type FleetWatch } from './watch';
import { keyPrefix, type FaultStack } from './stack';
import type { Submission, TaskLog } from './load';

export interface Tally {
  submitted: number;
  ok: number;
  /** Answers whose handler failed with a code (the task ran), by code. */
  taskErrors: Record<string, number>;
  /** Tasks refused or failed by the balancer with a code, by code. */
  refused: Record<string, number>;
  /** Calls to a killed balancer that failed at the connection (UNAVAILABLE, no code). */
  connectionErrors: number;
  /** Submissions without exactly one final answer: must be 0. */
  lost: number;
}

export interface InvariantOptions {
  /** Balancers the case killed: their clients may get UNAVAILABLE without a code. */
  killedBalancerIds?: string[];
  convergeTimeoutMs?: number;
}

export interface InvariantResult {
  tally: Tally;
  /** From the start of the check until the ledger agreed with every live worker. */
  convergedMs: number;
  highWaterMarks: Record<string, { highWaterMark: number; maxParallelism: number }>;
}

/** What kind of final answer a submission got; undefined when it has none that counts. */
export function outcomeOf(
  s: Submission,
  killedBalancerIds: readonly string[] = [],
): { kind: 'ok' } | { kind: 'task-error' | 'refused'; code: string } | { kind: 'connection-error' } | undefined {
  if (s.answers !== 1 || !s.answer) return undefined;
  const answer = s.answer;
  if (answer.ok) {
    if (answer.response.taskId !== s.task.id) return undefined;
    return answer.response.error ? { kind: 'task-error', code: answer.response.error.code } : { kind: 'ok' };
  }
  if (answer.coded) return { kind: 'refused', code: answer.code };
  if (answer.status === grpc.status.UNAVAILABLE && killedBalancerIds.includes(s.balancerId)) return { kind: 'connection-error' };
  return undefined;
}

export function tally(log: TaskLog, killedBalancerIds: readonly string[] = []): Tally {
  const result: Tally = { submitted: log.submissions.length, ok: 0, taskErrors: {}, refused: {}, connectionErrors: 0, lost: 0 };
  for (const s of log.submissions) {
    const outcome = outcomeOf(s, killedBalancerIds);
    if (!outcome) result.lost++;
    else if (outcome.kind === 'ok') result.ok++;
    else if (outcome.kind === 'connection-error') result.connectionErrors++;
    else {
      const bucket = outcome.kind === 'task-error' ? result.taskErrors : result.refused;
      bucket[outcome.code] = (bucket[outcome.code] ?? 0) + 1;
    }
  }
  return result;
}

/** Total coded errors of a tally (task errors and refusals). */
export function codedErrors(t: Tally): number {
  return [...Object.values(t.taskErrors), ...Object.values(t.refused)].reduce((a, b) => a + b, 0);
}

function describe(s: Submission): string {
  const answer = s.answer;
  const what = !answer
    ? 'no answer'
    : answer.ok
      ? `answered for task ${answer.response.taskId}`
      : `${grpc.status[answer.status]} "${answer.details}" without a code`;
  return `task ${s.task.id} via ${s.balancerId}: ${what} (${s.answers} answers)`;
}

/** Part 1: exactly one final answer each. */
export function assertAllAnswered(log: TaskLog, killedBalancerIds: readonly string[] = []): Tally {
  const bad = log.submissions.filter((s) => !outcomeOf(s, killedBalancerIds));
  assert.deepEqual(bad.slice(0, 5).map(describe), [], `${bad.length} tasks without exactly one final answer`);
  return tally(log, killedBalancerIds);
}

/** Part 3: the ledger of every cluster agrees with the live workers' own figures. */
export async function ledgerDisagreement(stack: FaultStack): Promise<string | undefined> {
  for (const cluster of stack.clusters) {
    const live = stack.liveWorkers(cluster);
    const figures = new Map(await Promise.all(live.map(async (w) => [w.id, await readWorker(w)] as const)));
    const snapshot = await stack.ledger.snapshot(cluster);
    const freeScores = new Map<string, number>();
    const raw = await stack.ledgerRedis.zrange(clusterKeys(keyPrefix, cluster).free, 0, -1, 'WITHSCORES');
    for (let i = 0; i < raw.length; i += 2) freeScores.set(raw[i]!, freeSlotsOfScore(raw[i + 1]!));
    const problems: string[] = [];
    const ids = snapshot.workers.map((w) => w.workerId).join(',');
    const liveIds = live
      .map((w) => w.id)
      .sort()
      .join(',');
    if (ids !== liveIds) problems.push(`workers in the ledger [${ids}], live [${liveIds}]`);
    let capacity = 0;
    let free = 0;
    let inflight = 0;
    for (const record of snapshot.workers) {
      const own = figures.get(record.workerId);
      if (!own) continue;
      const expectedFree = own.maxParallelism - own.inflight;
      const score = freeScores.get(record.workerId);
      if (record.capacity !== own.maxParallelism || record.inflight !== own.inflight || score !== expectedFree || record.draining) {
        problems.push(
          `${record.workerId}: ledger capacity ${record.capacity} inflight ${record.inflight} free ${score} draining ${record.draining}; its own max ${own.maxParallelism} inflight ${own.inflight}`,
        );
      }
      capacity += own.maxParallelism;
      free += Math.max(0, expectedFree);
      inflight += own.inflight;
    }
    if (snapshot.totalCapacity !== capacity || snapshot.totalFree !== free)
      problems.push(`totals capacity ${snapshot.totalCapacity} free ${snapshot.totalFree}, expected ${capacity} and ${free}`);
    if (snapshot.leases !== inflight) problems.push(`${snapshot.leases} leases for ${inflight} tasks in flight`);
    // Per integration, a count without a running task behind it is a leak its limit would keep.
    const byIntegration = await stack.ledger.integrationLimits(cluster);
    const countedByIntegration = byIntegration.reduce((sum, state) => sum + state.inflight, 0);
    if (countedByIntegration > inflight || byIntegration.some((state) => state.inflight < 0))
      problems.push(`integrations count ${byIntegration.map((s) => `${s.integration} ${s.inflight}`).join(', ')} for ${inflight} tasks in flight`);
    if (snapshot.waitingBalancers.length > 0) problems.push(`balancers still marked waiting: ${snapshot.waitingBalancers.join(',')}`);
    if (problems.length > 0) return `${cluster}: ${problems.join('; ')}`;
  }
  return undefined;
}

/** Waits (bounded) until the ledger agrees; answers how long that took. */
export async function assertConverged(stack: FaultStack, timeoutMs = 10_000): Promise<number> {
  const startedAtMs = performance.now();
  await eventually('the ledger to agree with the live workers', timeoutMs, async () => {
    const problem = await ledgerDisagreement(stack);
    if (problem) throw new Error(problem);
    return true;
  });
  return Math.round(performance.now() - startedAtMs);
}

/** The whole invariant, once the case's load has stopped. */
export async function assertInvariant(stack: FaultStack, log: TaskLog, watch: FleetWatch, options: InvariantOptions = {}): Promise<InvariantResult> {
  const killed = options.killedBalancerIds ?? [];
  const result = assertAllAnswered(log, killed);

  await watch.stop();
  const highWaterMarks: InvariantResult['highWaterMarks'] = {};
  for (const [workerId, record] of watch.workers) {
    assert.ok(record.maxParallelismSeen > 0, `${workerId} was never read`);
    assert.ok(
      record.highWaterMark <= record.maxParallelismSeen,
      `${workerId} ran ${record.highWaterMark} tasks at once, max parallelism ${record.maxParallelismSeen}`,
    );
    highWaterMarks[workerId] = { highWaterMark: record.highWaterMark, maxParallelism: record.maxParallelismSeen };
  }
  // The load filled some worker: otherwise the check above could not have failed.
  assert.ok(
    Object.values(highWaterMarks).some((w) => w.highWaterMark === w.maxParallelism),
    `no worker was ever full: ${JSON.stringify(highWaterMarks)}`,
  );

  const convergedMs = await assertConverged(stack, options.convergeTimeoutMs);

  for (const balancer of stack.liveBalancers()) {
    const counted = (await scrapeMetrics(balancer.metricsPort)).sum('headroom_balancer_tasks_total');
    const sent = log.submissions.filter((s) => s.balancerId === balancer.id).length;
    assert.equal(counted, sent, `${balancer.id} counted ${counted} outcomes for ${sent} tasks sent to it`);
  }
  return { tally: result, convergedMs, highWaterMarks };
}
