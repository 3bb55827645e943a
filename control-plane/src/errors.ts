import { HeadroomError } from '@headroom/common';

/** Codes the REST API answers with (body: { error: { code, message, ... } }). */
export const apiErrorCodes = {
  invalidRequest: 'HR_ERR_INVALID_REQUEST',
  unauthenticated: 'HR_ERR_UNAUTHENTICATED',
  forbidden: 'HR_ERR_FORBIDDEN',
  notFound: 'HR_ERR_NOT_FOUND',
  conflict: 'HR_ERR_CONFLICT',
  unsupportedMediaType: 'HR_ERR_UNSUPPORTED_MEDIA_TYPE',
  bodyTooLarge: 'HR_ERR_BODY_TOO_LARGE',
  /** Unleash could not be reached or refused the change: the change did not (fully) happen. */
  unleashFailed: 'HR_ERR_UNLEASH_FAILED',
  /** Redis could not be reached. */
  ledgerUnavailable: 'HR_ERR_LEDGER_UNAVAILABLE',
  /** PostgreSQL (the audit log, and the lock on changes) could not be reached: a change is refused rather than made without a record. */
  databaseUnavailable: 'HR_ERR_DATABASE_UNAVAILABLE',
  /** At start: the audit schema was migrated by a newer control plane than this one. */
  databaseSchemaTooNew: 'HR_ERR_DATABASE_SCHEMA_TOO_NEW',
  tooManyStreams: 'HR_ERR_TOO_MANY_STREAMS',
  /** Too many changes wait their turn (they run one at a time). */
  busy: 'HR_ERR_BUSY',
  /** Another worker is being profiled (one at a time across the fleet). */
  profileLocked: 'HR_ERR_PROFILE_LOCKED',
  /** The worker could not be asked for a profile, or its answer was not a usable one. */
  profileFailed: 'HR_ERR_PROFILE_FAILED',
  internal: 'HR_ERR_INTERNAL',
} as const;

/** The one place codes map to HTTP statuses. */
const httpStatusByCode: Record<string, number> = {
  [apiErrorCodes.invalidRequest]: 400,
  [apiErrorCodes.unauthenticated]: 401,
  [apiErrorCodes.forbidden]: 403,
  [apiErrorCodes.notFound]: 404,
  [apiErrorCodes.conflict]: 409,
  [apiErrorCodes.profileLocked]: 409,
  [apiErrorCodes.bodyTooLarge]: 413,
  [apiErrorCodes.unsupportedMediaType]: 415,
  [apiErrorCodes.unleashFailed]: 502,
  [apiErrorCodes.profileFailed]: 502,
  [apiErrorCodes.ledgerUnavailable]: 503,
  [apiErrorCodes.databaseUnavailable]: 503,
  [apiErrorCodes.tooManyStreams]: 503,
  [apiErrorCodes.busy]: 503,
};

export function httpStatusOf(code: string): number {
  return httpStatusByCode[code] ?? 500;
}

export interface FieldProblem {
  field: string;
  message: string;
}

/** A request that does not match its schema: names each field and what is accepted. */
export class InvalidRequestError extends HeadroomError {
  constructor(readonly problems: FieldProblem[]) {
    super(apiErrorCodes.invalidRequest, problems.map((p) => `${p.field}: ${p.message}`).join('; '));
    this.name = 'InvalidRequestError';
  }
}

/** Unleash failed; `applied` lists what had been changed before the failure (and was not undone). */
export class UnleashFailedError extends HeadroomError {
  constructor(
    message: string,
    readonly details: { status?: number; applied?: string[]; undone?: string[] } = {},
    cause?: unknown,
  ) {
    super(apiErrorCodes.unleashFailed, message, { cause });
    this.name = 'UnleashFailedError';
  }
}
