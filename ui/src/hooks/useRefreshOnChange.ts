import { useEffect } from 'react';
import { useLive } from '../live';

/**
 * Calls `refresh` when the audit log records one of `actions` (made by anyone, through any
 * control plane), so a page shows another operator's change without waiting for its next poll.
 */
export function useRefreshOnChange(actions: readonly string[], refresh: () => void): void {
  // onChange is stable; the object useLive returns is new with every figures event.
  const { onChange } = useLive();
  const key = actions.join(',');
  useEffect(() => onChange((entry) => key.split(',').includes(entry.action) && refresh()), [onChange, key, refresh]);
}
