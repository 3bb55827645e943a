/**
 * Lease ids as the ledger gives them out (lua/settle-12.lua): "<worker>|<nonce>", the nonce
 * followed by "|<integration>" when the task names one. A release finds the worker's leases from
 * the id; a worker's heartbeat sends the nonces of the leases it holds (lua/heartbeat-12.lua).
 * Worker ids never hold the separator (the worker's options reject it), so the first one splits.
 */
export const leaseIdSeparator = '|';

/** The id of lease `nonce` on `workerId`, as settle-12.lua writes it. */
export function formatLeaseId(workerId: string, nonce: string): string {
  return `${workerId}${leaseIdSeparator}${nonce}`;
}

/** The nonce of a lease on `workerId`, or undefined for another worker's lease or an id the ledger did not give out. */
export function leaseNonceOf(leaseId: string, workerId: string): string | undefined {
  const ownPrefix = `${workerId}${leaseIdSeparator}`;
  return leaseId.startsWith(ownPrefix) ? leaseId.slice(ownPrefix.length) : undefined;
}
