import { useCallback, useState } from 'react';

export type ActionState<T> =
  { status: 'idle' } | { status: 'running' } | { status: 'done'; result: T; atUnixMs: number } | { status: 'failed'; error: unknown };

/**
 * One change the user makes (a PUT or POST): its result or its error, for the page to show.
 * `run` never rejects, so it can be handed to a dialog as is.
 */
export function useAction<T>(): [ActionState<T>, (change: () => Promise<T>) => Promise<void>, () => void] {
  const [state, setState] = useState<ActionState<T>>({ status: 'idle' });
  const run = useCallback(async (change: () => Promise<T>) => {
    setState({ status: 'running' });
    try {
      const result = await change();
      setState({ status: 'done', result, atUnixMs: Date.now() });
    } catch (error) {
      setState({ status: 'failed', error });
    }
  }, []);
  const reset = useCallback(() => setState({ status: 'idle' }), []);
  return [state, run, reset];
}
