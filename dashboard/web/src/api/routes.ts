// The dashboard API's URLs, in one place (dashboard/server.go registers
// the same routes).

const seg = encodeURIComponent;
const job = (ns: string, name: string) => `/api/jobs/${seg(ns)}/${seg(name)}`;

export const apiRoutes = {
  loginUsers: () => '/api/login-users',
  login: () => '/api/login',
  logout: () => '/api/logout',
  whoami: () => '/api/whoami',
  manager: () => '/api/manager',
  doctor: (ns: string) => `/api/doctor?namespace=${seg(ns)}`,
  usage: (since: string) => `/api/usage?since=${seg(since)}`,
  namespaces: () => '/api/namespaces',
  dataConnections: (ns: string) => `/api/namespaces/${seg(ns)}/data-connections`,
  runtimes: (ns?: string) => `/api/runtimes${ns ? `?namespace=${seg(ns)}` : ''}`,
  runtimeTest: (name: string) => `/api/runtimes/${seg(name)}/test`,
  runtimeTestRun: (id: string) => `/api/runtime-tests/${seg(id)}`,
  jobs: () => '/api/jobs',
  createJob: (ns: string, dryRun: boolean) => `/api/jobs/${seg(ns)}${dryRun ? '?dryRun=true' : ''}`,
  quotaCheck: (ns: string) => `/api/jobs/${seg(ns)}/quota-check`,
  job,
  jobInput: (ns: string, name: string) => `${job(ns, name)}/input`,
  jobAction: (ns: string, name: string, what: 'suspend' | 'resume') => `${job(ns, name)}/${what}`,
  jobEvents: (ns: string, name: string) => `${job(ns, name)}/events`,
  jobLogs: (ns: string, name: string, query: URLSearchParams) => `${job(ns, name)}/logs?${query}`,
  jobMetrics: (ns: string, name: string) => `${job(ns, name)}/metrics`,
  jobProgress: (ns: string, name: string) => `${job(ns, name)}/progress`,
  jobStacks: (ns: string, name: string) => `${job(ns, name)}/stacks`,
  jobArtifacts: (ns: string, name: string) => `${job(ns, name)}/artifacts`,
  jobRegister: (ns: string, name: string) => `${job(ns, name)}/register`,
  jobArtifact: (ns: string, name: string, file: string) => `${job(ns, name)}/artifacts/${file.split('/').map(seg).join('/')}`,
  /** The live stream of a namespace's jobs ("" = every namespace), or of one job. */
  stream: (ns: string, name?: string) => `/api/stream?namespace=${seg(ns)}${name ? `&job=${seg(name)}` : ''}`,
  /**
   * The live stream of one page of a namespace's job list ("" = every
   * namespace): the server filters, sorts and pages (dashboard/jobpage.go).
   */
  jobsStream: (ns: string, q: JobQuery) => {
    const p = new URLSearchParams({ namespace: ns });
    if (q.name) p.set('name', q.name);
    if (q.runtime) p.set('runtime', q.runtime);
    if (q.phase) p.set('phase', q.phase);
    p.set('sort', q.sort);
    p.set('order', q.asc ? 'asc' : 'desc');
    p.set('page', String(q.page));
    p.set('perPage', String(q.perPage));
    return `/api/stream?${p}`;
  },
};

/** A job list's filters, order and page, as /api/jobs and /api/stream take them. */
export interface JobQuery {
  name: string;
  runtime: string;
  phase: string;
  sort: 'name' | 'namespace' | 'phase' | 'created';
  asc: boolean;
  page: number;
  perPage: number;
}
