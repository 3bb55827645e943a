import { useState, type FormEvent } from 'react';
import { ErrorNotice } from '../components/ErrorNotice';

/** Sign in with an API token (an operator's changes things; a viewer's only looks). */
export function LoginPage({ submit, error: earlierError }: { submit: (token: string) => Promise<void>; error: string | undefined }) {
  const [token, setToken] = useState('');
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(earlierError);

  const onSubmit = async (event: FormEvent) => {
    event.preventDefault();
    const trimmed = token.trim();
    if (trimmed === '') {
      setError(new Error('Enter an API token: `npm start` prints an operator and a viewer token.'));
      return;
    }
    setBusy(true);
    setError(undefined);
    try {
      await submit(trimmed);
    } catch (failure) {
      setError(failure);
      setBusy(false);
    }
  };

  return (
    <main className="login">
      <form className="login-form" onSubmit={(event) => void onSubmit(event)} aria-labelledby="login-title">
        <h1 id="login-title">Headroom</h1>
        <p>Sign in with your API token.</p>
        <label htmlFor="token">API token</label>
        <input id="token" type="password" autoComplete="off" spellCheck={false} value={token} onChange={(event) => setToken(event.target.value)} autoFocus />
        <button type="submit" className="button-primary" disabled={busy}>
          {busy ? 'Checking…' : 'Sign in'}
        </button>
        {error !== undefined && <ErrorNotice error={typeof error === 'string' ? new Error(error) : error} action="Signing in" />}
        <p className="hint">The token is kept in this browser tab only, until you sign out or close it.</p>
      </form>
    </main>
  );
}
