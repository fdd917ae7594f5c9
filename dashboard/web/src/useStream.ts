import { useEffect, useRef, useState } from 'react';
import { toLogin } from './api';

/**
 * Subscribes to the dashboard's Server-Sent Events at url and calls
 * handlers[event] with each event's JSON. Returns the connection problem
 * to show in a banner ("" when live); EventSource reconnects by itself.
 */
export function useStream(url: string | null, handlers: Record<string, (data: any) => void>): string {
  const [problem, setProblem] = useState('');
  const ref = useRef(handlers);
  ref.current = handlers;
  useEffect(() => {
    if (!url) return;
    const es = new EventSource(url, { withCredentials: true });
    const names = ['jobs', 'job', 'events', 'gone', 'denied', 'problem'];
    for (const name of names) {
      es.addEventListener(name, (ev) => {
        const data = JSON.parse((ev as MessageEvent).data);
        if (name === 'problem') {
          setProblem(data.error ?? 'Live updates are paused.');
          return;
        }
        setProblem('');
        ref.current[name]?.(data);
      });
    }
    es.onerror = async () => {
      // The stream ended: the server may be down, or the session expired.
      setProblem('Lost the connection to the dashboard; reconnecting…');
      try {
        const res = await fetch('/api/whoami', { credentials: 'same-origin' });
        if (res.status === 401) {
          es.close();
          const why = String((await res.json()).error ?? '');
          toLogin(why.startsWith('not logged in') ? '' : 'expired');
        }
      } catch {
        /* still down: EventSource keeps retrying */
      }
    };
    return () => es.close();
  }, [url]);
  return problem;
}
