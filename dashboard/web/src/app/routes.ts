// The dashboard's pages and how to go to one: the only module that moves
// the browser between pages. Pages import it; App renders the page a path
// names (no page imports App).

/** The page paths: "/", "/runtimes", "/cluster", "/create[?from=NS/NAME[&resubmit=true]]", "/jobs/NS/NAME[?tab=TAB]", "/login". */
export const paths = {
  jobs: () => '/',
  runtimes: () => '/runtimes',
  cluster: () => '/cluster',
  create: (from?: { namespace: string; name: string }, resubmit = false) =>
    from ? `/create?from=${encodeURIComponent(from.namespace)}/${encodeURIComponent(from.name)}${resubmit ? '&resubmit=true' : ''}` : '/create',
  job: (namespace: string, name: string, tab?: string) =>
    `/jobs/${encodeURIComponent(namespace)}/${encodeURIComponent(name)}${tab ? `?tab=${encodeURIComponent(tab)}` : ''}`,
  login: () => '/login',
};

/** Goes to a page of the dashboard without reloading it. */
export function navigate(to: string) {
  window.history.pushState({}, '', to);
  window.dispatchEvent(new PopStateEvent('popstate'));
}

/** The job a path names ("/jobs/NS/NAME"), or null. */
export function jobOfPath(pathname: string): { namespace: string; name: string } | null {
  const m = pathname.match(/^\/jobs\/([^/]+)\/([^/]+)\/?$/);
  return m ? { namespace: decodeURIComponent(m[1]), name: decodeURIComponent(m[2]) } : null;
}
