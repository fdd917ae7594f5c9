import { useEffect, useMemo, useState } from 'react';
import {
  Alert,
  Button,
  FormSelect,
  FormSelectOption,
  Switch,
  TextInput,
  ToggleGroup,
  ToggleGroupItem,
  Toolbar,
  ToolbarContent,
  ToolbarItem,
} from '@patternfly/react-core';
import { DownloadIcon } from '@patternfly/react-icons';
import { LogViewer as PFLogViewer } from '@patternfly/react-log-viewer';
import { cap, compileSearch, markMatches } from '../../lib/format';
import { lineRank, parseSelection } from '../../lib/ranks';
import { openText } from '../../api/client';
import { apiRoutes } from '../../api/routes';
import type { Pod } from '../../api/types';

/** Lines kept in the browser; older ones are dropped (a 100 MB log must not freeze the tab). */
export const MAX_LINES = 50_000;

const RANGES: [string, string][] = [
  ['', 'All time'],
  ['300', 'Last 5 minutes'],
  ['3600', 'Last hour'],
  ['86400', 'Last 24 hours'],
];

export function LogViewer({ namespace, name, pods, target, onTarget }: {
  namespace: string;
  name: string;
  pods: Pod[];
  target: string;
  onTarget: (t: string) => void;
}) {
  const [lines, setLines] = useState<string[]>([]);
  const [dropped, setDropped] = useState(0);
  const [error, setError] = useState('');
  const [stored, setStored] = useState(false);
  // The gone pods whose lines the log store gave, beside the live ones'.
  const [storedOf, setStoredOf] = useState<string[]>([]);
  const [query, setQuery] = useState('');
  const [only, setOnly] = useState(false);
  const [podFilter, setPodFilter] = useState('');
  const [rankSpec, setRankSpec] = useState('');
  const [since, setSince] = useState('');
  const [follow, setFollow] = useState(true);
  const [done, setDone] = useState(false);
  const running = pods.some((p) => p.phase === 'Running' || p.phase === 'Pending');
  // The pods this view reads, and whether their containers run yet: a
  // follow opened before a container started ends at once, so the stream
  // is opened again when they start.
  const started = pods
    .filter((p) => target === 'all' || (p.role === 'launcher' ? 'launcher' : `worker-${p.index}`) === target)
    .map((p) => `${p.name}:${p.started ?? ''}`)
    .join(',');
  const targets = useMemo(() => ['launcher', ...pods.filter((p) => p.role === 'worker').map((p) => `worker-${p.index}`), 'all'], [pods]);

  useEffect(() => {
    const ctl = new AbortController();
    let buf: string[] = [];
    let pending = '';
    let raf = 0;
    let lost = 0;
    setLines([]);
    setDropped(0);
    setError('');
    setStored(false);
    setDone(false);
    const flush = () => {
      raf = 0;
      const c = cap(buf, MAX_LINES);
      buf = c.lines;
      lost += c.dropped;
      // buf grows in place as the stream is read: React is handed a copy,
      // or the same array again would look unchanged and the lines of
      // every read after the first would not be drawn.
      setLines(buf.slice());
      setDropped(lost);
    };
    const q = new URLSearchParams({ target });
    if (follow && running) q.set('follow', '1');
    if (since) q.set('sinceSeconds', since);
    (async () => {
      let res: Response;
      try {
        res = await openText(apiRoutes.jobLogs(namespace, name, q), ctl.signal);
      } catch (e) {
        if ((e as Error).name !== 'AbortError') setError(`Logs are not available: ${(e as Error).message}`);
        return;
      }
      setStored(res.headers.get('X-Mpijob-Log-Source') === 'log store');
      setStoredOf((res.headers.get('X-Mpijob-Log-Stored') ?? '').split(',').filter(Boolean));
      const reader = res.body!.getReader();
      const dec = new TextDecoder();
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        pending += dec.decode(value, { stream: true });
        const parts = pending.split('\n');
        pending = parts.pop() ?? '';
        buf.push(...parts);
        if (buf.length > 2 * MAX_LINES) buf = cap(buf, MAX_LINES).lines;
        if (!raf) raf = requestAnimationFrame(flush);
      }
      if (pending) buf.push(pending);
      flush();
      setDone(true);
    })().catch((e) => {
      if ((e as Error).name !== 'AbortError') setError(`The log stream stopped: ${(e as Error).message}`);
    });
    return () => {
      ctl.abort();
      if (raf) cancelAnimationFrame(raf);
    };
  }, [namespace, name, target, since, follow, running, started]);

  const search = useMemo(() => compileSearch(query), [query]);
  const podRe = useMemo(() => compileSearch(podFilter), [podFilter]);
  // The rank facet: real ranks, read from the tags mpirun puts before each
  // rank's line ([1,RANK]<stdout>:), not a pattern over the text.
  const ranks = useMemo((): { set: Set<number> | null; error?: string } => {
    if (rankSpec.trim() === '') return { set: null };
    try {
      return { set: parseSelection(rankSpec) };
    } catch (e) {
      return { set: null, error: (e as Error).message };
    }
  }, [rankSpec]);
  const tagged = useMemo(() => lines.some((l) => lineRank(l) !== null), [lines]);
  const matching = useMemo(() => {
    let out = lines;
    if (ranks.set) out = out.filter((l) => { const r = lineRank(l); return r !== null && ranks.set!.has(r); });
    if (podRe.re) out = out.filter((l) => { podRe.re!.lastIndex = 0; return podRe.re!.test(l); });
    if (only && search.re) out = out.filter((l) => { search.re!.lastIndex = 0; return search.re!.test(l); });
    return out;
  }, [lines, only, search, podRe, ranks]);
  // PatternFly's LogViewer draws the rows in view (a long log stays
  // light) and escapes the text; the search's matches are marked in ANSI.
  const shown = useMemo(() => matching.map((l) => markMatches(l, search.re)), [matching, search]);
  const matches = useMemo(() => {
    if (!search.re) return 0;
    return matching.filter((l) => { search.re!.lastIndex = 0; return search.re!.test(l); }).length;
  }, [matching, search]);


  const download = () => {
    const blob = new Blob([lines.join('\n') + '\n'], { type: 'text/plain' });
    const a = document.createElement('a');
    a.href = URL.createObjectURL(blob);
    a.download = `${name}-${target}.log`;
    a.click();
    URL.revokeObjectURL(a.href);
  };

  return (
    <div>
      <ToggleGroup aria-label="Log of">
        {targets.map((t) => (
          <ToggleGroupItem key={t} text={t === 'all' ? 'All' : t === 'launcher' ? 'Launcher' : `Worker ${t.slice(7)}`} buttonId={`log-${t}`} isSelected={target === t} onChange={() => onTarget(t)} />
        ))}
      </ToggleGroup>
      <Toolbar>
        <ToolbarContent>
          <ToolbarItem>
            <TextInput aria-label="Search the log (regular expression)" placeholder="Search (regex)" value={query} onChange={(_e, v) => setQuery(v)} validated={search.error ? 'error' : 'default'} />
          </ToolbarItem>
          <ToolbarItem>
            <Switch id="only" label="Only matching lines" isChecked={only} onChange={(_e, v) => setOnly(v)} />
          </ToolbarItem>
          <ToolbarItem>
            <label htmlFor="rank-filter" style={{ marginRight: 8 }}>Ranks</label>
          </ToolbarItem>
          <ToolbarItem>
            <TextInput id="rank-filter" placeholder="e.g. 3, 0-3 or 0,2,5-7" value={rankSpec} onChange={(_e, v) => setRankSpec(v)} validated={ranks.error ? 'error' : 'default'} data-testid="rank-filter" />
          </ToolbarItem>
          <ToolbarItem>
            <TextInput aria-label="Filter lines (regular expression)" placeholder="Filter, e.g. worker-1|loss" value={podFilter} onChange={(_e, v) => setPodFilter(v)} validated={podRe.error ? 'error' : 'default'} />
          </ToolbarItem>
          <ToolbarItem>
            <FormSelect aria-label="Time range" value={since} onChange={(_e, v) => setSince(v)}>
              {RANGES.map(([v, l]) => (
                <FormSelectOption key={v} value={v} label={l} />
              ))}
            </FormSelect>
          </ToolbarItem>
          <ToolbarItem>
            <Switch id="follow" label="Follow" isChecked={follow} onChange={(_e, v) => setFollow(v)} />
          </ToolbarItem>
          <ToolbarItem>
            <Button variant="secondary" icon={<DownloadIcon />} onClick={download}>Download</Button>
          </ToolbarItem>
          <ToolbarItem align={{ default: 'alignEnd' }}>
            <span data-testid="log-count">
              {search.re ? `${matches} matching lines · ` : ''}
              {lines.length} lines{dropped ? ` (${dropped} older lines dropped)` : ''}
              {done ? '' : running && follow ? ' · following' : ''}
            </span>
          </ToolbarItem>
        </ToolbarContent>
      </Toolbar>
      {(search.error || podRe.error) && <Alert variant="warning" isInline title={`Search ${search.error ?? podRe.error}`} />}
      {ranks.error && <Alert variant="warning" isInline title={`Ranks ${rankSpec.trim()}: ${ranks.error}`} data-testid="rank-error" />}
      {ranks.set && !tagged && lines.length > 0 && (
        <Alert variant="info" isInline data-testid="rank-untagged"
          title="No line carries a rank: this job's runtime does not tag the ranks' output (the OpenMPI 4.1, MPICH and Intel MPI runtimes do; with OpenMPI 5 add --output tag to mpirun)." />
      )}
      {error && <Alert variant="info" isInline title={error} />}
      {stored && (
        <Alert variant="info" isInline data-testid="log-source-store"
          title="From the log store: the pods of this job are gone, and these are the lines kept for them." />
      )}
      {!stored && storedOf.length > 0 && (
        <Alert variant="info" isInline data-testid="log-source-mixed"
          title={`${storedOf.join(', ')}: ${storedOf.length === 1 ? 'its pod is' : 'their pods are'} gone, and ${storedOf.length === 1 ? 'its' : 'their'} lines are the ones the log store kept; the others are read from their pods.`} />
      )}
      <div data-testid="log" role="region" aria-label="Log">
        <PFLogViewer data={shown} height={520} isTextWrapped scrollToRow={follow ? shown.length : undefined} />
      </div>
    </div>
  );
}
