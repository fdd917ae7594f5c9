import { afterEach, describe, expect, it, vi } from 'vitest';
import { cleanup, fireEvent, render, screen, waitFor } from '@testing-library/react';
import type { Stacks } from '../../api/types';

// The Stacks tab posts for the stacks when asked and draws the groups the
// server sends; the API call is mocked.
const jobStacks = vi.fn<(ns: string, name: string) => Promise<Stacks>>();
vi.mock('../../api/jobs', () => ({ jobStacks: (ns: string, name: string) => jobStacks(ns, name) }));
const { StacksTab } = await import('./StacksTab');

afterEach(() => {
  cleanup();
  jobStacks.mockReset();
});

const frame = (line: number, func: string, source: string) => ({ file: '/tmp/hang.py', line, func, source });
const stacks: Stacks = {
  ranks: [],
  contrast: 'rank 3 waits in comm.recv while ranks 0-2 wait in comm.Allreduce',
  groups: [
    { ranks: [0, 1, 2], rankText: '0-2', headline: 'ranks 0-2 (3): comm.Allreduce ← hang.py:13 step()', states: 'running', pods: 'Workers 0-1',
      callee: 'comm.Allreduce', where: 'hang.py:13 step()', frames: [frame(13, 'step', 'comm.Allreduce(a, b)'), frame(20, '<module>', 'step()')] },
    { ranks: [3], rankText: '3', headline: 'rank 3 on Worker 1: comm.recv ← hang.py:9 wait_for_peer()', states: 'sleeping', pods: 'Worker 1',
      nodes: ['mpijob-node-2'], frames: [frame(9, 'wait_for_peer', 'return comm.recv(source=0)')] },
  ],
};

describe('StacksTab', () => {
  it('takes the stacks of the job asked for and draws each group with its frames', async () => {
    jobStacks.mockResolvedValue(stacks);
    render(<StacksTab namespace="team-a" name="hang" phase="Running" />);
    expect(jobStacks).not.toHaveBeenCalled();
    fireEvent.click(screen.getByTestId('take-stacks'));
    await waitFor(() => expect(screen.getAllByTestId('stack-group')).toHaveLength(2));
    expect(jobStacks).toHaveBeenCalledWith('team-a', 'hang');
    expect(screen.getByTestId('stacks-contrast').textContent).toContain('Rank 3 waits in comm.recv while ranks 0-2 wait in comm.Allreduce');
    const [first, second] = screen.getAllByTestId('stack-group');
    expect(first.textContent).toContain('hang.py:20 <module>');
    expect(first.textContent).toContain('comm.Allreduce(a, b)');
    expect(second.textContent).toContain('hang.py:9 wait_for_peer()');
    expect(second.textContent).toContain('Worker 1 · mpijob-node-2');
    expect(screen.getByTestId('take-stacks').textContent).toBe('Take them again');
  });

  it('says why when the server refuses', async () => {
    jobStacks.mockRejectedValue(new Error('taking stacks runs a command in the job\'s pods, which needs the right to create pods/exec in namespace team-a'));
    render(<StacksTab namespace="team-a" name="hang" phase="Running" />);
    fireEvent.click(screen.getByTestId('take-stacks'));
    await waitFor(() => expect(screen.getByTestId('stacks-error').textContent).toContain('pods/exec in namespace team-a'));
  });

  it('has nothing to take for a finished job', () => {
    render(<StacksTab namespace="team-a" name="done" phase="Succeeded" />);
    expect(screen.getByTestId('stacks-not-running').textContent).toContain('this job is Succeeded');
    expect(screen.queryByTestId('take-stacks')).toBeNull();
  });
});
