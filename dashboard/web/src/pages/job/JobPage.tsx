import { lazy, Suspense, useRef, useState } from 'react';
import {
  Alert,
  Breadcrumb,
  BreadcrumbItem,
  Button,
  Card,
  CardBody,
  CardTitle,
  ClipboardCopy,
  Content,
  DescriptionList,
  DescriptionListDescription,
  DescriptionListGroup,
  DescriptionListTerm,
  Flex,
  Label,
  List,
  ListItem,
  Modal,
  ModalBody,
  ModalHeader,
  PageSection,
  ProgressStep,
  ProgressStepper,
  Spinner,
  Tab,
  Tabs,
  TabTitleText,
  Title,
} from '@patternfly/react-core';
import { Table, Tbody, Td, Th, Thead, Tr } from '@patternfly/react-table';
import { ClusterIcon, DownloadIcon } from '@patternfly/react-icons';
import { deleteJob, suspendJob } from '../../api/jobs';
import { apiRoutes } from '../../api/routes';
import { useNamespaces } from '../../app/NamespacesContext';
import { navigate, paths } from '../../app/routes';
import { DeleteJobModal } from '../../components/DeleteJobModal';
import { age, runTime, startsIn } from '../../lib/format';
import { useNow } from '../../lib/useNow';
import { ArtifactsTab } from './ArtifactsTab';
import { StacksTab } from './StacksTab';
import { LogViewer } from './LogViewer';
import { progressText } from '../../lib/progress';
import { jobSteps, stepParts } from '../../lib/steps';
import { PhaseBadge } from '../../components/PhaseBadge';
import type { Detail, KEvent, Pod, Transition } from '../../api/types';
import { useStream } from '../../lib/useStream';

// The charts library is loaded with the Metrics tab, not with every page.
const MetricsTab = lazy(() => import('./MetricsTab').then((m) => ({ default: m.MetricsTab })));
const TrainingTab = lazy(() => import('./TrainingTab').then((m) => ({ default: m.TrainingTab })));

