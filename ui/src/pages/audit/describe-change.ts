/**
 * An audit entry's before and after as a few readable lines ("integrations.bank-a.percent:
 * 50 → 80"), for the audit table; the whole JSON stays a click away.
 */

/** Lines shown per entry; the rest are counted. */
const maxLines = 6;

type Leaf = string | number | boolean | null;

export function describeChange(action: string, before: unknown, after: unknown): string[] {
  if ((action === 'rollback' || action === 'resume') && isObject(after) && isObject(after.override)) {
    const back = scopeOf(after.override);
    const state = action === 'rollback' ? `${back} to the baseline` : back === 'nothing' ? 'nothing rolled back now' : `still rolled back: ${back}`;
    const lines = [`override version ${String(after.override.version)}: ${state}`];
    if (typeof after.acknowledged === 'number')
      lines.push(
        `acknowledged by ${after.acknowledged} balancer${after.acknowledged === 1 ? '' : 's'}${typeof after.propagationMs === 'number' ? ` in ${after.propagationMs} ms` : ''}`,
      );
    if (Array.isArray(after.missing) && after.missing.length > 0) lines.push(`not acknowledged: ${after.missing.join(', ')}`);
    if (after.durable === 'failed') lines.push('not durable: Unleash was not updated');
    return lines;
  }
  if (action.startsWith('rollout.') && isObject(after) && typeof after.name === 'string') {
    // The reason says what was decided and why; the gates' figures are in the JSON.
    const step = typeof after.step === 'number' ? `, step ${after.step + 1}` : '';
    return [`rollout ${after.name}: ${String(after.kind ?? action.slice('rollout.'.length))}${step}, ${String(after.status)}`];
  }
  const was = flatten(before);
  const now = flatten(after);
  const lines: string[] = [];
  for (const path of new Set([...was.keys(), ...now.keys()])) {
    const from = was.get(path);
    const to = now.get(path);
    if (from === to) continue;
    lines.push(`${path || 'value'}: ${show(from)} → ${show(to)}`);
  }
  if (lines.length <= maxLines) return lines;
  return [...lines.slice(0, maxLines - 1), `and ${lines.length - maxLines + 1} more`];
}

function scopeOf(override: Record<string, unknown>): string {
  if (override.all === true) return 'everything';
  return Array.isArray(override.integrations) && override.integrations.length > 0 ? override.integrations.join(', ') : 'nothing';
}

/** Leaf values by dotted path; arrays count as one value; a side that is null as a whole has none. */
function flatten(value: unknown, prefix = '', into = new Map<string, Leaf>()): Map<string, Leaf> {
  if (value === null && prefix === '') return into;
  if (isObject(value)) {
    for (const [key, inner] of Object.entries(value)) flatten(inner, prefix ? `${prefix}.${key}` : key, into);
  } else if (Array.isArray(value)) {
    into.set(prefix, value.length === 0 ? '[]' : value.map((item) => (typeof item === 'object' ? JSON.stringify(item) : String(item))).join(', '));
  } else if (value !== undefined) {
    into.set(prefix, value as Leaf);
  }
  return into;
}

function show(value: Leaf | undefined): string {
  if (value === undefined) return '—';
  if (value === null) return 'none';
  return String(value);
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
