import { useEffect, useRef, useState } from 'react';
import { checkSession } from '../api/client';

/**
 * Subscribes to the dashboard's Server-Sent Events at url and calls
 * handlers[event] with each event's JSON. Returns the connection problem
 * to show in a banner ("" when live); EventSource reconnects by itself.
 */
export function useStream(url: string | null, handlers: Record<string, (data: never) => void>): string {
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
        ref.current[name]?.(data as never);
      });
    }
    es.onerror = async () => {
      // The stream ended: the server may be down, or the session expired.
      setProblem('Lost the connection to the dashboard; reconnecting…');
      try {
        await checkSession();
      } catch (e) {
        // A 401 went to the login page; otherwise EventSource keeps retrying.
        if ((e as { status?: number }).status === 401) es.close();
      }
    };
    return () => es.close();
  }, [url]);
  return problem;
}
