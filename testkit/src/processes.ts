/**
 * Headroom's commands as a user runs them (their package's `./cli` export), started by a test
 * from their ready line (see node-process.ts) and killed when the test ends.
 */
import type { TestContext } from 'node:test';
import { NodeProcess, type ReadyLine } from './node-process';

/** The commands' entry points, resolved through the packages' exports. */
export const cliPaths = {
  worker: require.resolve('@headroom/worker/cli'),
  balancer: require.resolve('@headroom/balancer/cli'),
  controlPlane: require.resolve('@headroom/control-plane/cli'),
  bankSimulator: require.resolve('@headroom/sim/bank-simulator'),
};

/** Handler modules for `headroom-worker --handlers`. */
export const handlersPaths = {
  demo: require.resolve('@headroom/sim/handlers/demo'),
  bank: require.resolve('@headroom/sim/handlers/bank'),
  /** Every task fails at once (a bad deploy: a missing secret). */
  broken: require.resolve('@headroom/sim/handlers/broken'),
};

export interface ReadyProcess {
  child: NodeProcess;
  ready: ReadyLine;
  /** Sends `signal` (SIGKILL by default) and resolves once it exited. */
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/**
 * Starts a Headroom command (LOG_LEVEL=warn, and `env` over this process's) and resolves with
 * the JSON ready line it prints; it is killed when the test ends. Rejects, naming it and
 * showing its last output lines, when it exits first or `timeoutMs` passes.
 */
export async function spawnReady(t: TestContext, cli: string, args: string[], timeoutMs = 15_000, env: NodeJS.ProcessEnv = {}): Promise<ReadyProcess> {
  const child = new NodeProcess({ name: cliName(cli), script: cli, args, env: { ...process.env, LOG_LEVEL: 'warn', ...env } });
  const kill = async (signal: NodeJS.Signals = 'SIGKILL') => {
    await child.kill(signal);
  };
  t.after(() => kill('SIGKILL'));
  const ready = await child.waitUntilReady(timeoutMs);
  return { child, ready, kill };
}

/** Folders and file names that say nothing of which command it is. */
const uninformative = new Set(['', 'dist', 'src', 'cli', 'index', '.bin', 'node_modules']);

/** ".../worker/dist/src/cli.js" -> "worker", ".../.bin/headroom-worker" -> "headroom-worker": which command, in errors. */
function cliName(cli: string): string {
  const parts = cli
    .replace(/\.js$/, '')
    .split(/[\\/]/)
    .filter((part) => !uninformative.has(part));
  return (parts.at(-1) ?? 'cli').replace(/[^A-Za-z0-9._-]/g, '-');
}
