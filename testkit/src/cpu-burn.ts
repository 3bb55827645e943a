import { performance } from 'node:perf_hooks';

/**
 * A CPU-heavy handler for the tests that profile a worker: about 20 ms on the CPU per task.
 * Its name is what they look for in the profile (the summary, the .cpuprofile, the flame graph).
 */
export async function burnCpuForProfileTest(): Promise<string> {
  const until = performance.now() + 20;
  let x = 0;
  while (performance.now() < until) {
    for (let i = 0; i < 10_000; i++) x = (x + Math.sqrt(i)) % 1_000_003;
  }
  return String(x);
}

/**
 * A handler that holds the event loop for `blockMs` at once per task (a CPU-heavy integration),
 * changeable while the test runs: what makes a worker's event-loop delay cross its line.
 */
export function eventLoopBlocker(): { handler: () => Promise<Buffer>; blockMs: number } {
  const blocker = {
    blockMs: 0,
    handler: async () => {
      const until = performance.now() + blocker.blockMs;
      while (performance.now() < until) {
        // Spin: the point is to hold the event loop.
      }
      return Buffer.from('ok');
    },
  };
  return blocker;
}
