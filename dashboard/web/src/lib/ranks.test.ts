import { describe, expect, it } from 'vitest';
import vectors from '../../../../pkg/logs/testdata/rank-vectors.json';
import { lineRank, parseSelection, splitRank } from './ranks';

// The vectors Go (pkg/logs) and the SDK check too.
describe('splitRank', () => {
  for (const v of vectors.lines) {
    it(v.name, () => {
      const got = splitRank(v.text);
      if (v.rank === null) expect(got).toBeNull();
      else expect(got).toEqual({ rank: v.rank, stream: v.stream, message: v.message });
    });
  }
  it('reads a line of the merged view', () => {
    expect(lineRank('[launcher] [1,3]<stderr>:RuntimeError: boom')).toBe(3);
    expect(lineRank('[worker-1] sshd up')).toBeNull();
  });
});

describe('parseSelection', () => {
  for (const v of vectors.selections) {
    it(v.spec || 'empty', () => {
      if ('error' in v && v.error) expect(() => parseSelection(v.spec)).toThrow(v.error);
      else expect([...parseSelection(v.spec)].sort((a, b) => a - b)).toEqual(v.ranks);
    });
  }
});
