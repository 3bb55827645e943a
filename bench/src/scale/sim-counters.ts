/** What the simulated processes sent and got, since the fleet started. */
export interface SimCounters {
  arrivals: number;
  /** Arrivals not sent because maxOutstandingReserves were under way: the harness fell behind. */
  arrivalsDropped: number;
  reserveCalls: number;
  reserved: number;
  refused: Record<string, number>;
  releaseCalls: number;
  /** Releases of a lease the ledger no longer held (it expired, or its worker was swept). */
  releasedNotHeld: number;
  heartbeats: number;
  /** Heartbeats not sent because the worker's previous one was still under way (a real worker's timer waits for it too). */
  heartbeatsLate: number;
  sweeps: number;
  workersRemoved: number;
  leasesExpired: number;
  directoryReads: number;
  stopWaitings: number;
  slotFreedMessages: number;
  /** What the processes sent besides the ledger (FleetSim.sendOthers). */
  reports: number;
  latencyFlushes: number;
  balancerHeartbeats: number;
  errors: number;
}

export const emptyCounters = (): SimCounters => ({
  arrivals: 0,
  arrivalsDropped: 0,
  reserveCalls: 0,
  reserved: 0,
  refused: {},
  releaseCalls: 0,
  releasedNotHeld: 0,
  heartbeats: 0,
  heartbeatsLate: 0,
  sweeps: 0,
  workersRemoved: 0,
  leasesExpired: 0,
  directoryReads: 0,
  stopWaitings: 0,
  slotFreedMessages: 0,
  reports: 0,
  latencyFlushes: 0,
  balancerHeartbeats: 0,
  errors: 0,
});

export function countersBetween(before: SimCounters, after: SimCounters): SimCounters {
  const refused: Record<string, number> = {};
  for (const [reason, n] of Object.entries(after.refused)) if (n - (before.refused[reason] ?? 0) > 0) refused[reason] = n - (before.refused[reason] ?? 0);
  const d = (key: Exclude<keyof SimCounters, 'refused'>) => after[key] - before[key];
  return {
    arrivals: d('arrivals'),
    arrivalsDropped: d('arrivalsDropped'),
    reserveCalls: d('reserveCalls'),
    reserved: d('reserved'),
    refused,
    releaseCalls: d('releaseCalls'),
    releasedNotHeld: d('releasedNotHeld'),
    heartbeats: d('heartbeats'),
    heartbeatsLate: d('heartbeatsLate'),
    sweeps: d('sweeps'),
    workersRemoved: d('workersRemoved'),
    leasesExpired: d('leasesExpired'),
    directoryReads: d('directoryReads'),
    stopWaitings: d('stopWaitings'),
    slotFreedMessages: d('slotFreedMessages'),
    reports: d('reports'),
    latencyFlushes: d('latencyFlushes'),
    balancerHeartbeats: d('balancerHeartbeats'),
    errors: d('errors'),
  };
}
