/**
 * What the audit log records, as PostgreSQL holds it (audit-store.ts) and as the API shows it:
 * apart from AuditLog (../audit.ts), which writes entries through the store, so that the store
 * does not depend on its caller.
 */
export type AuditAction =
  | 'traffic.set'
  | 'parallelism.set'
  | 'rollback'
  | 'resume'
  | 'worker.drain'
  | 'override.rebuild'
  | 'profile.start'
  | 'rollout.start'
  | 'rollout.pause'
  | 'rollout.resume'
  | 'rollout.abort'
  | 'rollout.decision'
  | 'limit.set'
  | 'limit.remove'
  | 'limit.reapply'
  | 'limit.auto';

export interface AuditEntry {
  /** PostgreSQL's id, a whole number as text: orders entries as they were written, usable as a cursor. */
  id: string;
  /** When it happened (an entry kept in the outbox while PostgreSQL was away keeps this time). */
  atUnixMs: number;
  /** The token's name, or "control-plane" for the control plane's own repairs. */
  actor: string;
  action: AuditAction;
  /** What it applies to: "all", an integration, a cluster, a worker id. */
  target: string;
  /** What was asked: the request's body as validated (absent for the control plane's own repairs). */
  request?: unknown;
  before: unknown;
  after: unknown;
  outcome: 'ok' | 'failed';
  error?: string;
  /** Why, as the operator gave it (rollback, resume, drain). */
  reason?: string;
}

/**
 * `idempotencyKey`: an entry with the key of one already written is not written again (the
 * autopilot's entries, which any control plane may write when it finishes a decision).
 */
export type NewAuditEntry = Omit<AuditEntry, 'id' | 'atUnixMs'> & { idempotencyKey?: string };
