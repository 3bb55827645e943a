import { useEffect, useState, type MouseEvent, type ReactNode } from 'react';

/**
 * History-API routing: the control plane answers every non-/api path with index.html, so
 * /workers can be bookmarked and reloaded.
 */
export const routes = [
  { path: '/', title: 'Overview' },
  { path: '/traffic', title: 'Traffic' },
  { path: '/rollouts', title: 'Rollouts' },
  { path: '/rollback', title: 'Rollback' },
  { path: '/parallelism', title: 'Parallelism' },
  { path: '/limits', title: 'Limits' },
  { path: '/workers', title: 'Workers' },
  { path: '/audit', title: 'Audit' },
] as const;

export type RoutePath = (typeof routes)[number]['path'];

const navigated = 'headroom:navigated';

export function navigate(path: string): void {
  if (path === location.pathname) return;
  history.pushState(null, '', path);
  window.dispatchEvent(new Event(navigated));
}

/** The current route; an unknown path is undefined (the app shows "no such page"). */
export function useRoute(): RoutePath | undefined {
  const [pathname, setPathname] = useState(location.pathname);
  useEffect(() => {
    const update = () => setPathname(location.pathname);
    window.addEventListener('popstate', update);
    window.addEventListener(navigated, update);
    return () => {
      window.removeEventListener('popstate', update);
      window.removeEventListener(navigated, update);
    };
  }, []);
  const normalised = pathname.length > 1 ? pathname.replace(/\/+$/, '') : pathname;
  return routes.find((route) => route.path === normalised)?.path;
}

/** A real link (middle-click and "open in new tab" work) that navigates in place on a plain click. */
export function Link(props: { to: string; className?: string; current?: boolean; children: ReactNode }) {
  const onClick = (event: MouseEvent<HTMLAnchorElement>) => {
    if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey || event.altKey) return;
    event.preventDefault();
    navigate(props.to);
  };
  return (
    <a href={props.to} className={props.className} aria-current={props.current ? 'page' : undefined} onClick={onClick}>
      {props.children}
    </a>
  );
}
