import { isApiError } from '../api/client';

/**
 * An error as the control plane stated it: its message verbatim (as text), the fields it
 * named, what Unleash had and had not applied, and, for a change, whether anything changed.
 */
export function ErrorNotice({ error, action, change = false }: { error: unknown; action?: string; change?: boolean }) {
  if (error === undefined || error === null) return null;
  if (!isApiError(error)) {
    return (
      <div className="notice notice-error" role="alert">
        <p className="notice-title">{action ? `${action} failed` : 'Something failed'}</p>
        <p>{error instanceof Error ? error.message : String(error)}</p>
      </div>
    );
  }
  const heading = error.status === 0 ? 'No answer from the control plane' : `The control plane answered HTTP ${error.status} (${error.code})`;
  return (
    <div className="notice notice-error" role="alert">
      <p className="notice-title">
        {action ? `${action} failed. ` : ''}
        {heading}
      </p>
      <p className="notice-message">{error.message}</p>
      {error.fields.length > 0 && (
        <ul className="notice-fields">
          {error.fields.map((problem, i) => (
            <li key={i}>
              <code>{problem.field}</code>: {problem.message}
            </li>
          ))}
        </ul>
      )}
      {error.unleash?.applied && error.unleash.applied.length > 0 && (
        <p>
          Applied in Unleash before it failed, and <strong>not</strong> taken back: {error.unleash.applied.join(', ')}.
        </p>
      )}
      {error.unleash?.undone && error.unleash.undone.length > 0 && <p>Applied, then taken back (not changed): {error.unleash.undone.join(', ')}.</p>}
      {error.unleash?.status !== undefined && <p>Unleash answered HTTP {error.unleash.status}.</p>}
      {change && error.changedNothing && !/nothing was (changed|started)/i.test(error.message) && <p>Nothing was changed.</p>}
      {change && error.outcomeUnknown && <p>Whether a change was made is not known: the page reloads the current state; check it before trying again.</p>}
    </div>
  );
}