export function JobPage({ namespace, name, tab }: { namespace: string; name: string; tab: string }) {
  const [detail, setDetail] = useState<Detail | null>(null);
  const detailRef = useRef<Detail | null>(null);
  detailRef.current = detail;
  const [events, setEvents] = useState<KEvent[]>([]);
  const [gone, setGone] = useState('');
  const [error, setError] = useState('');
  const [target, setTarget] = useState(new URLSearchParams(window.location.search).get('target') ?? 'launcher');
  const [pod, setPod] = useState<Pod | null>(null);
  const now = useNow();
  const problem = useStream(apiRoutes.stream(namespace, name), {
    job: (d: Detail) => { setDetail(d); setGone(''); },
    events: (d: { events: KEvent[] }) => setEvents(d.events),
    gone: (d: { error: string }) => setGone(detailRef.current ? `MPI job ${name} was deleted from namespace ${namespace} while this page was open.` : d.error),
    denied: (d: { error: string }) => setGone(d.error),
  });
  const setTab = (t: string) => navigate(paths.job(namespace, name, t));
  const [confirmDelete, setConfirmDelete] = useState(false);
  const act = async (what: 'suspend' | 'resume' | 'delete') => {
    setError('');
    try {
      if (what === 'delete') await deleteJob(namespace, name);
      else await suspendJob(namespace, name, what);
    } catch (e) {
      setError((e as Error).message);
    }
  };
  const job = detail?.job;
  // The same access the job list uses: actions the user may not take are
  // not offered (Clone and resubmit need create rights somewhere).
  const access = useNamespaces().namespaces ?? [];
  const here = access.find((n) => n.name === namespace);
  const canCreate = access.some((n) => n.canCreate);

  return (
    <>
      {problem && <Alert className="mpi-banner" variant="warning" isInline title={problem} data-testid="banner" />}
      <PageSection>
        <Breadcrumb>
          <BreadcrumbItem to="/" onClick={(e) => { e.preventDefault(); navigate('/'); }}>Training jobs</BreadcrumbItem>
          <BreadcrumbItem isActive>{namespace}/{name}</BreadcrumbItem>
        </Breadcrumb>
        <Flex alignItems={{ default: 'alignItemsCenter' }} style={{ marginTop: 12 }}>
          <Title headingLevel="h1">{name}</Title>
          {job?.mpi && <Label icon={<ClusterIcon />} color="blue">MPI</Label>}
          {job && <PhaseBadge phase={job.phase} queuePosition={job.queuePosition} />}
          {job && (
            <Flex style={{ marginLeft: 'auto' }}>
              {job.phase === 'Failed' && canCreate && (
                <Button variant="primary" onClick={() => navigate(paths.create({ namespace, name }, true))} data-testid="resubmit">Edit and resubmit</Button>
              )}
              {canCreate && (
                <Button variant="secondary" onClick={() => navigate(paths.create({ namespace, name }))} data-testid="clone">Clone</Button>
              )}
              {here?.canPatch && !job.phase.match(/Succeeded|Failed/) && (
                <Button variant="secondary" onClick={() => act(job.suspended ? 'resume' : 'suspend')}>{job.suspended ? 'Resume' : 'Suspend'}</Button>
              )}
              {here?.canDelete && <Button variant="danger" onClick={() => setConfirmDelete(true)} data-testid="delete">Delete</Button>}
            </Flex>
          )}
        </Flex>
      </PageSection>
      <PageSection>
        {gone && <Alert variant="danger" isInline title={gone} data-testid="gone"><Button variant="link" isInline onClick={() => navigate('/')}>Back to the job list</Button></Alert>}
        {error && <Alert variant="danger" isInline title={error} style={{ marginBottom: 12 }} />}
        {detail?.staleNote && <Alert variant="warning" isInline title={detail.staleNote} style={{ marginBottom: 12 }} data-testid="stale" />}
        {!detail && !gone ? (
          <Spinner aria-label="Loading the job" />
        ) : detail ? (
          <Tabs activeKey={tab} onSelect={(_e, k) => setTab(String(k))} aria-label="Job" mountOnEnter unmountOnExit>
            <Tab eventKey="overview" title={<TabTitleText>Overview</TabTitleText>}>
              <Overview detail={detail} now={now} />
            </Tab>
            <Tab eventKey="topology" title={<TabTitleText>Topology</TabTitleText>}>
              <Topology pods={detail.pods} onPod={setPod} />
            </Tab>
            <Tab eventKey="logs" title={<TabTitleText>Logs</TabTitleText>}>
              <LogViewer namespace={namespace} name={name} pods={detail.pods} target={target} onTarget={setTarget} />
            </Tab>
            <Tab eventKey="metrics" title={<TabTitleText>Metrics</TabTitleText>} data-testid="metrics-tab">
              <Suspense fallback={<Spinner aria-label="Loading the charts" />}>
                <MetricsTab namespace={namespace} name={name} phase={detail.job.phase} />
              </Suspense>
            </Tab>
            <Tab eventKey="training" title={<TabTitleText>Training</TabTitleText>} data-testid="training-tab">
              <Suspense fallback={<Spinner aria-label="Loading the charts" />}>
                <TrainingTab namespace={namespace} name={name} phase={detail.job.phase} status={detail.job.progress} />
              </Suspense>
            </Tab>
            <Tab eventKey="stacks" title={<TabTitleText>Stacks</TabTitleText>} data-testid="stacks-tab">
              <StacksTab namespace={namespace} name={name} phase={detail.job.phase} />
            </Tab>
            <Tab eventKey="artifacts" title={<TabTitleText>Artifacts</TabTitleText>} data-testid="artifacts-tab">
              <ArtifactsTab namespace={namespace} name={name} now={now} succeeded={detail.job.phase === 'Succeeded'} />
            </Tab>
            <Tab eventKey="events" title={<TabTitleText>Events</TabTitleText>}>
              <Events events={events} history={detail.history} />
            </Tab>
            <Tab eventKey="yaml" title={<TabTitleText>YAML</TabTitleText>}>
              <Yaml name={name} yaml={detail.yaml} />
            </Tab>
          </Tabs>
        ) : null}
      </PageSection>
      <DeleteJobModal job={confirmDelete ? { namespace, name } : null} onDelete={() => act('delete')} onClose={() => setConfirmDelete(false)} />
      <Modal isOpen={pod !== null} onClose={() => setPod(null)} variant="medium" aria-labelledby="pod-title">
        <ModalHeader title={pod ? podTitle(pod) : ''} labelId="pod-title" />
        <ModalBody>
          {pod && (
            <>
              <DescriptionList isHorizontal isCompact>
                <Item term="Pod">{pod.name}</Item>
                <Item term="Node">{pod.node ?? '-'}</Item>
                <Item term="State">{pod.state}{pod.detail ? `: ${pod.detail}` : ''}</Item>
                <Item term="Ready">{pod.ready ? 'yes' : 'no'}</Item>
                <Item term="Restarts">{pod.restarts}</Item>
                <Item term="Image">{pod.image ?? '-'}</Item>
              </DescriptionList>
              <Title headingLevel="h3" style={{ marginTop: 16 }}>Events</Title>
              <Events events={events.filter((e) => e.object.endsWith('/' + pod.name))} />
              <Button style={{ marginTop: 12 }} onClick={() => { setTarget(pod.role === 'launcher' ? 'launcher' : `worker-${pod.index}`); setPod(null); setTab('logs'); }}>
                View logs
              </Button>
            </>
          )}
        </ModalBody>
      </Modal>
    </>
  );
}

