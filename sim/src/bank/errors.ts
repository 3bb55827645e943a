/**
 * Codes the simulated banks answer with, in `{"error": {"code", "message"}}`, and the one
 * place they map to HTTP statuses.
 */
import { HeadroomError } from '@headroom/common';

export const bankErrorCodes = {
  /** A path segment, query parameter or body field is invalid: the message names it. */
  invalidRequest: 'HR_ERR_BANK_INVALID_REQUEST',
  /** No such bank or path. */
  notFound: 'HR_ERR_BANK_NOT_FOUND',
  methodNotAllowed: 'HR_ERR_BANK_METHOD_NOT_ALLOWED',
  /** A request body past the simulator's limit. */
  bodyTooLarge: 'HR_ERR_BANK_BODY_TOO_LARGE',
  /** The bank is in an outage (incident), or failed on purpose (its error rate) with a 503. */
  unavailable: 'HR_ERR_BANK_UNAVAILABLE',
  /** The bank failed on purpose (its error rate) with a 500. */
  internal: 'HR_ERR_BANK_INTERNAL',
} as const;

export type BankErrorCode = (typeof bankErrorCodes)[keyof typeof bankErrorCodes];

export const httpStatusOf: Readonly<Record<BankErrorCode, number>> = {
  HR_ERR_BANK_INVALID_REQUEST: 400,
  HR_ERR_BANK_NOT_FOUND: 404,
  HR_ERR_BANK_METHOD_NOT_ALLOWED: 405,
  HR_ERR_BANK_BODY_TOO_LARGE: 413,
  HR_ERR_BANK_UNAVAILABLE: 503,
  HR_ERR_BANK_INTERNAL: 500,
};

export class BankApiError extends HeadroomError {
  override readonly code: BankErrorCode;

  constructor(code: BankErrorCode, message: string, options?: { retryAfterMs?: number }) {
    super(code, message, options);
    this.name = 'BankApiError';
    this.code = code;
  }

  get httpStatus(): number {
    return httpStatusOf[this.code];
  }
}
