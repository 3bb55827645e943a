/**
 * Runs the fleet-scale mode (fleet-scale.ts) `repetitions` times, each time in a process of its
 * own (fleet-scale-process.ts), then pools the repetitions (fleet-scale-summary.ts).
 */
import { fork } from 'node:child_process';
import * as path from 'node:path';
import type { FleetScaleResult, FleetScaleRun, FleetScaleSettings } from './fleet-scale';
import { poolRuns } from './fleet-scale-summary';
import { meanDurationMs } from './task-durations';

/** What runFleetScale asks of a run's process (fleet-scale-process.ts), and what it answers. */
export interface FleetScaleRequest {
  redisServerBinary: string;
  settings: FleetScaleSettings;
  plannedShareRate: number | undefined;
}

export type FleetScaleMessage = { type: 'progress'; line: string } | { type: 'result'; run: FleetScaleRun } | { type: 'error'; message: string };

/** Node flags of each run's process: a young generation large enough that each call's short-lived objects die young. */
const childNodeFlags = ['--max-semi-space-size=64'];

/** Runs the fleet-scale mode, each repetition in a process of its own (fleet-scale-process.ts) on a fresh private redis-server. */
export async function runFleetScale(
  redisServerBinary: string,
  settings: FleetScaleSettings,
  progress: (line: string) => void,
  signal: AbortSignal,
): Promise<FleetScaleResult> {
  const repetitions: FleetScaleRun[] = [];
  for (let repetition = 1; repetition <= settings.repetitions; repetition++) {
    signal.throwIfAborted();
    const plannedShareRate = repetitions[0]?.loads.find((load) => load.chosenAs !== 'fixed')?.targetTasksPerSecond;
    progress(`fleet-scale, repetition ${repetition} of ${settings.repetitions}`);
    repetitions.push(await runInChild({ redisServerBinary, settings, plannedShareRate }, progress, signal));
  }
  return {
    settings,
    meanTaskDurationMs: meanDurationMs(settings.sim.durations),
    run: poolRuns(repetitions, settings),
    // Their windows are in `run`; each repetition's own figures, to see how far they spread.
    repetitions: repetitions.map((run) => ({
      durationSeconds: run.durationSeconds,
      perIdleWorkerSecondUs: run.perIdleWorkerSecondUs,
      perBusyWorkerSecondUs: run.perBusyWorkerSecondUs,
      perBalancerSecondUs: run.perBalancerSecondUs,
      loads: run.loads.map((load) => ({
        targetTasksPerSecond: load.targetTasksPerSecond,
        tasksPerSecond: load.tasksPerSecond,
        perTaskUs: load.perTaskUs,
        shareOfThread: load.shareOfThread,
        keptUp: load.keptUp,
      })),
    })),
  };
}

function runInChild(request: FleetScaleRequest, progress: (line: string) => void, signal: AbortSignal): Promise<FleetScaleRun> {
  return new Promise<FleetScaleRun>((resolve, reject) => {
    const child = fork(path.join(__dirname, 'fleet-scale-process.js'), [], { execArgv: childNodeFlags, stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
    let settled = false;
    const onAbort = () => child.kill('SIGTERM');
    signal.addEventListener('abort', onAbort, { once: true });
    const finish = (error: Error | undefined, run?: FleetScaleRun) => {
      if (settled) return;
      settled = true;
      signal.removeEventListener('abort', onAbort);
      if (error) reject(error);
      else resolve(run!);
    };
    child.on('message', (message: FleetScaleMessage) => {
      if (message.type === 'progress') progress(message.line);
      else if (message.type === 'result') finish(undefined, message.run);
      else finish(new Error(`fleet-scale: ${message.message}`));
    });
    child.once('error', (error) => finish(error));
    child.once('exit', (code, signalName) => finish(new Error(`fleet-scale: its process exited (${signalName ?? code}) without a result`)));
    child.send(request);
  });
}