function podTitle(p: Pod) {
  return p.role === 'launcher' ? 'Launcher' : `Worker ${p.index}`;
}

function Item({ term, children }: { term: string; children: React.ReactNode }) {
  return (
    <DescriptionListGroup>
      <DescriptionListTerm>{term}</DescriptionListTerm>
      <DescriptionListDescription>{children}</DescriptionListDescription>
    </DescriptionListGroup>
  );
}

const ORDER = ['Pending', 'Queued', 'GangScheduling', 'Starting', 'Running', 'Succeeded'];

function Overview({ detail, now }: { detail: Detail; now: number }) {
  const j = detail.job;
  const at = j.phase === 'Failed' ? ORDER.indexOf(j.transitioned && j.started ? 'Running' : 'Starting') : ORDER.indexOf(j.phase);
  const steps: [string, string, string | undefined][] = [
    ['Submitted', 'Pending', j.created],
    ['Queued / scheduled', 'GangScheduling', undefined],
    ['Starting', 'Starting', undefined],
    ['Running', 'Running', j.started],
    [j.phase === 'Failed' ? 'Failed' : 'Succeeded', 'Succeeded', j.finished],
  ];
  const r = detail.resources;
  return (
    <Flex direction={{ default: 'column' }} gap={{ default: 'gapMd' }} style={{ marginTop: 16 }}>
      {j.progress && progressText(j.progress) && (
        <Content component="p" data-testid="overview-progress">
          <b>Training:</b> {progressText(j.progress)}
        </Content>
      )}
      <ProgressStepper aria-label="Phase timeline">
        {steps.map(([title, phase, time], i) => {
          const idx = ORDER.indexOf(phase);
          let variant: 'success' | 'info' | 'pending' | 'danger' = idx < at || j.phase === 'Succeeded' ? 'success' : idx === at ? 'info' : 'pending';
          if (i === steps.length - 1 && j.phase === 'Failed') variant = 'danger';
          return (
            <ProgressStep key={title} id={`step-${i}`} titleId={`step-${i}-title`} variant={variant} isCurrent={idx === at} description={time ? new Date(time).toLocaleString() : undefined}>
              {title}
            </ProgressStep>
          );
        })}
      </ProgressStepper>
      {(j.reason || j.message) && (
        <Card data-testid="diagnosis" isCompact>
          <CardTitle>
            {j.phase === 'Failed' ? 'Why it failed' : 'What is happening'}
            {/* A succeeded job with a reason has a warning (its model was not registered): orange. */}
            {j.reason && <Label color={j.phase === 'Failed' ? 'red' : j.phase === 'Succeeded' ? 'orange' : 'blue'} style={{ marginLeft: 8 }} data-testid="reason">{j.reason}</Label>}
          </CardTitle>
          <CardBody>
            <p>{j.message}</p>
            {j.estimate && (
              <p data-testid="estimate" style={{ marginTop: 8 }}>
                {startsIn(j.estimate.start) ? <><strong>Estimated start: {startsIn(j.estimate.start)}</strong> </> : <strong>No start estimate: </strong>}
                ({j.estimate.basis}).
              </p>
            )}
            {j.nextStep && (
              <>
                <Title headingLevel="h4" style={{ marginTop: 8 }}>Next steps, most likely fix first</Title>
                <List isPlain={false} component="ol" aria-label="Next steps">
                  {jobSteps(j).map((s, i) => {
                    const p = stepParts(s);
                    return (
                      <ListItem key={i}>
                        {p.before}
                        {p.command && (
                          <ClipboardCopy isReadOnly hoverTip="Copy" clickTip="Copied" variant="inline-compact" isCode aria-label="Command">
                            {p.command}
                          </ClipboardCopy>
                        )}
                        {p.after}
                      </ListItem>
                    );
                  })}
                </List>
              </>
            )}
          </CardBody>
        </Card>
      )}
      <DescriptionList columnModifier={{ default: '2Col' }}>
        <Item term="Resources">{r ? r.summary : '-'}</Item>
        <Item term="Launcher">{r ? Object.entries(r.launcher).map(([k, v]) => `${k} ${v}`).join(', ') || 'runtime default' : '-'}</Item>
        <Item term="Workers ready">{j.workersReady}/{j.workersTotal}</Item>
        <Item term="Slots per worker">{j.slotsPerWorker || '-'}</Item>
        <Item term="Runtime">{j.runtime}{detail.runtimeKind === 'TrainingRuntime' ? ' (with the job’s own images or resources)' : ''}</Item>
        <Item term="Images">{r ? (r.workerImage === r.launcherImage ? r.workerImage : `Workers ${r.workerImage}, Launcher ${r.launcherImage}`) : '-'}</Item>
        <Item term="Created">{new Date(j.created).toLocaleString()} ({age(j.created, now)} ago)</Item>
        <Item term="Creator">{j.creator ?? '-'}</Item>
        <Item term="Started">
          {j.started ? new Date(j.started).toLocaleString() : '-'}
          {j.attemptStarted && ` (this attempt: ${new Date(j.attemptStarted).toLocaleString()})`}
        </Item>
        <Item term="Duration">{runTime(j.started, j.finished, now)}</Item>
        {detail.resumedLine && <Item term="Resumed"><span data-testid="resumed">{detail.resumedLine}</span></Item>}
        {detail.attemptsLine && <Item term="Attempts"><span data-testid="attempts">{detail.attemptsLine}</span></Item>}
        {detail.settings?.description && <Item term="Description">{detail.settings.description}</Item>}
        {detail.settings?.priority && <Item term="Priority">{detail.settings.priority} (Kueue WorkloadPriorityClass)</Item>}
        {detail.settings?.timeout && <Item term="Timeout">{detail.settings.timeout} (the job is stopped after it)</Item>}
        {!!detail.settings?.retries && <Item term="Retries">up to {detail.settings.retries} (the whole job starts again after a failure)</Item>}
        {!!detail.settings?.gracePeriod && (
          <Item term="Grace period">{detail.settings.gracePeriod} (the ranks get SIGTERM and this long to save a checkpoint when the job is stopped)</Item>
        )}
        {!!detail.dataConnections?.length && <Item term="Data connections">{detail.dataConnections.join(', ')} (keys from their Secrets)</Item>}
        {!!detail.pvcs?.length && <Item term="PVCs">{detail.pvcs.map((m) => `${m.name} at ${m.path}`).join(', ')}</Item>}
        {!!detail.configMaps?.length && <Item term="ConfigMaps">{detail.configMaps.map((m) => `${m.name} at ${m.path} (read-only)`).join(', ')}</Item>}
        {detail.command && <Item term="Command"><code data-testid="command">{detail.command}</code></Item>}
        {!!detail.env?.length && <Item term="Env">{detail.env.join(', ')}</Item>}
        {r && <Item term="Worker limits">{Object.entries(r.workerLimits ?? {}).map(([k, v]) => `${k} ${v}`).join(', ') || 'none'}</Item>}
        {!!detail.policy?.length && <Item term="Runtime policy">{detail.policy.join('; ')}</Item>}
      </DescriptionList>
    </Flex>
  );
}

