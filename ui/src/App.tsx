import { AppShell } from './components/AppShell';
import { LiveProvider } from './live';
import { AuditPage } from './pages/AuditPage';
import { LoginPage } from './pages/LoginPage';
import { OverviewPage } from './pages/OverviewPage';
import { ParallelismPage } from './pages/ParallelismPage';
import { LimitsPage } from './pages/LimitsPage';
import { RollbackPage } from './pages/RollbackPage';
import { RolloutsPage } from './pages/RolloutsPage';
import { TrafficPage } from './pages/TrafficPage';
import { WorkersPage } from './pages/WorkersPage';
import { Link, useRoute, type RoutePath } from './router';
import { SessionGate } from './session';

const pages: Record<RoutePath, () => React.JSX.Element> = {
  '/': OverviewPage,
  '/traffic': TrafficPage,
  '/rollouts': RolloutsPage,
  '/rollback': RollbackPage,
  '/parallelism': ParallelismPage,
  '/limits': LimitsPage,
  '/workers': WorkersPage,
  '/audit': AuditPage,
};

export function App() {
  const route = useRoute();
  const Page = route === undefined ? undefined : pages[route];
  return (
    <SessionGate signIn={(submit, error) => <LoginPage submit={submit} error={error} />}>
      <LiveProvider>
        <AppShell current={route}>
          {Page ? (
            <Page />
          ) : (
            <>
              <h1>No such page</h1>
              <p>
                <Link to="/">Go to the overview</Link>
              </p>
            </>
          )}
        </AppShell>
      </LiveProvider>
    </SessionGate>
  );
}
