/**
 * CPU per task of a balancer process by server transport: grpc-js against http2 (h2-server.ts),
 * each a balancer CLI of its own (--server-transport) in front of the same worker process (demo
 * handlers, `echo`, a 16-byte payload), 64 Submit calls in flight from a grpc-js client here.
 * The balancer's CPU is read from /proc/<pid>/stat (utime + stime) around each round; rounds
 * alternate between the two; medians printed. Run by hand (not a test, never fails on timing):
 *   npx tsc --build && node balancer/dist/test/server-transport-bench.js [tasksPerRound] [rounds]
 * With HEADROOM_BENCH_CPU_PROF_DIR set, each balancer writes a CPU profile there when it stops.
 */
import * as fs from 'node:fs';
import { execFileSync } from 'node:child_process';
import * as grpc from '@grpc/grpc-js';
import { BalancerService, type BalancerClient } from '@headroom/proto';
import { cliPaths, handlersPaths, testRedisUrl, uniquePrefix, NodeProcess } from '@headroom/testkit';

const tasksPerRound = Math.min(200_000, Number(process.argv[2] ?? 20_000));
const rounds = Math.min(9, Number(process.argv[3] ?? 3));
const inFlight = 64;
const warmUpTasks = 3_000;
const transports = ['grpc-js', 'http2'] as const;
const cpuProfileDir = process.env.HEADROOM_BENCH_CPU_PROF_DIR;
const clockTicksPerSecond = Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());

/** User + system CPU of a process so far (µs), from /proc/<pid>/stat. */
function processCpuMicros(pid: number): number {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces), from field 3 on: utime is 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) / clockTicksPerSecond) * 1_000_000;
}

async function runTasks(client: BalancerClient, count: number): Promise<void> {
  const payload = Buffer.from('0123456789abcdef');
  let next = 0;
  let failures = 0;
  let firstFailure = '';
  const lane = async () => {
    while (next < count) {
      const id = next++;
      await new Promise<void>((resolve) =>
        client.submit(
          { task: { id: `t-${id}`, key: `k-${id}`, integration: 'echo', priority: 'USER_PRESENT', payload } },
          { deadline: Date.now() + 30_000 },
          (error, response) => {
            if (error || response?.error) {
              failures++;
              firstFailure ||= error ? `${grpc.status[error.code]} ${error.details}` : `${response!.error!.code} ${response!.error!.message}`;
            }
            resolve();
          },
        ),
      );
    }
  };
  await Promise.all(Array.from({ length: inFlight }, lane));
  if (failures > 0) throw new Error(`${failures} of ${count} tasks failed, the first: ${firstFailure}`);
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)]!;
}

async function main(): Promise<void> {
  const keyPrefix = uniquePrefix('server-bench');
  const env = { ...process.env, LOG_LEVEL: 'warn' };
  const processes: NodeProcess[] = [];
  const clients: BalancerClient[] = [];
  try {
    const worker = new NodeProcess({
      name: 'bench-worker',
      script: cliPaths.worker,
      args: ['--cluster', 'baseline', '--handlers', handlersPaths.demo, '--max-parallelism', '1000', '--redis-url', testRedisUrl, '--key-prefix', keyPrefix],
      env,
    });
    processes.push(worker);
    await worker.waitUntilReady(15_000);
    const balancers = [];
    for (const transport of transports) {
      const balancer = new NodeProcess({
        name: `bench-balancer-${transport}`,
        script: cliPaths.balancer,
        args: ['--server-transport', transport, '--redis-url', testRedisUrl, '--key-prefix', keyPrefix],
        ...(cpuProfileDir ? { nodeFlags: ['--cpu-prof', '--cpu-prof-dir', cpuProfileDir, '--cpu-prof-name', `balancer-${transport}.cpuprofile`] } : {}),
        env,
      });
      processes.push(balancer);
      const ready = await balancer.waitUntilReady(15_000);
      const client = new BalancerService(ready.address, grpc.credentials.createInsecure());
      clients.push(client);
      balancers.push({ transport, pid: balancer.pid, client });
    }
    for (const { client } of balancers) await runTasks(client, Math.min(warmUpTasks, tasksPerRound));
    const results = new Map<string, { cpuUsPerTask: number[]; tasksPerSecond: number[] }>(
      transports.map((name) => [name, { cpuUsPerTask: [], tasksPerSecond: [] }]),
    );
    for (let round = 0; round < rounds; round++) {
      for (const { transport, pid, client } of round % 2 === 0 ? balancers : [...balancers].reverse()) {
        const cpuBefore = processCpuMicros(pid);
        const startedAt = performance.now();
        await runTasks(client, tasksPerRound);
        const elapsedMs = performance.now() - startedAt;
        const cpuUsPerTask = (processCpuMicros(pid) - cpuBefore) / tasksPerRound;
        const tasksPerSecond = (tasksPerRound / elapsedMs) * 1000;
        const result = results.get(transport)!;
        result.cpuUsPerTask.push(cpuUsPerTask);
        result.tasksPerSecond.push(tasksPerSecond);
        process.stdout.write(`round ${round + 1} ${transport}: ${cpuUsPerTask.toFixed(1)} µs of balancer CPU per task, ${tasksPerSecond.toFixed(0)} tasks/s\n`);
      }
    }
    process.stdout.write(
      `\n${tasksPerRound} tasks per round, ${rounds} rounds, ${inFlight} in flight, 16-byte echo, balancer CPU from /proc (${clockTicksPerSecond} ticks/s)\n`,
    );
    process.stdout.write(
      `${'server transport'.padEnd(18)} ${'balancer CPU µs/task (median)'.padStart(30)} ${'tasks/s (median)'.padStart(18)}   runs (µs/task)\n`,
    );
    for (const [name, result] of results) {
      process.stdout.write(
        `${name.padEnd(18)} ${median(result.cpuUsPerTask).toFixed(1).padStart(30)} ${median(result.tasksPerSecond).toFixed(0).padStart(18)}   ${result.cpuUsPerTask.map((v) => v.toFixed(1)).join(', ')}\n`,
      );
    }
    process.stdout.write(`${JSON.stringify({ tasksPerRound, rounds, inFlight, results: Object.fromEntries(results) })}\n`);
  } finally {
    for (const client of clients) client.close();
    for (const child of processes.reverse()) await child.kill('SIGTERM');
  }
}

main().catch((error: unknown) => {
  process.stderr.write(`${error instanceof Error ? error.stack : String(error)}\n`);
  process.exitCode = 1;
});
