// Calls to the dashboard's API. A 401 sends the user to the login page
// with the reason; other errors carry the API server's own message.

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
