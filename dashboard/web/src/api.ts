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

export function toLogin(reason: string) {
  const here = window.location.pathname + window.location.search;
  if (window.location.pathname !== '/login') {
    window.location.assign(`/login?reason=${encodeURIComponent(reason)}&next=${encodeURIComponent(here)}`);
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
    toLogin(body.error ?? 'Please log in.');
    throw new ApiError(401, body.error ?? 'not logged in');
  }
  if (!res.ok) {
    throw new ApiError(res.status, body.error ?? `${res.status} ${res.statusText}`);
  }
  return body as T;
}
