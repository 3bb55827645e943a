import { createContext, useContext, useEffect, useRef, useState, type ReactNode } from 'react';
import { followEventStream, type StreamStatus } from './api/event-stream';
import type { AuditEntry, Figures, OverrideChangeRecord } from './api/types';
import { useSession } from './session';

export interface Live {
  /** The latest figures; undefined until the first arrives. */
  figures: Figures | undefined;
  status: StreamStatus;
  /** Calls `listener` with each audit entry as it is appended; returns the unsubscribe. */
  onChange(listener: (entry: AuditEntry) => void): () => void;
  /** Calls `listener` with each rollback or resume when answered and when its Unleash write ends; returns the unsubscribe. */
  onOverrideChange(listener: (record: OverrideChangeRecord) => void): () => void;
}

const LiveContext = createContext<Live | undefined>(undefined);

export function useLive(): Live {
  const live = useContext(LiveContext);
  if (!live) throw new Error('useLive outside LiveProvider');
  return live;
}

/** One event stream per signed-in tab, shared by every page. */
export function LiveProvider({ children }: { children: ReactNode }) {
  const { client, signOut } = useSession();
  const [figures, setFigures] = useState<Figures | undefined>();
  const [status, setStatus] = useState<StreamStatus>({ state: 'connecting' });
  const listeners = useRef(new Set<(entry: AuditEntry) => void>());
  const overrideListeners = useRef(new Set<(record: OverrideChangeRecord) => void>());

  useEffect(() => {
    const abort = new AbortController();
    void followEventStream(
      client,
      {
        onStatus(next) {
          setStatus(next);
          if (next.state === 'refused') signOut(`the control plane no longer accepts your token (${next.reason})`);
        },
        onEvent({ event, data }) {
          let parsed: unknown;
          try {
            parsed = JSON.parse(data);
          } catch {
            return;
          }
          // `ack` events are not used: a change's answer lists its acknowledgements, and figures carry each balancer's version.
          if (event === 'figures') setFigures(parsed as Figures);
          else if (event === 'change') listeners.current.forEach((listener) => listener(parsed as AuditEntry));
          else if (event === 'override-change') overrideListeners.current.forEach((listener) => listener(parsed as OverrideChangeRecord));
        },
      },
      abort.signal,
    );
    return () => abort.abort();
  }, [client, signOut]);

  const [live] = useState(() => ({
    onChange(listener: (entry: AuditEntry) => void) {
      listeners.current.add(listener);
      return () => void listeners.current.delete(listener);
    },
    onOverrideChange(listener: (record: OverrideChangeRecord) => void) {
      overrideListeners.current.add(listener);
      return () => void overrideListeners.current.delete(listener);
    },
  }));

  return <LiveContext.Provider value={{ ...live, figures, status }}>{children}</LiveContext.Provider>;
}
