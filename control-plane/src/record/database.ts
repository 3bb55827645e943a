import { createHash } from 'node:crypto';
import pg from 'pg';
import { HeadroomError, withoutPassword, type Logger } from '@headroom/common';
import type { DatabaseConfig } from '../config';
import { apiErrorCodes } from '../errors';

/** The control plane's PostgreSQL: a pool, and the schema its tables live in. */
export interface Database {
  readonly pool: pg.Pool;
  /** The schema, quoted for SQL ("headroom"): validated by the config, so safe to interpolate. */
  readonly schema: string;
  /** Where it is, without the password: for messages. */
  readonly where: string;
  close(): Promise<void>;
}

export function openDatabase(config: DatabaseConfig, logger: Logger): Database {
  const pool = new pg.Pool({
    connectionString: config.url,
    max: config.poolMax,
    connectionTimeoutMillis: config.connectTimeoutMs,
    // Server side, and client side for a server that stopped answering without closing.
    statement_timeout: config.statementTimeoutMs,
    query_timeout: config.statementTimeoutMs + 1000,
    keepAlive: true,
    idleTimeoutMillis: 30_000,
    // Idle connections do not keep a process that is done from exiting.
    allowExitOnIdle: true,
    application_name: 'headroom-control-plane',
  });
  // A connection that breaks while idle, or while a client is checked out between queries, emits
  // 'error'; unheard, that would end the process. The next query on it fails, and says so.
  pool.on('error', (error) => logger.warn({ err: error }, 'a PostgreSQL connection broke'));
  pool.on('connect', (client) => client.on('error', (error) => logger.warn({ err: error }, 'a PostgreSQL connection broke')));
  let closed: Promise<void> | undefined;
  return {
    pool,
    schema: `"${config.schema}"`,
    where: withoutPassword(config.url),
    close: () => (closed ??= pool.end().catch(() => undefined)),
  };
}

/** PostgreSQL could not be reached (or did not answer in time): whatever asked for it changed nothing. */
export function databaseUnavailable(database: Database, what: string, cause: unknown): HeadroomError {
  return new HeadroomError(apiErrorCodes.databaseUnavailable, `PostgreSQL (${database.where}) could not be reached for ${what}: ${messageOf(cause)}`, {
    cause,
    retryAfterMs: 2000,
  });
}

/** A 64-bit advisory lock key from a name: every control plane derives the same one. */
export function advisoryLockKey(name: string): string {
  return createHash('sha256').update(name).digest().readBigInt64BE(0).toString();
}

export function messageOf(error: unknown): string {
  if (error instanceof AggregateError && error.errors.length > 0) return error.errors.map(messageOf).join('; ');
  return error instanceof Error ? error.message || error.constructor.name : String(error);
}
