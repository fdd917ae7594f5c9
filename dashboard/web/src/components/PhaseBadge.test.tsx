import { afterEach, describe, expect, it } from 'vitest';
import { cleanup, render, screen } from '@testing-library/react';
import { PhaseBadge } from './PhaseBadge';

afterEach(cleanup);

describe('PhaseBadge', () => {
  it('shows a queued job with its position', () => {
    render(<PhaseBadge phase="Queued" queuePosition={3} />);
    const badge = screen.getByTestId('phase');
    expect(badge.textContent).toBe('Queued (#3)');
    expect(badge.getAttribute('data-phase')).toBe('Queued');
  });
  it('colours Failed red and Running green (seed 002)', () => {
    const { container } = render(
      <>
        <PhaseBadge phase="Failed" />
        <PhaseBadge phase="Running" />
        <PhaseBadge phase="Pending" />
      </>,
    );
    const labels = [...container.querySelectorAll('[data-testid="phase"]')];
    expect(labels.map((l) => l.className.match(/pf-m-(red|green|blue)/)?.[1])).toEqual(['red', 'green', 'blue']);
  });
});
