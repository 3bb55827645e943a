/**
 * Handlers for the local demo and the tests. Payload, when JSON, may say
 *   { "sleepMs": 20 }   wait that long (honouring the abort signal)
 *   { "cpuMs": 5 }      keep the CPU busy that long
 *   { "fail": "HR_ERR_X" } fail with that code
 * `echo` returns the payload; every other integration sleeps (as a network-bound task would).
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { TaskFailedError, type HandlerMap, type TaskContext } from '@headroom/worker';

interface DemoPayload {
  sleepMs?: number;
  cpuMs?: number;
  fail?: string;
}

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

async function simulated(task: TaskContext, signal: AbortSignal): Promise<string> {
  const payload = parsePayload(task);
  if (payload.cpuMs) busyFor(payload.cpuMs);
  if (payload.sleepMs) await sleep(payload.sleepMs, undefined, { signal });
  if (payload.fail) throw new TaskFailedError(payload.fail, `failed on purpose (${payload.fail})`);
  return JSON.stringify({ taskId: task.id, workerId: task.workerId, cluster: task.cluster });
}

export const handlers: HandlerMap = {
  echo: async (task) => task.payload,
  '*': simulated,
};
