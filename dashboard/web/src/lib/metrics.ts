// Pure helpers of the Metrics tab (unit-tested in metrics.test.ts).
import type { MetricSeries, Metrics, Phase, PhaseBand } from '../api/types';

export type MetricKind = MetricSeries['metric'];

export interface ChartLine {
  name: string;
  role: MetricSeries['role'];
  data: { x: Date; y: number }[];
}

/** The lines of one metric, Launcher first, each named by role and index. */
export function linesOf(m: Metrics, metric: MetricKind): ChartLine[] {
  return m.series
    .filter((s) => s.metric === metric && s.points.length > 0)
    .map((s) => ({ name: podLabel(s), role: s.role, data: s.points.map(([t, v]) => ({ x: new Date(t * 1000), y: v })) }));
}

/** "Launcher" or "Worker 3" (JobSet's pod index), as on the Topology tab. */
export function podLabel(s: Pick<MetricSeries, 'pod' | 'role'>): string {
  if (s.role === 'Launcher') return 'Launcher';
  const m = s.pod.match(/-node-\d+-(\d+)-[a-z0-9]{5}$/);
  return m ? `Worker ${m[1]}` : `Worker ${s.pod}`;
}

/** The largest value of the lines (for the bands' height); 1 when empty. */
export function maxOf(lines: ChartLine[]): number {
  let max = 0;
  for (const l of lines) for (const p of l.data) max = Math.max(max, p.y);
  return max > 0 ? max : 1;
}

/** A value in the metric's unit: cores, bytes (Ki/Mi/Gi) or percent. */
export function formatValue(metric: MetricKind, v: number): string {
  switch (metric) {
    case 'cpu':
      return v >= 1 ? `${trim(v)} cores` : `${Math.round(v * 1000)}m`;
    case 'memory': {
      const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
      let i = 0;
      while (v >= 1024 && i < units.length - 1) {
        v /= 1024;
        i++;
      }
      return `${trim(v)} ${units[i]}`;
    }
    case 'gpu':
      return `${Math.round(v)}%`;
  }
}

function trim(v: number): string {
  return v >= 100 ? String(Math.round(v)) : v >= 10 ? v.toFixed(1).replace(/\.0$/, '') : v.toFixed(2).replace(/\.?0+$/, '');
}

/** The colour of a phase's band: the PhaseBadge's colours. */
export const phaseColors: Record<Phase, string> = {
  Pending: '#2b9af3',
  Queued: '#5e40be',
  GangScheduling: '#f0ab00',
  Starting: '#009596',
  Running: '#3e8635',
  Succeeded: '#1e4f18',
  Failed: '#c9190b',
  Suspended: '#8a8d90',
};

/** A band in words: "Running 12:00:05–12:00:50 (45s)". */
export function bandText(b: PhaseBand): string {
  const s = new Date(b.start);
  const e = new Date(b.end);
  const secs = Math.max(0, Math.round((e.getTime() - s.getTime()) / 1000));
  const d = secs >= 3600 ? `${Math.floor(secs / 3600)}h${Math.floor((secs % 3600) / 60)}m` : secs >= 60 ? `${Math.floor(secs / 60)}m${secs % 60}s` : `${secs}s`;
  return `${b.phase} ${clock(s)}–${clock(e)} (${d})`;
}

function clock(d: Date): string {
  return d.toLocaleTimeString([], { hour: '2-digit', minute: '2-digit', second: '2-digit', hour12: false });
}

/** Whether a job's metrics are still growing (refresh them). */
export function live(phase: Phase): boolean {
  return phase !== 'Succeeded' && phase !== 'Failed';
}
