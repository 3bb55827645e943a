import { useCallback } from 'react';
import type { TrafficView } from '../api/types';
import { ErrorNotice } from '../components/ErrorNotice';
import { usePolled } from '../hooks/usePolled';
import { useLive } from '../live';
import { useSession } from '../session';
import { formatTime } from '../format';
import { ActiveRollout } from './overview/ActiveRollout';
import { ClusterCards } from './overview/ClusterCards';
import { IntegrationTrouble } from './overview/IntegrationTrouble';
import { ChartsNote, ClusterCharts, RatioCharts, useLatencyCharts } from './overview/LatencyCharts';
import { QueueDepths } from './overview/QueueDepths';
import { TrafficSplit } from './overview/TrafficSplit';

/** What an operator keeps open during a rollout: the clusters and the latency ratio first. */
export function OverviewPage() {
  const { figures } = useLive();
  const { client } = useSession();
  const loadTraffic = useCallback((signal: AbortSignal) => client.get<TrafficView>('/traffic', signal), [client]);
  const traffic = usePolled(loadTraffic, 5000);
  const charts = useLatencyCharts();
  return (
    <>
      <div className="page-head">
        <h1>Overview</h1>
        <span className="muted">{figures ? `figures of ${formatTime(figures.atUnixMs)}` : ''}</span>
      </div>
      <ActiveRollout />
      <section aria-label="Clusters" className="section">
        <ClusterCards clusters={figures?.clusters} />
      </section>
      <section aria-labelledby="integrations-title" className="section">
        <h2 id="integrations-title">Integrations against their own recent past</h2>
        <IntegrationTrouble />
      </section>
      <section aria-labelledby="ratio-title" className="section">
        <h2 id="ratio-title">Latency ratio, last 10 minutes</h2>
        <ChartsNote charts={charts} />
        <RatioCharts charts={charts} />
      </section>
      <div className="two-columns">
        <section aria-labelledby="split-title" className="section card">
          <h2 id="split-title">Traffic to the candidate</h2>
          <TrafficSplit traffic={traffic.data} />
          <ErrorNotice error={traffic.error} action="Loading the traffic split" />
        </section>
        <section aria-labelledby="queues-title" className="section card">
          <h2 id="queues-title">Waiting for a slot</h2>
          <QueueDepths balancers={figures?.balancers} />
        </section>
      </div>
      <section aria-labelledby="cluster-charts-title" className="section">
        <h2 id="cluster-charts-title">Latency and throughput by cluster</h2>
        <ClusterCharts charts={charts} />
      </section>
    </>
  );
}
