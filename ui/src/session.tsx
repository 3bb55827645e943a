import { createContext, useCallback, useContext, useEffect, useMemo, useState, type ReactNode } from 'react';
import { ApiClient, isApiError } from './api/client';
import type { Session } from './api/types';

/** Kept for the browser tab only: closing it forgets the token. */
const tokenStorageKey = 'headroom.apiToken';

export interface SignedIn extends Session {
  client: ApiClient;
  /** Operators change things; viewers only look. */
  canChange: boolean;
  /** `reason` is shown on the sign-in page. */
  signOut(reason?: string): void;
}

type SessionState = { state: 'checking' } | { state: 'signed-out'; error?: string } | { state: 'signed-in'; session: Session; client: ApiClient };

const SessionContext = createContext<SignedIn | undefined>(undefined);

/** The signed-in session; only for components rendered inside a signed-in SessionGate. */
export function useSession(): SignedIn {
  const session = useContext(SessionContext);
  if (!session) throw new Error('useSession outside a signed-in SessionGate');
  return session;
}

/** Why a control is disabled for this session, or undefined when it is enabled. */
export function useWhyReadOnly(): string | undefined {
  const session = useSession();
  return session.canChange ? undefined : `You are signed in as ${session.name}, a viewer: changes need an operator's token.`;
}

/** Asks the control plane who a token belongs to; throws an ApiError (401 for a bad token). */
async function identify(client: ApiClient): Promise<Session> {
  try {
    return await client.get<Session>('/session');
  } catch (error) {
    if (isApiError(error) && error.code === 'HR_ERR_NOT_FOUND') {
      throw new Error('this control plane has no GET /api/v1/session: it is older than this UI; update the control plane');
    }
    throw error;
  }
}

/** Shows `signIn` until a token is accepted, then `children` with the session in context. */
export function SessionGate(props: { signIn: (submit: (token: string) => Promise<void>, error: string | undefined) => ReactNode; children: ReactNode }) {
  const [state, setState] = useState<SessionState>(() => (sessionStorage.getItem(tokenStorageKey) ? { state: 'checking' } : { state: 'signed-out' }));

  const submit = useCallback(async (token: string) => {
    const client = new ApiClient(token);
    const session = await identify(client);
    sessionStorage.setItem(tokenStorageKey, token);
    setState({ state: 'signed-in', session, client });
  }, []);

  // A token kept from earlier in this tab: check it again (it may have been revoked).
  useEffect(() => {
    const token = sessionStorage.getItem(tokenStorageKey);
    if (!token || state.state !== 'checking') return;
    submit(token).catch((error: unknown) => {
      sessionStorage.removeItem(tokenStorageKey);
      setState({ state: 'signed-out', error: `Signed out: ${error instanceof Error ? error.message : String(error)}` });
    });
  }, [state.state, submit]);

  const signOut = useCallback((reason?: string) => {
    sessionStorage.removeItem(tokenStorageKey);
    setState(reason === undefined ? { state: 'signed-out' } : { state: 'signed-out', error: reason });
  }, []);

  const value = useMemo<SignedIn | undefined>(
    () => (state.state === 'signed-in' ? { ...state.session, client: state.client, canChange: state.session.role === 'operator', signOut } : undefined),
    [state, signOut],
  );

  if (state.state === 'checking') return <p className="page-message">Checking your token…</p>;
  if (!value) return <>{props.signIn(submit, state.state === 'signed-out' ? state.error : undefined)}</>;
  return <SessionContext.Provider value={value}>{props.children}</SessionContext.Provider>;
}
