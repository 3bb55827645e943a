/**
 * CPU per Worker.Execute call of this process (the balancer's side): WorkerChannels (grpc-js)
 * against WorkerCallsH2 (node:http2), on the same worker process (demo handlers, `echo`, a
 * 16-byte payload), 64 calls in flight. Rounds alternate between the two; medians printed.
 * Run by hand (not a test, never fails on timing):
 *   npx tsc --build && node balancer/dist/test/worker-calls-bench.js [callsPerRound] [rounds]
 */
import { cliPaths, handlersPaths, testRedisUrl, uniquePrefix, NodeProcess } from '@headroom/testkit';
import { executeRequest, implementations, type WorkerCallsUnderTest } from './worker-calls-kit';

const callsPerRound = Math.min(200_000, Number(process.argv[2] ?? 20_000));
const rounds = Math.min(9, Number(process.argv[3] ?? 3));
const inFlight = 64;
const warmUpCalls = 3_000;

async function runCalls(calls: WorkerCallsUnderTest, address: string, worker: { workerId: string; cluster: string }, count: number): Promise<void> {
  const payload = Buffer.from('0123456789abcdef');
  let next = 0;
  let failures = 0;
  const lane = async () => {
    while (next < count) {
      next++;
      const deadlineUnixMs = Date.now() + 30_000;
      // A signal of its own per call, as each task has in the balancer.
      const outcome = await calls.execute(address, executeRequest(worker, 'echo', payload, deadlineUnixMs), deadlineUnixMs, new AbortController().signal);
      if (outcome.kind !== 'done') failures++;
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  if (failures > 0) throw new Error(`${failures} of ${count} calls failed`);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const child = new NodeProcess({
    name: 'bench-worker',
    script: cliPaths.worker,
    args: [
      '--cluster',
      'bench',
      '--handlers',
      handlersPaths.demo,
      '--max-parallelism',
      '1000',
      '--redis-url',
      testRedisUrl,
      '--key-prefix',
      uniquePrefix('calls-bench'),
    ],
    env: { ...process.env, LOG_LEVEL: 'warn' },
  });
  try {
    const ready = await child.waitUntilReady(15_000);
    const worker = { workerId: ready.workerId!, cluster: 'bench' };
    const results = new Map<string, { cpuUsPerCall: number[]; callsPerSecond: number[] }>(
      implementations.map((i) => [i.name, { cpuUsPerCall: [], callsPerSecond: [] }]),
    );
    const instances = implementations.map((implementation) => ({
      implementation,
      calls: implementation.create({ maxSendMessageBytes: 1 << 20, maxChannels: 16, keepaliveTimeMs: 10_000 }),
    }));
    for (const { calls } of instances) await runCalls(calls, ready.address, worker, warmUpCalls);
    for (let round = 0; round < rounds; round++) {
      for (const { implementation, calls } of round % 2 === 0 ? instances : [...instances].reverse()) {
        (globalThis as { gc?: () => void }).gc?.();
        const cpuBefore = process.cpuUsage();
        const startedAt = performance.now();
        await runCalls(calls, ready.address, worker, callsPerRound);
        const elapsedMs = performance.now() - startedAt;
        const cpu = process.cpuUsage(cpuBefore);
        const result = results.get(implementation.name)!;
        result.cpuUsPerCall.push((cpu.user + cpu.system) / callsPerRound);
        result.callsPerSecond.push((callsPerRound / elapsedMs) * 1000);
        process.stdout.write(
          `round ${round + 1} ${implementation.name}: ${((cpu.user + cpu.system) / callsPerRound).toFixed(1)} µs CPU per call, ${((callsPerRound / elapsedMs) * 1000).toFixed(0)} calls/s\n`,
        );
      }
    }
    for (const { calls } of instances) calls.closeAll();
    process.stdout.write(`\n${callsPerRound} calls per round, ${rounds} rounds, ${inFlight} in flight, 16-byte echo\n`);
    process.stdout.write(`${'implementation'.padEnd(28)} ${'CPU µs/call (median)'.padStart(22)} ${'calls/s (median)'.padStart(18)}   runs (µs/call)\n`);
    for (const [name, result] of results) {
      process.stdout.write(
        `${name.padEnd(28)} ${median(result.cpuUsPerCall).toFixed(1).padStart(22)} ${median(result.callsPerSecond).toFixed(0).padStart(18)}   ${result.cpuUsPerCall.map((v) => v.toFixed(1)).join(', ')}\n`,
      );
    }
    process.stdout.write(`${JSON.stringify({ callsPerRound, rounds, inFlight, results: Object.fromEntries(results) })}\n`);
  } finally {
    await child.kill('SIGTERM');
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exitCode = 1;
});
