import { describe, expect, it } from 'vitest';
import { bandText, formatValue, linesOf, maxOf, podLabel } from './metrics';
import type { Metrics } from '../api/types';

const m: Metrics = {
  start: '2026-11-23T12:00:00Z',
  end: '2026-11-23T12:01:00Z',
  step: 5,
  how: '',
  phases: [],
  series: [
    { metric: 'cpu', pod: 'hello-launcher-0-0-abcde', role: 'Launcher', points: [[1795435200, 0.25]] },
    { metric: 'cpu', pod: 'hello-node-0-1-fghij', role: 'Worker', points: [[1795435200, 1.5], [1795435205, 2]] },
    { metric: 'memory', pod: 'hello-node-0-1-fghij', role: 'Worker', points: [[1795435200, 1048576]] },
    { metric: 'gpu', pod: 'hello-node-0-1-fghij', role: 'Worker', points: [] },
  ],
};

describe('metrics tab helpers', () => {
  it('keeps one metric, names pods by role and index, drops empty series', () => {
    const cpu = linesOf(m, 'cpu');
    expect(cpu.map((l) => l.name)).toEqual(['Launcher', 'Worker 1']);
    expect(cpu[1].data[1]).toEqual({ x: new Date(1795435205 * 1000), y: 2 });
    expect(linesOf(m, 'gpu')).toEqual([]);
    expect(maxOf(cpu)).toBe(2);
    expect(maxOf([])).toBe(1);
  });
  it('labels pods', () => {
    expect(podLabel({ pod: 'a-node-0-12-x7k2p', role: 'Worker' })).toBe('Worker 12');
    expect(podLabel({ pod: 'a-launcher-0-0-x7k2p', role: 'Launcher' })).toBe('Launcher');
  });
  it('formats values in their units', () => {
    expect(formatValue('cpu', 0.25)).toBe('250m');
    expect(formatValue('cpu', 2)).toBe('2 cores');
    expect(formatValue('memory', 1048576)).toBe('1 MiB');
    expect(formatValue('memory', 1.5 * 1024 ** 3)).toBe('1.5 GiB');
    expect(formatValue('gpu', 87.4)).toBe('87%');
  });
  it('says a band in words with its length', () => {
    expect(bandText({ phase: 'Running', start: '2026-11-23T12:00:05Z', end: '2026-11-23T12:00:50Z' })).toMatch(/^Running .+–.+ \(45s\)$/);
    expect(bandText({ phase: 'Queued', start: '2026-11-23T12:00:00Z', end: '2026-11-23T13:30:00Z' })).toMatch(/\(1h30m\)$/);
  });
});
