import { useCallback } from 'react';
import type { Rollout, RolloutsView } from '../api/types';
import { useSession } from '../session';
import { usePolled, type Polled } from './usePolled';
import { useRefreshOnChange } from './useRefreshOnChange';

/** Every audit action a rollout makes: operators' (start, pause, resume, abort) and the autopilot's decisions. */
export const rolloutActions = ['rollout.start', 'rollout.pause', 'rollout.resume', 'rollout.abort', 'rollout.decision'] as const;

/**
 * GET /rollouts, polled (the gates' reading and what the autopilot waits for change at every
 * tick without an audit entry) and loaded again at once when a rollout's audit entry arrives.
 */
export function useRollouts(intervalMs: number): Polled<RolloutsView> {
  const { client } = useSession();
  const load = useCallback((signal: AbortSignal) => client.get<RolloutsView>('/rollouts', signal), [client]);
  const rollouts = usePolled(load, intervalMs);
  useRefreshOnChange(rolloutActions, rollouts.refresh);
  return rollouts;
}

/** Running or paused: the autopilot may still act on it, an operator may still pause or abort it. */
export function isActive(rollout: Rollout | null | undefined): rollout is Rollout {
  return rollout?.status === 'running' || rollout?.status === 'paused';
}
