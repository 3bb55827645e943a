import type { RedisConnection } from '@headroom/fleet';
import { LedgerUnavailableError, controlKeys } from '@headroom/fleet';

export type AuditAction = 'traffic.set' | 'parallelism.set' | 'rollback' | 'resume' | 'worker.drain' | 'override.rebuild' | 'profile.start';

export interface AuditEntry {
  /** Redis stream id: orders entries, usable as a cursor. */
  id: string;
  atUnixMs: number;
  /** The token's name, or "control-plane" for the control plane's own repairs. */
  actor: string;
  action: AuditAction;
  /** What it applies to: "all", an integration, a cluster, a worker id. */
  target: string;
  before: unknown;
  after: unknown;
  outcome: 'ok' | 'failed';
  error?: string;
  /** Why, as the operator gave it (rollback, resume, drain). */
  reason?: string;
}

export type NewAuditEntry = Omit<AuditEntry, 'id' | 'atUnixMs'>;

/**
 * Every change, who made it, when, before and after, in a Redis stream capped at
 * `maxEntries` (oldest dropped), and announced on a channel for the live event stream.
 */
export class AuditLog {
  readonly key: string;
  readonly channel: string;

  constructor(
    private readonly redis: RedisConnection,
    keyPrefix: string,
    private readonly maxEntries: number,
  ) {
    const keys = controlKeys(keyPrefix);
    this.key = keys.audit;
    this.channel = keys.auditAppendedChannel;
  }

  async append(entry: NewAuditEntry): Promise<AuditEntry> {
    const atUnixMs = Date.now();
    const json = JSON.stringify({ ...entry, atUnixMs });
    try {
      const id = (await this.redis.xadd(this.key, 'MAXLEN', '~', this.maxEntries, '*', 'entry', json)) as string;
      const full: AuditEntry = { id, atUnixMs, ...entry };
      await this.redis.publish(this.channel, JSON.stringify(full));
      return full;
    } catch (error) {
      throw new LedgerUnavailableError('audit append', error);
    }
  }

  /** Newest first; `beforeId` pages back. */
  async list(limit: number, beforeId?: string): Promise<AuditEntry[]> {
    try {
      const rows = await this.redis.xrevrange(this.key, beforeId ? `(${beforeId}` : '+', '-', 'COUNT', limit);
      return rows.map(([id, fields]) => ({ id, ...(JSON.parse(fields[1] ?? '{}') as Omit<AuditEntry, 'id'>) }));
    } catch (error) {
      throw new LedgerUnavailableError('audit read', error);
    }
  }
}
