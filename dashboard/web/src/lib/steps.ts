import type { Command, Step } from '../api/types.gen';

// Next steps as data (pkg/api/steps.go): each step's text holds its
// command as the CLI writes it, so the dashboard shows that part as a
// command to copy, split out by the command itself, never by reading the
// words. pkg/api/testdata/steps.json holds the vectors Go, the SDK and this
// file test.

export const commandPrefix = 'kubectl mpijob ';

// commandText is the command as the CLI writes it (Go: api.Command.String).
export function commandText(c: Command): string {
  return commandPrefix + [c.verb, ...(c.args ?? [])].join(' ');
}

// StepParts is a step's text around its command: before, the command,
// after; a step with no command, or whose text does not hold it, is all
// before.
export interface StepParts {
  before: string;
  command?: string;
  after: string;
}

export function stepParts(s: Step): StepParts {
  if (!s.command) return { before: s.text, after: '' };
  const cmd = commandText(s.command);
  const at = s.text.indexOf(cmd);
  if (at < 0) return { before: s.text, after: '' };
  let before = s.text.slice(0, at);
  let after = s.text.slice(at + cmd.length);
  // The backticks that mark it as code in the words: the page shows it as
  // code instead.
  if (before.endsWith('`') && after.startsWith('`')) {
    before = before.slice(0, -1);
    after = after.slice(1);
  }
  return { before, command: cmd, after };
}

// jobSteps are a job's next steps: its steps, or (a status written before
// steps were data) its texts alone.
export function jobSteps(j: { steps?: Step[]; nextSteps?: string[]; nextStep?: string }): Step[] {
  if (j.steps?.length) return j.steps;
  const texts = j.nextSteps?.length ? j.nextSteps : j.nextStep ? [j.nextStep] : [];
  return texts.map((text) => ({ text }));
}
