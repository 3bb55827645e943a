/** The simulated bank upstream (sim/src/bank) as a process of its own, for workers running the bank handlers. */
import { startNodeProcess } from '@headroom/testkit';
import { stopProcess } from './headroom-fleet';

export interface BankSimulatorProcess {
  /** What the workers' HEADROOM_BANK_URL should say. */
  url: string;
  pid: number;
  /** Idempotent. */
  stop(): Promise<void>;
}

const bankCli = require.resolve('@headroom/sim/bank-simulator');
/** The env variable the bank handlers (sim/src/handlers/bank.ts) read the upstream's URL from. */
export const bankUrlEnv = 'HEADROOM_BANK_URL';
export const bankHandlersPath = require.resolve('@headroom/sim/handlers/bank');

/** Starts it on a free port of 127.0.0.1; `timeScale` multiplies every latency of the banks. */
export async function startBankSimulator(options: { timeScale: number; seed: number; logDir: string }): Promise<BankSimulatorProcess> {
  const { process: child, ready } = await startNodeProcess({
    name: 'bank-sim',
    script: bankCli,
    args: ['--host', '127.0.0.1', '--port', '0', '--time-scale', String(options.timeScale), '--seed', String(options.seed)],
    env: { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' },
    logDir: options.logDir,
    readyTimeoutMs: 15_000,
  });
  return { url: ready.address, pid: child.pid, stop: () => stopProcess(child) };
}
