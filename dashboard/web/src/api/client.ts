// The one place that calls fetch: every request to the dashboard's API
// goes through here. A 401 sends the user to the login page with the
// reason; other errors carry the API server's own message.

import { apiRoutes } from './routes';

export class ApiError extends Error {
  constructor(
    public status: number,
    message: string,
  ) {
    super(message);
  }
}

/** Sends the user to the login page; reason is a code of LOGIN_REASONS. */
export function toLogin(reason: '' | 'expired') {
  const here = window.location.pathname + window.location.search;
  if (window.location.pathname !== '/login') {
    const why = reason ? `reason=${encodeURIComponent(reason)}&` : '';
    window.location.assign(`/login?${why}next=${encodeURIComponent(here)}`);
  }
}

export async function api<T>(path: string, init?: RequestInit): Promise<T> {
  let res: Response;
  try {
    res = await fetch(path, { credentials: 'same-origin', ...init });
  } catch {
    throw new ApiError(0, 'The dashboard cannot be reached: check your connection.');
  }
  const body = await res.json().catch(() => ({}));
  if (res.status === 401) {
    // A first visit is no warning; an expired or refused session is.
    toLogin(String(body.error ?? '').startsWith('not logged in') ? '' : 'expired');
    throw new ApiError(401, body.error ?? 'not logged in');
  }
  if (!res.ok) {
    throw new ApiError(res.status, body.error ?? `${res.status} ${res.statusText}`);
  }
  return body as T;
}

const unreachable = 'The dashboard cannot be reached: check your connection.';

/**
 * Sends a JSON body and answers the JSON that comes back, whatever the
 * status: the wizard's and the runtime form's answers carry field errors
 * on 4xx. ok is false for a non-2xx answer; error is always set then.
 */
export async function send<T extends { error?: string }>(method: string, path: string, body?: unknown): Promise<T & { ok: boolean; status: number }> {
  let res: Response;
  try {
    res = await fetch(path, {
      method,
      credentials: 'same-origin',
      headers: body === undefined ? undefined : { 'Content-Type': 'application/json' },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
  } catch {
    return { error: unreachable, ok: false, status: 0 } as T & { ok: boolean; status: number };
  }
  const out = (await res.json().catch(() => ({}))) as T;
  if (!res.ok && !out.error) out.error = `${res.status} ${res.statusText}`;
  return { ...out, ok: res.ok, status: res.status };
}

/** Opens a streamed text answer (a log); a non-2xx answer throws ApiError with its message. */
export async function openText(path: string, signal: AbortSignal): Promise<Response> {
  const res = await fetch(path, { signal, credentials: 'same-origin' });
  if (!res.ok || !res.body) {
    const body = await res.json().catch(() => ({}));
    throw new ApiError(res.status, body.error ?? `not available (${res.status})`);
  }
  return res;
}

/** Whether the session still holds: a 401 sends the user to log in again. */
export async function checkSession(): Promise<void> {
  const res = await fetch(apiRoutes.whoami(), { credentials: 'same-origin' });
  if (res.status === 401) {
    const why = String((await res.json().catch(() => ({}))).error ?? '');
    toLogin(why.startsWith('not logged in') ? '' : 'expired');
    throw new ApiError(401, why);
  }
}
