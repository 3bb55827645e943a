// FROZEN COPY of fleet/src/errors.ts as it was before the ledger's redesign around lease records (the "old
// scripts"). Used only by the scale benchmark's fleet-scale mode to compare old against new in one
// run; not production code, never imported outside bench/src/scale/. Do not change or fix it.
import { HeadroomError } from '@headroom/common';

export const ledgerErrorCodes = {
  unavailable: 'HR_ERR_LEDGER_UNAVAILABLE',
} as const;

/** Redis could not be reached or answered with an error; the ledger call changed nothing we know of. */
export class LedgerUnavailableError extends HeadroomError {
  constructor(operation: string, cause: unknown) {
    super(ledgerErrorCodes.unavailable, `slot ledger ${operation} failed: ${cause instanceof Error ? cause.message : String(cause)}`, {
      cause,
      retryAfterMs: 500,
    });
    this.name = 'LedgerUnavailableError';
  }
}
