import { HeadroomError } from '@headroom/common';

export const ledgerErrorCodes = {
  unavailable: 'HR_ERR_LEDGER_UNAVAILABLE',
  invalidLimit: 'HR_ERR_INVALID_LIMIT',
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

/** An integration limit (or the integration it names) cannot be stored; nothing was written. */
export class InvalidIntegrationLimitError extends HeadroomError {
  constructor(
    /** The field at fault: 'integration', 'limit', 'limit.maxInFlight' or 'limit.shareOfCapacity'. */
    readonly field: string,
    message: string,
  ) {
    super(ledgerErrorCodes.invalidLimit, `${field}: ${message}`);
    this.name = 'InvalidIntegrationLimitError';
  }
}
