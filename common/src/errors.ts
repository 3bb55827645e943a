/**
 * Every error Headroom raises on purpose carries a stable `code` (HR_ERR_*).
 * Callers branch on `code`, never on message text.
 */
export class HeadroomError extends Error {
  readonly code: string;
  /** When set, the same request may succeed after this many milliseconds. */
  readonly retryAfterMs: number | undefined;

  constructor(code: string, message: string, options?: { cause?: unknown; retryAfterMs?: number }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'HeadroomError';
    this.code = code;
    this.retryAfterMs = options?.retryAfterMs;
  }
}

/** A setting (config file, env variable, CLI flag) has a value we cannot use. */
export class ConfigError extends HeadroomError {
  constructor(message: string) {
    super('HR_ERR_CONFIG', message);
    this.name = 'ConfigError';
  }
}

export function isHeadroomError(error: unknown, code?: string): error is HeadroomError {
  return error instanceof HeadroomError && (code === undefined || error.code === code);
}
