import { describe, expect, it } from 'vitest';
import { bytes, lastStepTimes, metricsOf, progressText, seriesOf, stepSeconds } from './progress';
import type { ProgressPoint } from '../api/types';

describe('progressText', () => {
  it('says nothing for a job that reports no progress', () => {
    expect(progressText(undefined)).toBe('');
  });
  it('gives percent, epoch and time left', () => {
    expect(progressText({ progressPercentage: 45, currentEpoch: 9, totalEpochs: 20, estimatedRemainingTimeSummary: '2 minutes' })).toBe(
      '45% · epoch 9/20 · about 2 minutes left',
    );
  });
  it('prefers steps and drops "complete"', () => {
    expect(progressText({ progressPercentage: 100, currentStep: 500, totalSteps: 500, currentEpoch: 2, totalEpochs: 2, estimatedRemainingTimeSummary: 'complete' })).toBe(
      '100% · step 500/500',
    );
  });
});

describe('metricsOf', () => {
  it('puts loss and accuracy first', () => {
    expect(metricsOf({ progressPercentage: null, trainMetrics: { lr: 0.1, accuracy: 0.96666, loss: 0.123456 } })).toEqual([
      ['loss', '0.1235'],
      ['accuracy', '0.9667'],
      ['lr', '0.1'],
    ]);
  });
});

describe('seriesOf', () => {
  it('charts loss and accuracy by epoch, a rerun replacing earlier points', () => {
    const s = seriesOf([
      { epoch: 1, loss: 2, accuracy: 0.5 },
      { epoch: 2, loss: 1 },
      { epoch: 1, loss: 1.9, accuracy: 0.55 },
    ]);
    expect(s).toEqual([
      { name: 'loss', x: 'epoch', data: [{ x: 1, y: 1.9 }, { x: 2, y: 1 }] },
      { name: 'accuracy', x: 'epoch', data: [{ x: 1, y: 0.55 }] },
    ]);
  });
  it('uses steps when there are no epochs, and nothing without values', () => {
    expect(seriesOf([{ step: 10, loss: 3 }, { step: 20 }])).toEqual([{ name: 'loss', x: 'step', data: [{ x: 10, y: 3 }] }]);
    expect(seriesOf([])).toEqual([]);
  });
});

describe('bytes', () => {
  it('uses binary units', () => {
    expect(bytes(512)).toBe('512 B');
    expect(bytes(12600)).toBe('12.3 KiB');
    expect(bytes(4 << 20)).toBe('4.0 MiB');
  });
});

describe('lastStepTimes', () => {
  it('takes the last report with step times: the median and the slowest rank', () => {
    const got = lastStepTimes([
      { epoch: 1, rank_step_seconds: [0.2, 0.9] },
      { epoch: 2, rank_step_seconds: [0.2, 0.2, 0.62, 0.21] },
      { epoch: 3 },
    ] as ProgressPoint[]);
    expect(got).toMatchObject({ ranks: 4, slowest: 2, slowestSeconds: 0.62, others: 0.2 });
    expect(got!.median).toBeCloseTo(0.205, 9);
    expect(stepSeconds(got!.slowestSeconds)).toBe('0.62 s');
    expect(stepSeconds(0.012)).toBe('12 ms');
    expect(stepSeconds(0.00035)).toBe('0.35 ms');
  });
  it('is null without step times', () => {
    expect(lastStepTimes([{ epoch: 1 } as ProgressPoint])).toBeNull();
  });
});
