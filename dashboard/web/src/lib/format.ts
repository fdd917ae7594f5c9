// Pure formatting helpers (unit-tested in format.test.ts).

/** A duration in the largest two units: "45s", "3m 20s", "2h 5m", "3d 4h". */
export function duration(ms: number): string {
  if (!Number.isFinite(ms) || ms < 0) return '-';
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return s % 60 ? `${m}m ${s % 60}s` : `${m}m`;
  const h = Math.floor(m / 60);
  if (h < 24) return m % 60 ? `${h}h ${m % 60}m` : `${h}h`;
  const d = Math.floor(h / 24);
  return h % 24 ? `${d}d ${h % 24}h` : `${d}d`;
}

/** How long ago t was, relative to now. */
export function age(t: string | undefined, now: number): string {
  if (!t) return '-';
  return duration(now - Date.parse(t));
}

/** The job's run time: start to finish, or to now while it runs. */
export function runTime(started: string | undefined, finished: string | undefined, now: number): string {
  if (!started) return '-';
  const end = finished ? Date.parse(finished) : now;
  return duration(end - Date.parse(started));
}

/** Compiles a user's search as a regular expression, or says why not. */
export function compileSearch(q: string): { re?: RegExp; error?: string } {
  if (!q) return {};
  try {
    return { re: new RegExp(q, 'gi') };
  } catch (e) {
    return { error: `not a valid regular expression: ${(e as Error).message}` };
  }
}

/** Splits line into plain and matched parts for highlighting. */
export function highlight(line: string, re?: RegExp): { text: string; match: boolean }[] {
  if (!re) return [{ text: line, match: false }];
  const out: { text: string; match: boolean }[] = [];
  let last = 0;
  re.lastIndex = 0;
  for (let m = re.exec(line); m; m = re.exec(line)) {
    if (m[0] === '') {
      re.lastIndex++;
      continue;
    }
    if (m.index > last) out.push({ text: line.slice(last, m.index), match: false });
    out.push({ text: m[0], match: true });
    last = m.index + m[0].length;
  }
  if (last < line.length) out.push({ text: line.slice(last), match: false });
  return out.length ? out : [{ text: line, match: false }];
}

/**
 * Marks re's matches in line for PatternFly's LogViewer, which draws ANSI
 * colours and escapes everything else: a match gets a yellow background
 * (24-bit SGR 48;2), then the default background again (49).
 */
export function markMatches(line: string, re?: RegExp): string {
  if (!re) return line;
  return highlight(line, re)
    .map((p) => (p.match ? `${MARK_ON}${p.text}${MARK_OFF}` : p.text))
    .join('');
}

/** The ANSI codes markMatches puts around a match. */
export const MARK_ON = '\x1b[48;2;255;224;102m';
export const MARK_OFF = '\x1b[49m';

/** Keeps at most max lines, dropping the oldest; says how many were dropped. */
export function cap(lines: string[], max: number): { lines: string[]; dropped: number } {
  if (lines.length <= max) return { lines, dropped: 0 };
  return { lines: lines.slice(lines.length - max), dropped: lines.length - max };
}

/** The phase as users read it: "Queued (2nd)". */
export function phaseLabel(phase: string, queuePosition?: number): string {
  if (phase === 'Queued' && queuePosition) return `Queued (#${queuePosition})`;
  if (phase === 'GangScheduling') return 'Gang scheduling';
  return phase;
}

/** startsIn says when an estimated start is, from now: "in about 5m", "any moment now". */
export function startsIn(start: string | undefined, now = Date.now()): string {
  if (!start || start.startsWith('0001-')) return '';
  const s = Math.round((new Date(start).getTime() - now) / 1000);
  if (s <= 30) return 'any moment now';
  if (s < 120) return `in about ${s}s`;
  if (s < 7200) return `in about ${Math.round(s / 60)}m`;
  return `in about ${Math.round(s / 3600)}h`;
}
