/**
 * Headroom's commands as a user runs them (their package's `./cli` export), started from their
 * ready line.
 */
import type { TestContext } from 'node:test';

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
};

export interface ReadyProcess {
  child: import('node:child_process').ChildProcess;
  ready: { address: string; workerId?: string; balancerId?: string; metricsPort?: number };
  kill(signal?: NodeJS.Signals): Promise<void>;
}

/** Starts a Headroom CLI and resolves with the JSON "ready" line it prints. */
export async function spawnReady(t: TestContext, cli: string, args: string[], timeoutMs = 15_000): Promise<ReadyProcess> {
  const { spawn } = await import('node:child_process');
  const child = spawn(process.execPath, [cli, ...args], { env: { ...process.env, LOG_LEVEL: 'warn' }, stdio: ['ignore', 'pipe', 'pipe'] });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr = (stderr + chunk.toString()).slice(-4000)));
  const kill = async (signal: NodeJS.Signals = 'SIGKILL') => {
    if (child.exitCode !== null || child.signalCode !== null) return;
    const exited = new Promise((resolve) => child.once('exit', resolve));
    child.kill(signal);
    await exited;
  };
  t.after(() => kill('SIGKILL'));
  const ready = await new Promise<ReadyProcess['ready']>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${cli} not ready after ${timeoutMs} ms: ${stderr}`)), timeoutMs);
    let buffered = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      buffered += chunk.toString();
      for (const line of buffered.split('\n').slice(0, -1)) {
        if (line.includes('"event":"ready"')) {
          clearTimeout(timer);
          resolve(JSON.parse(line) as ReadyProcess['ready']);
        }
      }
      buffered = buffered.slice(buffered.lastIndexOf('\n') + 1);
    });
    child.once('exit', (code) => reject(new Error(`${cli} exited with ${code} before it was ready: ${stderr}`)));
  });
  return { child, ready, kill };
}
