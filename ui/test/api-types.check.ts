/**
 * A compile-time check, no test to run: what the control plane answers (its own types) must
 * fit the UI's view of the API (src/api/types.ts, kept free of server packages so the browser
 * build needs none). A renamed or retyped field fails `tsc --build` here, not in a browser.
 */
import type * as Ui from '../src/api/types';
import type {
  AuditEntry,
  BalancerView,
  Caller,
  ClusterSummary,
  IntegrationHealthView,
  LatencySeries,
  LimitsView,
  LimitSeriesView,
  OverrideChangeRecord,
  ProfileRecord,
  RollbackRecord,
  Rollout,
  RolloutsView,
  TrafficView,
  WorkerSummary,
} from '@headroom/control-plane';
import type { OverrideState } from '@headroom/fleet';

type Fits<Server, Client> = Server extends Client ? true : never;

export const apiTypesFit: [
  Fits<Caller, Ui.Session>,
  Fits<LimitsView, Ui.LimitsView>,
  Fits<LimitSeriesView, Ui.LimitSeriesView>,
  Fits<ClusterSummary, Ui.ClusterSummary>,
  Fits<WorkerSummary, Ui.WorkerSummary>,
  Fits<BalancerView, Ui.BalancerView>,
  Fits<OverrideState, Ui.OverrideState>,
  Fits<TrafficView, Ui.TrafficView>,
  Fits<RollbackRecord, Ui.RollbackRecord>,
  Fits<OverrideChangeRecord, Ui.OverrideChangeRecord>,
  Fits<AuditEntry, Ui.AuditEntry>,
  Fits<LatencySeries, Ui.LatencySeries>,
  Fits<IntegrationHealthView, Ui.IntegrationHealthView>,
  Fits<ProfileRecord, Ui.ProfileRecord>,
  Fits<Rollout, Ui.Rollout>,
  Fits<RolloutsView, Ui.RolloutsView>,
] = [true, true, true, true, true, true, true, true, true, true, true, true, true, true, true, true];
