import { describe, expect, it } from 'vitest';
import data from '../../../../pkg/api/testdata/steps.json';
import type { Step } from '../api/types.gen';
import { commandText, jobSteps, stepParts } from './steps';

// The vectors Go (pkg/api) and the SDK check too.
describe('steps', () => {
  it('has the whole set', () => expect(data.vectors.length).toBeGreaterThanOrEqual(10));
  for (const v of data.vectors) {
    it(v.name, () => {
      const s = v.named as Step;
      const p = stepParts(s);
      expect(s.command ? commandText(s.command) : '').toBe(v.cli);
      expect(p.command ?? '').toBe(v.cli);
      const marked = p.command && s.text.includes('`' + p.command + '`');
      expect(marked ? `${p.before}\`${p.command}\`${p.after}` : p.before + (p.command ?? '') + p.after).toBe(s.text);
      if (marked) expect(p.before.endsWith('`') || p.after.startsWith('`')).toBe(false);
    });
  }
  it('shows words that do not hold their command as words', () => {
    const s: Step = { text: 'Read the log.', command: { verb: 'logs', args: ['hello'] } };
    expect(stepParts(s)).toEqual({ before: 'Read the log.', after: '' });
  });
  it('reads a status written before steps were data', () => {
    expect(jobSteps({ nextStep: 'a', nextSteps: ['a', 'b'] })).toEqual([{ text: 'a' }, { text: 'b' }]);
    expect(jobSteps({ nextStep: 'a' })).toEqual([{ text: 'a' }]);
    expect(jobSteps({})).toEqual([]);
  });
});
