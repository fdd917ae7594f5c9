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
import { api } from './api';
import { reasonText, safeNext } from './login';
import type { Manager } from './types';
import { CreatePage } from './CreatePage';
import { JobsPage } from './JobsPage';
import { RuntimesPage } from './RuntimesPage';
import { JobPage } from './JobPage';
import { LoginPage } from './LoginPage';

/** Client-side routes: "/", "/runtimes", "/create[?from=NS/NAME[&resubmit=true]]", "/jobs/NS/NAME[?tab=logs]", "/login". */
export function navigate(to: string) {
  window.history.pushState({}, '', to);
  window.dispatchEvent(new PopStateEvent('popstate'));
}

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
      api<Manager>('/api/manager').then(
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
    api<{ user: string }>('/api/whoami').then((r) => setUser(r.user), () => undefined);
  }, [url.pathname]);

  if (url.pathname === '/login') {
    return (
      <LoginPage
        reason={reasonText(url.searchParams.get('reason') ?? '')}
        next={safeNext(url.searchParams.get('next') ?? '/', window.location.origin)}
      />
    );
  }
  const m = url.pathname.match(/^\/jobs\/([^/]+)\/([^/]+)\/?$/);
  const logout = async () => {
    await fetch('/api/logout', { method: 'POST', credentials: 'same-origin' });
    window.location.assign('/login');
  };
  const masthead = (
    <Masthead>
      <MastheadMain>
        <MastheadBrand>
          <a href="/" onClick={(e) => { e.preventDefault(); navigate('/'); }} style={{ color: 'inherit', textDecoration: 'none', fontWeight: 600, fontSize: 18 }}>
            <Brand src="data:," alt="" style={{ display: 'none' }} />
            mpijob
          </a>
        </MastheadBrand>
      </MastheadMain>
      <MastheadContent>
        <Toolbar isFullHeight>
          <ToolbarContent>
            <ToolbarItem>
              <Button variant="link" onClick={() => navigate('/')}>Training jobs</Button>
            </ToolbarItem>
            <ToolbarItem>
              <Button variant="link" onClick={() => navigate('/runtimes')} data-testid="nav-runtimes">Runtimes</Button>
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
    <Page masthead={masthead}>
      {managerNote && <Alert variant="warning" isInline title={managerNote} data-testid="manager-down" />}
      {url.pathname === '/runtimes' ? (
        <RuntimesPage />
      ) : url.pathname === '/create' ? (
        <CreatePage from={url.searchParams.get('from') ?? ''} resubmit={url.searchParams.get('resubmit') === 'true'} />
      ) : m ? (
        <JobPage namespace={decodeURIComponent(m[1])} name={decodeURIComponent(m[2])} tab={url.searchParams.get('tab') ?? 'overview'} />
      ) : (
        <JobsPage />
      )}
    </Page>
  );
}
