/**
 * One repetition of the fleet-scale mode in a process of its own (forked by runFleetScale): the
 * simulated fleet's heap (4,000 connections, tens of thousands of leases) starts empty for each
 * repetition, so that none inherits another's garbage, and a young generation large enough that
 * the short-lived objects of each call die young (full collections of a swollen heap stalled the
 * harness for a second). Takes { redisServerBinary, settings, plannedShareRate } over IPC; sends
 * progress lines, then the run or an error. SIGTERM or SIGINT stops it cleanly (its redis-server too).
 */
import { runOne } from './fleet-scale';
import type { FleetScaleMessage, FleetScaleRequest } from './fleet-scale-runner';

if (require.main === module) {
  const stop = new AbortController();
  // Ctrl-C reaches the whole process group: stop cleanly here too (the parent stops us anyway).
  for (const name of ['SIGTERM', 'SIGINT'] as const) process.once(name, () => stop.abort(new Error(`stopped by ${name}`)));
  process.once('message', (request: FleetScaleRequest) => {
    const send = (message: FleetScaleMessage) => new Promise<void>((resolve) => process.send!(message, () => resolve()));
    runOne(request.redisServerBinary, request.settings, (line) => void send({ type: 'progress', line }), stop.signal, request.plannedShareRate).then(
      async (run) => {
        await send({ type: 'result', run });
        process.exit(0);
      },
      async (error: unknown) => {
        await send({ type: 'error', message: error instanceof Error ? (error.stack ?? error.message) : String(error) });
        process.exit(1);
      },
    );
  });
}
