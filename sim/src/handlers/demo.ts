/**
 * Handlers for the local demo and the tests. Payload, when JSON, may say
 *   { "sleepMs": 20 }   wait that long (honouring the abort signal)
 *   { "cpuMs": 5 }      keep the CPU busy that long
 *   { "allocateKb": 256 } first build, parse, reshape and serialise an upstream's JSON answer of
 *                       that size, and hold it until the task ends (see upstream-answer.ts)
 *   { "fail": "HR_ERR_X" } fail with that code
 * `echo` returns the payload; every other integration sleeps (as a network-bound task would).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { TaskFailedError, type HandlerMap, type TaskContext } from '@headroom/worker';
import { maxAnswerKb, processUpstreamAnswer, type ProcessedAnswer } from './upstream-answer';

interface DemoPayload {
  sleepMs?: number;
  cpuMs?: number;
  allocateKb?: number;
  fail?: string;
}

/** A payload the demo handlers cannot run. */
export const invalidPayloadCode = 'HR_ERR_INVALID_PAYLOAD';

function parsePayload(task: TaskContext): DemoPayload {
  if (task.payload.length === 0) return {};
  try {
    return JSON.parse(task.payload.toString('utf8')) as DemoPayload;
  } catch {
    return {};
  }
}

function busyFor(ms: number): void {
  const until = performance.now() + ms;
  while (performance.now() < until) {
    // Spin: the point is to hold the event loop, as a CPU-bound handler would.
  }
}

function processAnswer(task: TaskContext, allocateKb: unknown): ProcessedAnswer {
  if (typeof allocateKb !== 'number' || !(allocateKb >= 1 && allocateKb <= maxAnswerKb)) {
    throw new TaskFailedError(invalidPayloadCode, `allocateKb: got ${JSON.stringify(allocateKb)}, expected a number from 1 to ${maxAnswerKb}`);
  }
  return processUpstreamAnswer(allocateKb, task.id);
}

async function simulated(task: TaskContext, signal: AbortSignal): Promise<string> {
  const payload = parsePayload(task);
  // Held across the sleep, as a handler holds one upstream's answer while it waits for the next.
  const answer = payload.allocateKb === undefined ? undefined : processAnswer(task, payload.allocateKb);
  if (payload.cpuMs) busyFor(payload.cpuMs);
  if (payload.sleepMs) await sleep(payload.sleepMs, undefined, { signal });
  if (payload.fail) throw new TaskFailedError(payload.fail, `failed on purpose (${payload.fail})`);
  const processed = answer && { answerBytes: answer.answerBytes, statementLines: answer.statement.length, statementBytes: answer.statementJson.length };
  return JSON.stringify({ taskId: task.id, workerId: task.workerId, cluster: task.cluster, ...processed });
}

export const handlers: HandlerMap = {
  echo: async (task) => task.payload,
  '*': simulated,
};
