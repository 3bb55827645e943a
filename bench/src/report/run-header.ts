import { describeRedis } from '../fleet/headroom-fleet';
import { describeMachine, type MachineDescription } from './machine';

/** What every benchmark is given by run.ts. */
export interface BenchmarkOptions {
  /** Seconds and a tiny load: proves it runs end to end (the tests), measures nothing worth reading. */
  smoke: boolean;
  /** The command line, as the report will show it. */
  command: string;
  redisUrl: string;
  /** Ctrl-C: stop the load, clean up, give up. */
  signal: AbortSignal;
  /** Progress lines. */
  progress(line: string): void;
}

/** What every benchmark's JSON starts with: what ran, where, and when. */
export interface RunHeader<Name extends string, Settings> {
  benchmark: Name;
  mode: 'full' | 'smoke';
  startedAt: string;
  finishedAt: string;
  command: string;
  machine: MachineDescription;
  redisVersion: string;
  settings: Settings;
}

export interface RunStart<Name extends string, Settings> {
  /** The Redis server's pid when it runs on this machine (for CPU accounting). */
  redisPid: number | undefined;
  /** The header, finished now. */
  header(): RunHeader<Name, Settings>;
}

/** Notes the machine and the Redis server as a run starts. */
export async function startRun<Name extends string, Settings>(
  benchmark: Name,
  options: { smoke: boolean; command: string; redisUrl: string },
  settings: Settings,
): Promise<RunStart<Name, Settings>> {
  const startedAt = new Date().toISOString();
  const machine = describeMachine();
  const redis = await describeRedis(options.redisUrl);
  return {
    redisPid: redis.pid,
    header: () => ({
      benchmark,
      mode: options.smoke ? 'smoke' : 'full',
      startedAt,
      finishedAt: new Date().toISOString(),
      command: options.command,
      machine,
      redisVersion: redis.version,
      settings,
    }),
  };
}