function Topology({ pods, onPod }: { pods: Pod[]; onPod: (p: Pod) => void }) {
  const launcher = pods.filter((p) => p.role === 'launcher');
  const workers = pods.filter((p) => p.role === 'worker');
  if (pods.length === 0) return <Alert variant="info" isInline title="The job has no pods now: not started yet, or finished and cleaned up." style={{ marginTop: 16 }} />;
  const node = (p: Pod) => (
    <button key={p.name} className="mpi-node" data-health={p.health} data-testid={`pod-${p.role}-${p.index}`} onClick={() => onPod(p)} aria-label={`${podTitle(p)}: ${p.state}`}>
      <strong>{podTitle(p)}</strong>
      <div>{p.state}</div>
      <small>{p.node ?? (p.phase === 'Gone' ? '-' : 'not placed')}{p.restarts ? ` · ${p.restarts} restarts` : ''}</small>
    </button>
  );
  return (
    <div style={{ marginTop: 16 }}>
      <div className="mpi-topology">
        <div>{launcher.map(node)}</div>
        <div className="mpi-workers">{workers.map(node)}</div>
      </div>
      <p style={{ marginTop: 12 }}><small>Green: healthy · yellow: pending or starting · red: failed · grey: gone. Click a pod for its node, state, events and logs.</small></p>
    </div>
  );
}

