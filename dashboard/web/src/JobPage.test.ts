import { describe, expect, it } from 'vitest';
import { withGone } from './JobPage';
import type { Job, Pod } from './types';

const job = (over: Partial<Job>): Job => ({
  name: 'pi', namespace: 'team-a', runtime: 'mpi-openmpi', mpi: true, phase: 'Running',
  workersReady: 0, workersTotal: 2, slotsPerWorker: 1, created: '2026-11-22T12:00:00Z', suspended: false, ...over,
});
const worker = (i: number): Pod => ({ name: `pi-node-0-${i}-x`, role: 'worker', index: i, phase: 'Running', ready: true, restarts: 0, state: 'Running', health: 'green' });

describe('withGone', () => {
  it('draws only the pods of a running job', () => {
    expect(withGone([worker(0)], job({}))).toHaveLength(1);
  });
  it('draws grey stand-ins for the pods of a finished job that are gone', () => {
    const got = withGone([], job({ phase: 'Succeeded' }));
    expect(got.map((p) => `${p.role}${p.index}:${p.health}`)).toEqual(['launcher0:grey', 'worker0:grey', 'worker1:grey']);
  });
  it('draws the Worker the diagnosis names in red', () => {
    const got = withGone([], job({ phase: 'Failed', reason: 'SSHConnectionRefused', message: 'Worker pod pi-node-0-1-abcde could not start /usr/sbin/sshd' }));
    expect(got.filter((p) => p.health === 'red').map((p) => p.index)).toEqual([1]);
  });
  it('draws the Launcher red when it failed', () => {
    const got = withGone([], job({ phase: 'Failed', reason: 'LauncherFailed', message: 'The Launcher exited with code 3.' }));
    expect(got.filter((p) => p.health === 'red').map((p) => p.role)).toEqual(['launcher']);
  });
});
