import { useEffect, useState } from 'react';
import {
  Alert,
  Brand,
  Button,
  Masthead,
  MastheadBrand,
  MastheadContent,
  MastheadMain,
  Page,
  Toolbar,
  ToolbarContent,
  ToolbarItem,
} from '@patternfly/react-core';
import { logout as endSession, manager, whoami } from '../api/auth';
import { NamespacesProvider } from './NamespacesContext';
import { jobOfPath, navigate, paths } from './routes';
import { reasonText, safeNext } from '../pages/login/login';
import { CreatePage } from '../pages/create/CreatePage';
import { JobsPage } from '../pages/jobs/JobsPage';
import { ClusterPage } from '../pages/cluster/ClusterPage';
import { RuntimesPage } from '../pages/runtimes/RuntimesPage';
import { JobPage } from '../pages/job/JobPage';
import { LoginPage } from '../pages/login/LoginPage';

function useLocation() {
  const [loc, setLoc] = useState(window.location.pathname + window.location.search);
  useEffect(() => {
    const on = () => setLoc(window.location.pathname + window.location.search);
    window.addEventListener('popstate', on);
    return () => window.removeEventListener('popstate', on);
  }, []);
  return loc;
}

/** Polls mpijob-manager's state: while it is not running, the phases shown are as it last saw them. */
function useManagerNote(enabled: boolean) {
  const [note, setNote] = useState('');
  useEffect(() => {
    if (!enabled) return;
    let live = true;
    const poll = () =>
      manager().then(
        (m) => live && setNote(m.running ? '' : m.note ?? ''),
        () => undefined,
      );
    poll();
    const id = window.setInterval(poll, 10000);
    return () => {
      live = false;
      window.clearInterval(id);
    };
  }, [enabled]);
  return note;
}

export function App() {
  const loc = useLocation();
  const url = new URL(loc, window.location.origin);
  const [user, setUser] = useState('');
  const managerNote = useManagerNote(url.pathname !== '/login');
  useEffect(() => {
    if (url.pathname === '/login') return;
    whoami().then((r) => setUser(r.user), () => undefined);
  }, [url.pathname]);

  if (url.pathname === '/login') {
    return (
      <LoginPage
        reason={reasonText(url.searchParams.get('reason') ?? '')}
        next={safeNext(url.searchParams.get('next') ?? '/', window.location.origin)}
      />
    );
  }
  const job = jobOfPath(url.pathname);
  const logout = async () => {
    await endSession();
    window.location.assign(paths.login());
  };
  const masthead = (
    <Masthead>
      <MastheadMain>
        <MastheadBrand>
          <a href="/" onClick={(e) => { e.preventDefault(); navigate(paths.jobs()); }} style={{ color: 'inherit', textDecoration: 'none', fontWeight: 600, fontSize: 18 }}>
            <Brand src="data:," alt="" style={{ display: 'none' }} />
            mpijob
          </a>
        </MastheadBrand>
      </MastheadMain>
      <MastheadContent>
        <Toolbar isFullHeight>
          <ToolbarContent>
            <ToolbarItem>
              <Button variant="link" onClick={() => navigate(paths.jobs())}>Training jobs</Button>
            </ToolbarItem>
            <ToolbarItem>
              <Button variant="link" onClick={() => navigate(paths.runtimes())} data-testid="nav-runtimes">Runtimes</Button>
            </ToolbarItem>
            <ToolbarItem>
              <Button variant="link" onClick={() => navigate(paths.cluster())} data-testid="nav-cluster">Cluster</Button>
            </ToolbarItem>
            <ToolbarItem align={{ default: 'alignEnd' }}>
              <span data-testid="user">{user}</span>
            </ToolbarItem>
            <ToolbarItem>
              <Button variant="secondary" onClick={logout}>Log out</Button>
            </ToolbarItem>
          </ToolbarContent>
        </Toolbar>
      </MastheadContent>
    </Masthead>
  );
  return (
    <NamespacesProvider>
    <Page masthead={masthead}>
      {managerNote && <Alert variant="warning" isInline title={managerNote} data-testid="manager-down" />}
      {url.pathname === '/runtimes' ? (
        <RuntimesPage />
      ) : url.pathname === '/cluster' ? (
        <ClusterPage />
      ) : url.pathname === '/create' ? (
        <CreatePage from={url.searchParams.get('from') ?? ''} resubmit={url.searchParams.get('resubmit') === 'true'} />
      ) : job ? (
        <JobPage namespace={job.namespace} name={job.name} tab={url.searchParams.get('tab') ?? 'overview'} />
      ) : (
        <JobsPage />
      )}
    </Page>
    </NamespacesProvider>
  );
}
