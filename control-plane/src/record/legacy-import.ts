import type { Logger } from '@headroom/common';
import { controlKeys, type RedisConnection } from '@headroom/fleet';
import type { NewAuditEntry } from './audit-entry';
import type { AuditStore } from './audit-store';
import { advisoryLockKey, type Database } from './database';

/** Entries read from the stream per call, and calls at most (the stream was capped at 10,000 by default). */
const batchEntries = 500;
const maxBatches = 200;

/**
 * Before the audit log was in PostgreSQL it was a Redis stream (`{<prefix>:control}:audit`, field
 * `entry` -> JSON). At start, what such a stream still holds is copied into PostgreSQL, oldest
 * first and with its own times, then the stream is deleted. Each entry is copied once (its stream
 * id is kept, unique), and replicas starting together take turns (an advisory lock), so their
 * copies neither repeat nor interleave. Never fails the start: a problem is logged and the copy is
 * tried again at the next start. Returns how many entries were copied.
 */
export async function importLegacyAuditStream(deps: {
  database: Database;
  store: AuditStore;
  redis: RedisConnection;
  keyPrefix: string;
  logger: Logger;
}): Promise<number> {
  const key = `${controlKeys(deps.keyPrefix).hashTag}:audit`;
  let imported = 0;
  try {
    if ((await deps.redis.exists(key)) === 0) return 0;
    const client = await deps.database.pool.connect();
    let broken = false;
    try {
      await client.query('BEGIN');
      await client.query('SELECT pg_advisory_xact_lock($1)', [advisoryLockKey(`headroom.legacy-audit-import:${deps.database.schema}`)]);
      let start = '-';
      for (let batch = 0; batch < maxBatches; batch++) {
        const rows = await deps.redis.xrange(key, start, '+', 'COUNT', batchEntries);
        for (const [id, fields] of rows) {
          const parsed = parseEntry(fields[fields.indexOf('entry') + 1]);
          if (!parsed) {
            deps.logger.warn({ key, id }, 'an entry of the old Redis audit stream is not one: not copied');
            continue;
          }
          const atUnixMs = typeof parsed.atUnixMs === 'number' ? parsed.atUnixMs : Number(id.split('-')[0]);
          if (
            await deps.store.importLegacy(
              client,
              { ...parsed, target: String(parsed.target ?? ''), outcome: parsed.outcome === 'failed' ? 'failed' : 'ok', atUnixMs },
              id,
            )
          )
            imported++;
        }
        if (rows.length < batchEntries) break;
        start = `(${rows.at(-1)![0]}`;
      }
      await client.query('COMMIT');
    } catch (error) {
      broken = true;
      await client.query('ROLLBACK').catch(() => undefined);
      throw error;
    } finally {
      client.release(broken ? true : undefined);
    }
    await deps.redis.del(key);
    if (imported > 0) deps.logger.info({ imported, key }, 'copied the audit log of the Redis stream into PostgreSQL');
  } catch (error) {
    deps.logger.warn({ err: error, key }, 'could not copy the old Redis audit stream into PostgreSQL; trying again at the next start');
    return 0;
  }
  return imported;
}

function parseEntry(json: string | undefined): (NewAuditEntry & { atUnixMs?: number }) | undefined {
  if (json === undefined) return undefined;
  try {
    const parsed = JSON.parse(json) as (NewAuditEntry & { atUnixMs?: number }) | null;
    return parsed && typeof parsed === 'object' && typeof parsed.actor === 'string' && typeof parsed.action === 'string' ? parsed : undefined;
  } catch {
    return undefined;
  }
}
