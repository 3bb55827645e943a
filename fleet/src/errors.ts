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
