import { afterEach, describe, expect, it, vi } from 'vitest';
import { act, cleanup, render, screen, waitFor } from '@testing-library/react';
import type { Pod } from '../../api/types';

// The log arrives as a stream read chunk by chunk; each chunk is handed to
// the page at the next animation frame. The API call is mocked: the stream
// is a ReadableStream the test feeds.
let feed: ReadableStreamDefaultController<Uint8Array>;
vi.mock('../../api/client', () => ({
  openText: async () => new Response(new ReadableStream<Uint8Array>({ start: (c) => { feed = c; } })),
}));
// PatternFly's LogViewer measures text on a canvas, which jsdom lacks: a
// stand-in draws the lines the page hands it, one row each.
vi.mock('@patternfly/react-log-viewer', () => ({
  LogViewer: ({ data }: { data: string[] }) => <div>{data.map((l, i) => <div key={i} className="row">{l}</div>)}</div>,
}));
const { LogViewer } = await import('./LogViewer');

afterEach(cleanup);

const pods: Pod[] = [
  { name: 'stuck-launcher-0-0-abcde', role: 'launcher', index: 0, phase: 'Running', ready: true, restarts: 0, state: 'Running', health: 'green', started: '2026-11-25T12:00:00Z' },
];
const rows = () => Array.from(document.querySelectorAll('[data-testid=log] .row')).map((e) => e.textContent);
const frame = () => act(() => new Promise<void>((r) => requestAnimationFrame(() => setTimeout(r, 0))));

describe('LogViewer', () => {
  // A stream that brings its lines in several reads (a job that prints as
  // it runs, or a loaded API server) shows every line, not the first read's
  // (the lines were once one array grown in place, which React took for
  // "unchanged": the count said 5 lines, the viewer drew 3).
  it('shows the lines of every read of a followed log', async () => {
    render(<LogViewer namespace="team-a" name="stuck" pods={pods} target="launcher" onTarget={() => {}} />);
    await waitFor(() => expect(feed).toBeDefined());
    const enc = new TextEncoder();
    await act(async () => feed.enqueue(enc.encode('[1,0]<stdout>:rank 0 up\n[1,1]<stdout>:rank 1 up\n[1,1]<stderr>:Traceback (most recent call last):\n')));
    await frame();
    await waitFor(() => expect(rows()).toHaveLength(3));
    await act(async () => feed.enqueue(enc.encode('[1,1]<stderr>:  File "<string>", line 7, in <module>\n[1,1]<stderr>:RuntimeError: rank one cannot go on\n')));
    await frame();
    await waitFor(() => expect(screen.getByTestId('log-count').textContent).toContain('5 lines'));
    await waitFor(() => expect(rows()).toHaveLength(5));
    expect(rows()[4]).toContain('RuntimeError: rank one cannot go on');
  });
});
