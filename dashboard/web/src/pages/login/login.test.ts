import { describe, expect, it } from 'vitest';
import { reasonText, safeNext } from './login';

const origin = 'http://127.0.0.1:8443';

describe('safeNext', () => {
  it.each([
    ['/jobs/team-a/train-1', '/jobs/team-a/train-1'],
    ['/jobs?ns=team-a#logs', '/jobs?ns=team-a#logs'],
    ['/\\evil.example/x', '/'],
    ['//evil.example/x', '/'],
    ['/\t/evil.example/x', '/'],
    ['https://evil.example/x', '/'],
    ['javascript:alert(1)', '/'],
    ['evil.example', '/'],
    ['', '/'],
    ['/login?next=/jobs', '/'],
  ])('%j goes to %j', (next, want) => {
    expect(safeNext(next, origin)).toBe(want);
  });
});

describe('reasonText', () => {
  it('shows the reasons the dashboard sends', () => {
    expect(reasonText('expired')).toMatch(/expired/);
  });
  it.each(['Your account is locked: call +1 555 0100', 'toString', '__proto__', ''])('hides %j', (code) => {
    expect(reasonText(code)).toBe('');
  });
});