function Events({ events, history }: { events: KEvent[]; history?: Transition[] }) {
  if (events.length === 0 && history && history.length > 0) {
    return (
      <>
        <Alert variant="info" isInline style={{ marginTop: 12 }} data-testid="history-note"
          title="No Events are left in the cluster (they expire); these are the job's transitions as its status kept them." />
        <Table aria-label="Transitions" variant="compact" data-testid="history">
          <Thead>
            <Tr>
              <Th>Time</Th>
              <Th>Phase</Th>
              <Th>Reason</Th>
              <Th>Message</Th>
            </Tr>
          </Thead>
          <Tbody>
            {history.map((t, i) => (
              <Tr key={i}>
                <Td>{new Date(t.time).toLocaleString()}</Td>
                <Td>{t.phase}</Td>
                <Td>{t.reason ?? '-'}</Td>
                <Td>{t.message}</Td>
              </Tr>
            ))}
          </Tbody>
        </Table>
      </>
    );
  }
  if (events.length === 0) return <p style={{ marginTop: 12 }}>No events.</p>;
  return (
    <Table aria-label="Events" variant="compact" data-testid="events">
      <Thead>
        <Tr>
          <Th>Time</Th>
          <Th>Type</Th>
          <Th>Reason</Th>
          <Th>Object</Th>
          <Th>Message</Th>
        </Tr>
      </Thead>
      <Tbody>
        {events.map((e, i) => (
          <Tr key={i}>
            <Td>{new Date(e.time).toLocaleTimeString()}</Td>
            <Td>{e.type === 'Warning' ? <Label color="orange">Warning</Label> : e.type}</Td>
            <Td>{e.reason}</Td>
            <Td>{e.object}</Td>
            <Td>
              {e.forged && (
                <Label color="red" isCompact style={{ marginRight: 8 }} data-testid="forged-event">
                  not written by mpijob-manager
                </Label>
              )}
              {e.message}
              {e.count > 1 ? ` (×${e.count})` : ''}
            </Td>
          </Tr>
        ))}
      </Tbody>
    </Table>
  );
}

function Yaml({ name, yaml }: { name: string; yaml: string }) {
  const download = () => {
    const a = document.createElement('a');
    a.href = URL.createObjectURL(new Blob([yaml], { type: 'application/yaml' }));
    a.download = `${name}.yaml`;
    a.click();
    URL.revokeObjectURL(a.href);
  };
  return (
    <div style={{ marginTop: 16 }}>
      <Flex>
        <ClipboardCopy isReadOnly hoverTip="Copy" clickTip="Copied" variant="inline-compact" isCode>{yaml}</ClipboardCopy>
        <Button variant="secondary" icon={<DownloadIcon />} onClick={download}>Download</Button>
      </Flex>
      <pre className="mpi-log" data-testid="yaml" tabIndex={0} aria-label="YAML">{yaml}</pre>
    </div>
  );
}
