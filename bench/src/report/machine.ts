import * as os from 'node:os';

export interface MachineDescription {
  /** Cores this process may use (os.availableParallelism(), as `nproc` reports). */
  nproc: number;
  cpuModel: string;
  totalMemoryMiB: number;
  platform: string;
  kernel: string;
  nodeVersion: string;
  /** 1-minute load average when the run started: other work on the host skews the figures. */
  loadAverageAtStart1m: number;
}

export function describeMachine(): MachineDescription {
  return {
    nproc: os.availableParallelism(),
    cpuModel: os.cpus()[0]?.model.trim() ?? 'unknown',
    totalMemoryMiB: Math.round(os.totalmem() / 1024 / 1024),
    platform: `${os.platform()} ${os.arch()}`,
    kernel: os.release(),
    nodeVersion: process.version,
    loadAverageAtStart1m: Math.round(os.loadavg()[0]! * 100) / 100,
  };
}

export function formatMachine(machine: MachineDescription): string {
  return `${machine.nproc} cores (nproc), ${machine.cpuModel}, ${machine.totalMemoryMiB} MiB, ${machine.platform} ${machine.kernel}, Node ${machine.nodeVersion}; load average ${machine.loadAverageAtStart1m} when the run started`;
}
