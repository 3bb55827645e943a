/** What the bank simulator's and the bank handlers' tests share. */
import type { TestContext } from 'node:test';
import { Agent, request, type Dispatcher } from 'undici';
import type { TaskContext } from '@headroom/worker';
import { startBankSimulator, type BankSimulator, type BankSimulatorOptions } from '../src/bank/bank-server';

/** A simulator on a free port with a fixed seed, closed when the test ends. */
export async function startTestSimulator(t: TestContext, options: BankSimulatorOptions = {}): Promise<BankSimulator> {
  const simulator = await startBankSimulator({ port: 0, seed: 42, ...options });
  t.after(() => simulator.close());
  return simulator;
}

/** A real undici agent with a connection cap, as the worker gives handlers; closed when the test ends. */
export function testAgent(t: TestContext, connections: number): Agent {
  const agent = new Agent({ connections });
  t.after(() => agent.destroy());
  return agent;
}

/** A task as the worker hands it to a handler. */
export function bankTask(httpAgent: Dispatcher, fields: { integration?: string; key?: string; payload?: unknown } = {}): TaskContext {
  return {
    id: `task-${fields.key ?? 'acc-1'}`,
    key: fields.key ?? 'acc-1',
    integration: fields.integration ?? 'bank-a',
    priority: 'BACKGROUND',
    payload: fields.payload === undefined ? Buffer.alloc(0) : Buffer.from(JSON.stringify(fields.payload)),
    deadlineUnixMs: Date.now() + 10_000,
    idempotent: false,
    cluster: 'candidate',
    workerId: 'worker-1',
    httpAgent,
  };
}

export interface SimulatorAnswer {
  status: number;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  /** Wall time of the request, ms. */
  durationMs: number;
}

/** One request to the simulator; the JSON body parsed. */
export async function callSimulator(
  dispatcher: Dispatcher,
  url: string,
  init: { method?: 'GET' | 'POST' | 'DELETE' | 'PUT'; body?: string; headers?: Record<string, string> } = {},
): Promise<SimulatorAnswer> {
  const startedAt = performance.now();
  const headers = { ...init.headers, ...(init.body === undefined ? {} : { 'content-type': 'application/json' }) };
  const response = await request(url, { dispatcher, method: init.method ?? 'GET', headers, ...(init.body === undefined ? {} : { body: init.body }) });
  const text = await response.body.text();
  return {
    status: response.statusCode,
    headers: response.headers,
    body: text === '' ? undefined : JSON.parse(text),
    durationMs: performance.now() - startedAt,
  };
}

/** The value at quantile `q` (0..1) of `values`. */
export function quantile(values: readonly number[], q: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]!;
}

/** Runs `count` calls of `fn`, at most `concurrency` at once. */
export async function runBounded<T>(count: number, concurrency: number, fn: (index: number) => Promise<T>): Promise<T[]> {
  const results: T[] = new Array<T>(count);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(concurrency, count) }, async () => {
      while (next < count) {
        const index = next++;
        results[index] = await fn(index);
      }
    }),
  );
  return results;
}
