/** The simulated bank upstream (sim/src/bank) as a process, with its incidents API. */
import type { TestContext } from 'node:test';
import { spawnReady } from '@headroom/testkit';
import { cliPaths, readyTimeoutMs } from './stack';

export interface BankSimulatorProcess {
  readonly url: string;
  /** POST /incidents: see sim/src/bank/incidents.ts (`cluster`: only that cluster's calls feel it). */
  startIncident(incident: { bank: string; kind: 'latency-spike' | 'slow' | 'outage'; factor?: number; durationMs?: number; cluster?: string }): Promise<void>;
}

/** The env variable the bank handlers read the upstream's address from (sim/src/handlers/bank.ts). */
export const bankUrlEnv = 'HEADROOM_BANK_URL';

/** `timeScale`: every latency multiplied by it (0.5 runs the banks twice as fast). */
export async function startBankSimulator(t: TestContext, seed = 42, timeScale = 1): Promise<BankSimulatorProcess> {
  const process = await spawnReady(t, cliPaths.bankSimulator, ['--port', '0', '--seed', String(seed), '--time-scale', String(timeScale)], readyTimeoutMs);
  const url = process.ready.address;
  return {
    url,
    async startIncident(incident) {
      const response = await fetch(`${url}/incidents`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify(incident),
        signal: AbortSignal.timeout(5000),
      });
      if (!response.ok) throw new Error(`POST /incidents answered ${response.status}: ${await response.text()}`);
    },
  };
}
