import { useCallback, useEffect, useState } from 'react';
import type { LimitsView } from '../../api/types';

/** Charts opened on their own per cluster: each polls its series, so a page of 200 integrations polls a few. */
export const maxChartsOpenByDefault = 6;

const keyOf = (cluster: string, integration: string) => `${cluster}/${integration}`;

/**
 * Which integrations show their chart: those with a limit of their own or with tasks in flight,
 * waiting or refused open on their own (a few per cluster) and stay open; an operator opens or
 * closes any, and one closed by hand stays closed.
 */
export function useOpenCharts(view: LimitsView | undefined) {
  const [open, setOpen] = useState<ReadonlySet<string>>(new Set());
  const [closedByHand, setClosedByHand] = useState<ReadonlySet<string>>(new Set());

  useEffect(() => {
    if (!view) return;
    setOpen((current) => {
      const next = new Set(current);
      for (const cluster of view.clusters) {
        let opened = cluster.integrations.filter((row) => next.has(keyOf(cluster.cluster, row.integration))).length;
        for (const row of cluster.integrations) {
          const key = keyOf(cluster.cluster, row.integration);
          if (opened >= maxChartsOpenByDefault) break;
          if (next.has(key) || closedByHand.has(key)) continue;
          if (row.source === 'own' || row.inflight > 0 || row.waiting > 0 || (row.refused ?? 0) > 0) {
            next.add(key);
            opened++;
          }
        }
      }
      return next.size === current.size ? current : next;
    });
  }, [view, closedByHand]);

  const isOpen = useCallback((cluster: string, integration: string) => open.has(keyOf(cluster, integration)), [open]);
  const toggle = useCallback(
    (cluster: string, integration: string) => {
      const key = keyOf(cluster, integration);
      const closing = open.has(key);
      setOpen((current) => {
        const next = new Set(current);
        if (closing) next.delete(key);
        else next.add(key);
        return next;
      });
      setClosedByHand((current) => {
        const next = new Set(current);
        if (closing) next.add(key);
        else next.delete(key);
        return next;
      });
    },
    [open],
  );
  return { isOpen, toggle };
}
