import { HeadroomError } from '@headroom/common';

/** Redis could not be reached or answered with an error; the ledger call changed nothing we know of. */
export class LedgerUnavailableError extends HeadroomError {
  constructor(operation: string, cause: unknown) {
    super('HR_ERR_LEDGER_UNAVAILABLE', `slot ledger ${operation} failed: ${cause instanceof Error ? cause.message : String(cause)}`, {
      cause,
      retryAfterMs: 500,
    });
    this.name = 'LedgerUnavailableError';
  }
}
