import { useCallback, useEffect, useState } from 'react';

export interface Polled<T> {
  /** The last answer; kept while a later call fails. */
  data: T | undefined;
  /** Why the last call failed; undefined after a success. */
  error: unknown;
  /** Loads now (e.g. after a change) instead of at the next tick. */
  refresh(): void;
  /** Takes a fresher answer obtained otherwise (a change's response). */
  set(value: T): void;
}

/**
 * Calls `load` now and every `intervalMs` while the component is shown (and the tab visible),
 * one call at a time (the next is scheduled when one ends). `load` must be stable (useCallback) or it restarts the polling.
 */
export function usePolled<T>(load: (signal: AbortSignal) => Promise<T>, intervalMs: number): Polled<T> {
  const [data, setData] = useState<T | undefined>();
  const [error, setError] = useState<unknown>();
  const [tick, setTick] = useState(0);

  useEffect(() => {
    const abort = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    const run = async () => {
      try {
        const value = await load(abort.signal);
        if (!abort.signal.aborted) {
          setData(value);
          setError(undefined);
        }
      } catch (failure) {
        if (!abort.signal.aborted) setError(failure);
      } finally {
        if (!abort.signal.aborted) timer = setTimeout(() => void run(), document.hidden ? intervalMs * 5 : intervalMs);
      }
    };
    void run();
    return () => {
      abort.abort();
      clearTimeout(timer);
    };
  }, [load, intervalMs, tick]);

  const refresh = useCallback(() => setTick((n) => n + 1), []);
  const set = useCallback((value: T) => {
    setData(value);
    setError(undefined);
  }, []);
  return { data, error, refresh, set };
}
