import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { act, cleanup, fireEvent, render, screen, waitFor } from '@testing-library/react';
import type { Job, JobPage } from '../../api/types';

// The list page asks the server for one page (filters, order, page in the
// stream's URL) and draws what comes back. The stream is mocked: the test
// reads the URL the page opens and hands it pages.
let streamUrl = '';
let onJobs: ((d: JobPage) => void) | undefined;
vi.mock('../../lib/useStream', () => ({
  useStream: (url: string, handlers: { jobs: (d: JobPage) => void }) => {
    streamUrl = url;
    onJobs = handlers.jobs;
    return '';
  },
}));
vi.mock('../../app/NamespacesContext', () => ({
  useNamespaces: () => ({ namespaces: [{ name: 'team-a', canCreate: true, canPatch: true, canDelete: true, canLogs: true }], error: '' }),
}));
const { JobsPage } = await import('./JobsPage');

beforeEach(() => {
  streamUrl = '';
  onJobs = undefined;
});
afterEach(cleanup);

const job = (name: string): Job => ({
  name, namespace: 'team-a', runtime: 'mpi-openmpi', mpi: true, phase: 'Running', workersReady: 2, workersTotal: 2,
  slotsPerWorker: 1, created: '2026-11-25T12:00:00Z', suspended: false, launcher: 'Running',
} as Job);
const query = () => Object.fromEntries(new URL(streamUrl, 'http://x').searchParams);
const send = (p: Partial<JobPage>) =>
  act(() => onJobs!({ jobs: [], total: 0, all: 0, runtimes: [], page: 1, perPage: 50, ...p }));

describe('JobsPage', () => {
  it('asks for the first page, newest first, and draws the rows sent', async () => {
    render(<JobsPage />);
    expect(query()).toEqual({ namespace: '', sort: 'created', order: 'desc', page: '1', perPage: '50' });
    await send({ jobs: [job('train-1'), job('train-2')], total: 10000, all: 10000, runtimes: ['mpi-mpich', 'mpi-openmpi'] });
    expect(screen.getByTestId('job-train-1')).toBeTruthy();
    expect(screen.getByTestId('job-train-2')).toBeTruthy();
    // The runtime filter offers what the server says the jobs use.
    expect(screen.getByRole('option', { name: 'mpi-mpich' })).toBeTruthy();
    // The pager counts every matching job, not the rows at hand.
    expect(document.body.textContent).toContain('10000');
  });

  it('pages, sorts and filters on the server', async () => {
    render(<JobsPage />);
    await send({ jobs: [job('train-1')], total: 120, all: 120, runtimes: ['mpi-openmpi'] });
    fireEvent.click(screen.getAllByRole('button', { name: /next page/i })[0]);
    await waitFor(() => expect(query().page).toBe('2'));
    fireEvent.click(screen.getByRole('button', { name: 'Name' }));
    await waitFor(() => expect(query()).toMatchObject({ sort: 'name', order: 'asc', page: '1' }));
    fireEvent.change(screen.getByLabelText('Phase'), { target: { value: 'Failed' } });
    await waitFor(() => expect(query().phase).toBe('Failed'));
    // The name goes out once typing pauses, not per key.
    fireEvent.change(screen.getByLabelText('Filter by name'), { target: { value: 'tr' } });
    expect(query().name).toBeUndefined();
    await waitFor(() => expect(query().name).toBe('tr'));
  });

  it('tells no jobs from no match', async () => {
    render(<JobsPage />);
    await send({ total: 0, all: 0 });
    expect(screen.getByText('No training jobs')).toBeTruthy();
    await send({ total: 0, all: 7 });
    expect(screen.getByText('No job matches the filters')).toBeTruthy();
  });
});
