// What the login page takes from its URL. Both come from a link anyone can
// craft, so neither is trusted: the page shows only the reasons it knows,
// and goes on only to a path of this dashboard.

/** The reasons the dashboard itself sends people to the login page for. */
export const LOGIN_REASONS: Record<string, string> = {
  expired: 'Your session has expired or the token is not valid: log in again.',
};

/** The text for a reason code; unknown codes (crafted links) show nothing. */
export function reasonText(code: string): string {
  return Object.prototype.hasOwnProperty.call(LOGIN_REASONS, code) ? LOGIN_REASONS[code] : '';
}

/**
 * The path to go on to after logging in: next when it resolves, as the
 * browser would resolve it, to this origin; "/" otherwise. Browsers read
 * "/\evil.example" and "/\t/evil.example" as "//evil.example", another
 * site, so the check uses the browser's own URL parser, not a prefix test.
 */
export function safeNext(next: string, origin: string): string {
  if (!next.startsWith('/')) {
    return '/';
  }
  let u: URL;
  try {
    u = new URL(next, origin);
  } catch {
    return '/';
  }
  if (u.origin !== new URL(origin).origin || u.pathname === '/login') {
    return '/';
  }
  return u.pathname + u.search + u.hash;
}
