import { useEffect, useState } from 'react';
import { Alert, Card, CardBody, CardTitle, Content, Flex, FlexItem, Label, Spinner } from '@patternfly/react-core';
import {
  Chart,
  ChartArea,
  ChartAxis,
  ChartGroup,
  ChartLegend,
  ChartLine,
  ChartThemeColor,
  ChartVoronoiContainer,
} from '@patternfly/react-charts/victory';
import { jobMetrics } from '../../api/jobs';
import { bandText, formatValue, linesOf, live, maxOf, phaseColors, type ChartLine as Line, type MetricKind } from '../../lib/metrics';
import type { Metrics, Phase, PhaseBand } from '../../api/types';

const titles: Record<MetricKind, string> = {
  cpu: 'CPU per pod',
  memory: 'Memory per pod (working set)',
  gpu: 'GPU utilisation per pod',
};

// The Metrics tab: CPU and memory of the Launcher and each Worker over the
// job's life (GPU where the cluster exports it), with the job's phases as
// bands behind the lines. Refreshed every 15 s while the job runs.
export function MetricsTab({ namespace, name, phase }: { namespace: string; name: string; phase: Phase }) {
  const [m, setM] = useState<Metrics | null>(null);
  const [error, setError] = useState('');
  const running = live(phase);
  useEffect(() => {
    let stop = false;
    const load = () =>
      jobMetrics(namespace, name)
        .then((r) => { if (!stop) { setM(r); setError(''); } })
        .catch((e: Error) => { if (!stop) setError(e.message); });
    load();
    const t = running ? window.setInterval(load, 15000) : undefined;
    return () => { stop = true; window.clearInterval(t); };
  }, [namespace, name, running]);

  if (error) return <Alert variant="warning" isInline title="No metrics" data-testid="metrics-error">{error}</Alert>;
  if (!m) return <Spinner aria-label="Loading the metrics" />;
  const kinds: MetricKind[] = ['cpu', 'memory'];
  if (linesOf(m, 'gpu').length > 0) kinds.push('gpu');
  return (
    <Flex direction={{ default: 'column' }} gap={{ default: 'gapMd' }} data-testid="metrics">
      <Content component="small">{m.how}</Content>
      <Phases bands={m.phases} />
      {kinds.map((k) => (
        <MetricChart key={k} metric={k} lines={linesOf(m, k)} bands={m.phases} start={new Date(m.start)} end={new Date(m.end)} />
      ))}
      {!kinds.includes('gpu') && (
        <Content component="small" data-testid="no-gpu-metrics">
          No GPU series: GPU utilisation shows where the cluster runs NVIDIA's DCGM exporter and the job asks for GPUs.
        </Content>
      )}
    </Flex>
  );
}

function Phases({ bands }: { bands: PhaseBand[] }) {
  return (
    <Flex gap={{ default: 'gapSm' }} data-testid="phase-bands" aria-label="Phases">
      {bands.map((b, i) => (
        <FlexItem key={i}>
          <Label variant="outline" data-phase={b.phase} style={{ borderLeft: `6px solid ${phaseColors[b.phase] ?? '#8a8d90'}` }}>
            {bandText(b)}
          </Label>
        </FlexItem>
      ))}
    </Flex>
  );
}

function MetricChart({ metric, lines, bands, start, end }: { metric: MetricKind; lines: Line[]; bands: PhaseBand[]; start: Date; end: Date }) {
  const top = maxOf(lines) * 1.15;
  const points = lines.reduce((n, l) => n + l.data.length, 0);
  return (
    <Card isCompact data-testid={`chart-${metric}`} data-series={lines.length} data-points={points}>
      <CardTitle>{titles[metric]}</CardTitle>
      <CardBody>
        {lines.length === 0 ? (
          <Content component="p">
            No samples yet: the kubelets report a container once it has run for a scrape or two.
          </Content>
        ) : (
          <div style={{ height: 260 }}>
            <Chart
              ariaTitle={titles[metric]}
              containerComponent={
                <ChartVoronoiContainer
                  voronoiBlacklist={bands.map((_b, i) => `band-${i}`)}
                  labels={({ datum }: { datum: { childName?: string; y: number } }) => `${datum.childName}: ${formatValue(metric, datum.y)}`}
                  constrainToVisibleArea
                />
              }
              domain={{ x: [start, end], y: [0, top] }}
              scale={{ x: 'time', y: 'linear' }}
              height={260}
              width={900}
              padding={{ top: 10, bottom: 50, left: 80, right: 190 }}
              legendData={lines.map((l) => ({ name: l.name }))}
              legendOrientation="vertical"
              legendPosition="right"
              legendComponent={<ChartLegend />}
              themeColor={ChartThemeColor.multiUnordered}
            >
              <ChartAxis tickFormat={(t: Date) => t.toLocaleTimeString([], { hour12: false })} fixLabelOverlap />
              <ChartAxis dependentAxis showGrid tickFormat={(v: number) => formatValue(metric, v)} />
              {bands.map((b, i) => (
                <ChartArea
                  key={`band-${i}`}
                  name={`band-${i}`}
                  data={[{ x: new Date(b.start), y: top }, { x: new Date(b.end), y: top }]}
                  style={{ data: { fill: phaseColors[b.phase] ?? '#8a8d90', fillOpacity: 0.1, stroke: 'none' } }}
                />
              ))}
              <ChartGroup>
                {lines.map((l) => (
                  <ChartLine key={l.name} name={l.name} data={l.data} />
                ))}
              </ChartGroup>
            </Chart>
          </div>
        )}
      </CardBody>
    </Card>
  );
}
