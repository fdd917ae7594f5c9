// Pure helpers for a job's training progress (unit-tested in progress.test.ts).
import type { ProgressPoint, TrainerStatus } from '../api/types';

/** "45% · epoch 9/20 · about 2 minutes left", or '' when there is nothing to say. */
export function progressText(p?: TrainerStatus): string {
  if (!p) return '';
  const parts: string[] = [];
  if (p.progressPercentage != null) parts.push(`${p.progressPercentage}%`);
  if (p.currentStep != null && p.totalSteps != null) parts.push(`step ${p.currentStep}/${p.totalSteps}`);
  else if (p.currentEpoch != null && p.totalEpochs != null) parts.push(`epoch ${trim(p.currentEpoch)}/${p.totalEpochs}`);
  else if (p.currentEpoch != null) parts.push(`epoch ${trim(p.currentEpoch)}`);
  const left = p.estimatedRemainingTimeSummary;
  if (left && left !== 'complete') parts.push(`about ${left} left`);
  return parts.join(' · ');
}

function trim(n: number): string {
  return Number.isInteger(n) ? String(n) : n.toFixed(2);
}

/** The metrics of a status, loss and accuracy first, as "name value" pairs. */
export function metricsOf(p?: TrainerStatus): [string, string][] {
  const m = p?.trainMetrics ?? {};
  const rank = (k: string) => (k === 'loss' ? 0 : k === 'accuracy' ? 1 : 2);
  return Object.keys(m)
    .sort((a, b) => rank(a) - rank(b) || a.localeCompare(b))
    .map((k) => [k, Number.isFinite(m[k]) ? Number(m[k].toPrecision(4)).toString() : String(m[k])]);
}

/** A series to chart: x is the epoch (or step) of each report, y the value. */
export interface Series {
  name: 'loss' | 'accuracy';
  x: 'epoch' | 'step';
  data: { x: number; y: number }[];
}

/**
 * The loss and accuracy over the job's reports. x is the epoch when the
 * reports have epochs, else the step; a report without the value is skipped,
 * and a later report for the same x (a restarted run) replaces the earlier.
 */
export function seriesOf(points: ProgressPoint[]): Series[] {
  const byEpoch = points.some((p) => p.epoch != null);
  const x = byEpoch ? 'epoch' : 'step';
  const out: Series[] = [];
  for (const name of ['loss', 'accuracy'] as const) {
    const at = new Map<number, number>();
    for (const p of points) {
      const px = byEpoch ? p.epoch : p.step;
      const v = p[name];
      if (px == null || v == null || !Number.isFinite(v)) continue;
      at.set(px, v);
    }
    const data = [...at.entries()].sort((a, b) => a[0] - b[0]).map(([px, y]) => ({ x: px, y }));
    if (data.length > 0) out.push({ name, x, data });
  }
  return out;
}

/** Bytes as people read them: 512 B, 12.3 KiB, 4.0 MiB. */
export function bytes(n: number): string {
  if (n >= 1 << 30) return `${(n / (1 << 30)).toFixed(1)} GiB`;
  if (n >= 1 << 20) return `${(n / (1 << 20)).toFixed(1)} MiB`;
  if (n >= 1 << 10) return `${(n / (1 << 10)).toFixed(1)} KiB`;
  return `${n} B`;
}

/** The ranks' own step times of the last report that has them (Go: progress.LastSteps). */
export interface StepTimes {
  ranks: number;
  median: number;
  slowest: number;
  slowestSeconds: number;
  /** The other ranks' median (what the slow-rank warning compares with); 0 for one rank. */
  others: number;
  time?: string;
}

function medianOf(v: number[]): number {
  const s = [...v].sort((a, b) => a - b);
  const n = s.length;
  if (n === 0) return 0;
  return n % 2 === 1 ? s[(n - 1) / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

export function lastStepTimes(points: ProgressPoint[]): StepTimes | null {
  for (let i = points.length - 1; i >= 0; i--) {
    const v = points[i].rank_step_seconds;
    if (!v || v.length === 0) continue;
    let slowest = 0;
    v.forEach((x, r) => { if (x > v[slowest]) slowest = r; });
    const others = v.length > 1 ? medianOf(v.filter((_, r) => r !== slowest)) : 0;
    return { ranks: v.length, median: medianOf(v), slowest, slowestSeconds: v[slowest], others, time: points[i].time };
  }
  return null;
}

/** A step time in words: "0.62 s", "12 ms" (Go: cli stepSeconds). */
export function stepSeconds(s: number): string {
  if (s < 0.01) return `${(s * 1000).toFixed(2)} ms`;
  return s < 0.1 ? `${Math.round(s * 1000)} ms` : `${s.toFixed(2)} s`;
}
