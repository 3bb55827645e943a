import type { ReactNode } from 'react';
import type { StreamStatus } from '../api/event-stream';
import { useLive } from '../live';
import { Link, routes, type RoutePath } from '../router';
import { useSession } from '../session';
import { Truncated } from './Truncated';

/** Header (navigation, live status, who is signed in) around a page. */
export function AppShell({ current, children }: { current: RoutePath | undefined; children: ReactNode }) {
  const session = useSession();
  const { status } = useLive();
  return (
    <div className="shell">
      <header className="topbar">
        <span className="brand">Headroom</span>
        <nav aria-label="Pages" className="nav">
          {routes.map((route) => (
            <Link key={route.path} to={route.path} className="nav-link" current={route.path === current}>
              {route.title}
            </Link>
          ))}
        </nav>
        <div className="topbar-end">
          <StreamIndicator status={status} />
          <span className="who">
            <Truncated text={session.name} />
            <span className={`role role-${session.role}`}>{session.role}</span>
          </span>
          <button type="button" className="button-quiet" onClick={() => session.signOut()}>
            Sign out
          </button>
        </div>
      </header>
      <main className="page">{children}</main>
    </div>
  );
}

function StreamIndicator({ status }: { status: StreamStatus }) {
  const [label, detail] =
    status.state === 'live'
      ? ['live', 'Receiving live figures from the control plane']
      : status.state === 'connecting'
        ? ['connecting…', 'Opening the event stream']
        : status.state === 'retrying'
          ? ['reconnecting', `The event stream failed (${status.reason}); trying again`]
          : ['stopped', status.reason];
  return (
    <span className={`stream stream-${status.state}`} title={detail} role="status">
      <span className="stream-dot" aria-hidden="true" />
      {label}
    </span>
  );
}
