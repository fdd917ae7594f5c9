import { describe, expect, it } from 'vitest';
import { age, cap, compileSearch, duration, highlight, MARK_OFF, MARK_ON, markMatches, phaseLabel, runTime, startsIn } from './format';

describe('duration', () => {
  it.each([
    [0, '0s'],
    [45_000, '45s'],
    [200_000, '3m 20s'],
    [180_000, '3m'],
    [7_500_000, '2h 5m'],
    [3 * 86_400_000 + 4 * 3_600_000, '3d 4h'],
    [-1, '-'],
  ])('%i ms is %s', (ms, want) => expect(duration(ms)).toBe(want));
});

describe('age and run time', () => {
  const now = Date.parse('2026-11-22T12:00:00Z');
  it('counts from the given time', () => expect(age('2026-11-22T11:58:00Z', now)).toBe('2m'));
  it('is "-" without a time', () => expect(age(undefined, now)).toBe('-'));
  it('runs to now while not finished', () => expect(runTime('2026-11-22T11:59:30Z', undefined, now)).toBe('30s'));
  it('runs to the finish', () => expect(runTime('2026-11-22T11:00:00Z', '2026-11-22T11:01:05Z', now)).toBe('1m 5s'));
});

describe('search', () => {
  it('reports a bad regular expression instead of throwing', () => {
    expect(compileSearch('rank (').error).toMatch(/not a valid regular expression/);
  });
  it('highlights every match, case-insensitively', () => {
    const { re } = compileSearch('rank \\d');
    expect(highlight('Rank 1 of 4 and rank 3', re)).toEqual([
      { text: 'Rank 1', match: true },
      { text: ' of 4 and ', match: false },
      { text: 'rank 3', match: true },
    ]);
  });
  it('leaves a line without matches whole', () => {
    expect(highlight('nothing here', compileSearch('xyz').re)).toEqual([{ text: 'nothing here', match: false }]);
  });
  it('does not loop on empty matches', () => {
    expect(highlight('abc', compileSearch('x*').re)).toEqual([{ text: 'abc', match: false }]);
  });
});

describe('cap', () => {
  it('drops the oldest lines', () => expect(cap(['a', 'b', 'c'], 2)).toEqual({ lines: ['b', 'c'], dropped: 1 }));
  it('keeps short logs', () => expect(cap(['a'], 2)).toEqual({ lines: ['a'], dropped: 0 }));
});

describe('phaseLabel', () => {
  it('shows the queue position', () => expect(phaseLabel('Queued', 2)).toBe('Queued (#2)'));
  it('spells gang scheduling', () => expect(phaseLabel('GangScheduling')).toBe('Gang scheduling'));
});

describe('startsIn', () => {
  const now = Date.parse('2026-11-23T12:00:00Z');
  it.each([
    ['2026-11-23T12:00:10Z', 'any moment now'],
    ['2026-11-23T12:01:30Z', 'in about 90s'],
    ['2026-11-23T12:25:00Z', 'in about 25m'],
    ['2026-11-23T15:00:00Z', 'in about 3h'],
    [undefined, ''],
    ['0001-01-01T00:00:00Z', ''],
  ])('%s', (start, want) => expect(startsIn(start, now)).toBe(want));
});

describe('markMatches', () => {
  it('marks every match for the log viewer and leaves the rest as it is', () => {
    const re = compileSearch('rank [0-9]').re!;
    expect(markMatches('rank 1 of 2, rank 0 done <b>', re)).toBe(`${MARK_ON}rank 1${MARK_OFF} of 2, ${MARK_ON}rank 0${MARK_OFF} done <b>`);
  });
  it('leaves a line without a search alone', () => {
    expect(markMatches('plain', undefined)).toBe('plain');
  });
});
