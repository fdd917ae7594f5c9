import { useEffect, useState } from 'react';
import { Alert, Card, CardBody, CardTitle, Content, DescriptionList, DescriptionListDescription, DescriptionListGroup, DescriptionListTerm, Flex, Progress, Spinner } from '@patternfly/react-core';
import { Chart, ChartAxis, ChartGroup, ChartLine, ChartThemeColor, ChartVoronoiContainer } from '@patternfly/react-charts/victory';
import { jobProgress } from '../../api/jobs';
import { live } from '../../lib/metrics';
import { lastStepTimes, metricsOf, progressText, seriesOf, stepSeconds, type Series } from '../../lib/progress';
import type { Phase, ProgressPoint, TrainerStatus } from '../../api/types';

// The Training tab: the progress the ranks report (docs/progress.md), and
// loss and accuracy over the epochs (or steps), read from the Launcher's
// log as the user. Refreshed every 10 s while the job runs.
export function TrainingTab({ namespace, name, phase, status }: { namespace: string; name: string; phase: Phase; status?: TrainerStatus }) {
  const [points, setPoints] = useState<ProgressPoint[] | null>(null);
  const [error, setError] = useState('');
  const running = live(phase);
  useEffect(() => {
    let stop = false;
    const load = () =>
      jobProgress(namespace, name)
        .then((r) => { if (!stop) { setPoints(r.points); setError(''); } })
        .catch((e: Error) => { if (!stop) setError(e.message); });
    load();
    const t = running ? window.setInterval(load, 10000) : undefined;
    return () => { stop = true; window.clearInterval(t); };
  }, [namespace, name, running]);

  if (error) return <Alert variant="warning" isInline title="No progress" data-testid="progress-error">{error}</Alert>;
  if (!points) return <Spinner aria-label="Loading the progress" />;
  const series = seriesOf(points);
  const steps = lastStepTimes(points);
  return (
    <Flex direction={{ default: 'column' }} gap={{ default: 'gapMd' }} style={{ marginTop: 16 }} data-testid="training">
      {status ? (
        <Card isCompact>
          <CardBody>
            <Progress
              value={status.progressPercentage ?? 0}
              title={progressText(status) || 'Progress'}
              aria-label="Training progress"
              data-testid="progress-bar"
              measureLocation={status.progressPercentage == null ? 'none' : 'outside'}
            />
            <DescriptionList isHorizontal isCompact style={{ marginTop: 12 }}>
              {metricsOf(status).map(([k, v]) => (
                <DescriptionListGroup key={k}>
                  <DescriptionListTerm>{k}</DescriptionListTerm>
                  <DescriptionListDescription data-testid={`metric-${k}`}>{v}</DescriptionListDescription>
                </DescriptionListGroup>
              ))}
              {status.lastUpdatedTime && (
                <DescriptionListGroup>
                  <DescriptionListTerm>Updated</DescriptionListTerm>
                  <DescriptionListDescription>{new Date(status.lastUpdatedTime).toLocaleTimeString([], { hour12: false })}</DescriptionListDescription>
                </DescriptionListGroup>
              )}
            </DescriptionList>
          </CardBody>
        </Card>
      ) : (
        <Content component="p" data-testid="no-progress">
          This job reports no progress. A training script reports it with one line per epoch or step:{' '}
          <code>MPIJOB_PROGRESS {'{"epoch": 3, "total_epochs": 20, "loss": 0.31, "accuracy": 0.9}'}</code> (Python:{' '}
          <code>mpijob.progress.report(...)</code>; see docs/progress.md).
        </Content>
      )}
      {steps && (
        <Card isCompact data-testid="step-times">
          <CardTitle>Step times</CardTitle>
          <CardBody>
            <Content component="p">
              Each rank's own work per step in the last report ({steps.ranks} ranks): median {stepSeconds(steps.median)}; slowest rank{' '}
              {steps.slowest}, {stepSeconds(steps.slowestSeconds)}
              {steps.others > 0 && ` (${(steps.slowestSeconds / steps.others).toFixed(1)}× the other ranks' median)`}. In synchronous training every rank
              waits for the slowest at each step.
            </Content>
          </CardBody>
        </Card>
      )}
      {series.map((s) => <SeriesChart key={s.name} s={s} />)}
    </Flex>
  );
}

const titles = { loss: 'Loss', accuracy: 'Accuracy' };

function SeriesChart({ s }: { s: Series }) {
  const ys = s.data.map((d) => d.y);
  const top = s.name === 'accuracy' ? 1 : Math.max(...ys) * 1.1;
  return (
    <Card isCompact data-testid={`chart-${s.name}`} data-points={s.data.length}>
      <CardTitle>{titles[s.name]} by {s.x}</CardTitle>
      <CardBody>
        <div style={{ height: 260 }}>
          <Chart
            ariaTitle={`${titles[s.name]} by ${s.x}`}
            containerComponent={<ChartVoronoiContainer labels={({ datum }: { datum: { x: number; y: number } }) => `${s.x} ${datum.x}: ${datum.y.toPrecision(4)}`} constrainToVisibleArea />}
            domain={{ y: [0, top] }}
            height={260}
            width={900}
            padding={{ top: 10, bottom: 70, left: 80, right: 40 }}
            themeColor={ChartThemeColor.multiUnordered}
          >
            <ChartAxis label={s.x} tickFormat={(t: number) => String(t)} fixLabelOverlap />
            <ChartAxis dependentAxis showGrid />
            <ChartGroup>
              <ChartLine name={s.name} data={s.data} />
            </ChartGroup>
          </Chart>
        </div>
      </CardBody>
    </Card>
  );
}
