import { useEffect, useMemo, useState } from 'react';
import {
  Alert,
  Button,
  EmptyState,
  EmptyStateBody,
  FormSelect,
  FormSelectOption,
  PageSection,
  Pagination,
  SearchInput,
  Spinner,
  Title,
  Toolbar,
  ToolbarContent,
  ToolbarItem,
  Tooltip,
} from '@patternfly/react-core';
import { Table, Tbody, Td, Th, Thead, Tr, type ThProps } from '@patternfly/react-table';
import { ClusterIcon } from '@patternfly/react-icons';
import { deleteJob, suspendJob } from '../../api/jobs';
import { apiRoutes, type JobQuery } from '../../api/routes';
import { DeleteJobModal } from '../../components/DeleteJobModal';
import { useNamespaces } from '../../app/NamespacesContext';
import { age, runTime, startsIn } from '../../lib/format';
import { progressText } from '../../lib/progress';
import { navigate, paths } from '../../app/routes';
import { PhaseBadge } from '../../components/PhaseBadge';
import type { Job, JobPage, Phase } from '../../api/types';
import { useNow } from '../../lib/useNow';
import { useStream } from '../../lib/useStream';

const PHASES: Phase[] = ['Pending', 'Queued', 'GangScheduling', 'Starting', 'Running', 'Succeeded', 'Failed', 'Suspended'];
type SortKey = JobQuery['sort'];
/** How long the name filter waits for typing to pause before it asks the server. */
const TYPING_MS = 250;

export function JobsPage() {
  const params = new URLSearchParams(window.location.search);
  const { namespaces, error: nsError } = useNamespaces();
  const [ns, setNs] = useState(params.get('namespace') ?? '');
  // One page of the list: the server filters, sorts and pages, so 10,000
  // jobs cost one page's rows (dashboard/jobpage.go).
  const [data, setData] = useState<JobPage | null>(null);
  const [error, setError] = useState('');
  const [name, setName] = useState('');
  const [nameQuery, setNameQuery] = useState('');
  const [runtime, setRuntime] = useState('');
  const [phase, setPhase] = useState('');
  const [sort, setSort] = useState<{ key: SortKey; asc: boolean }>({ key: 'created', asc: false });
  const [page, setPage] = useState(1);
  const [perPage, setPerPage] = useState(50);
  const [confirm, setConfirm] = useState<Job | null>(null);
  const now = useNow();

  useEffect(() => {
    if (nsError) setError(nsError);
  }, [nsError]);
  // The name filter asks the server once typing pauses, not per key.
  useEffect(() => {
    const t = setTimeout(() => setNameQuery(name), TYPING_MS);
    return () => clearTimeout(t);
  }, [name]);
  const url = apiRoutes.jobsStream(ns, { name: nameQuery, runtime, phase, sort: sort.key, asc: sort.asc, page, perPage });
  const problem = useStream(url, {
    jobs: (d: JobPage) => setData(d),
  });
  const access = useMemo(() => new Map((namespaces ?? []).map((n) => [n.name, n])), [namespaces]);
  // Every runtime the jobs use, and the one chosen even when no job uses it now.
  const runtimes = useMemo(() => [...new Set([...(data?.runtimes ?? []), ...(runtime ? [runtime] : [])])].sort(), [data, runtime]);
  const pageRows: Job[] = data?.jobs ?? [];
  const withProgress = pageRows.some((j) => progressText(j.progress) !== '');
  const sortBy = (key: SortKey, index: number): ThProps['sort'] => ({
    sortBy: { index: ['name', 'namespace', 'phase', 'created'].indexOf(sort.key), direction: sort.asc ? 'asc' : 'desc' },
    onSort: (_e, _i, direction) => { setSort({ key, asc: direction === 'asc' }); setPage(1); },
    columnIndex: index,
  });
  const act = async (j: Job, what: 'suspend' | 'resume' | 'delete') => {
    setError('');
    try {
      if (what === 'delete') await deleteJob(j.namespace, j.name);
      else await suspendJob(j.namespace, j.name, what);
    } catch (e) {
      setError((e as Error).message);
    }
  };

  return (
    <>
      {problem && <Alert className="mpi-banner" variant="warning" isInline title={problem} data-testid="banner" />}
      <PageSection>
        <div style={{ display: 'flex', alignItems: 'center' }}>
          <Title headingLevel="h1">Training jobs</Title>
          {(namespaces ?? []).some((n) => n.canCreate) && (
            <Button variant="primary" style={{ marginLeft: 'auto' }} onClick={() => navigate(paths.create())} data-testid="create">Create MPI job</Button>
          )}
        </div>
      </PageSection>
      <PageSection>
        {error && <Alert variant="danger" isInline title={error} style={{ marginBottom: 12 }} />}
        <Toolbar>
          <ToolbarContent>
            <ToolbarItem>
              <FormSelect aria-label="Namespace" value={ns} onChange={(_e, v) => { setNs(v); setData(null); setPage(1); }}>
                <FormSelectOption value="" label="All namespaces" />
                {(namespaces ?? []).map((n) => (
                  <FormSelectOption key={n.name} value={n.name} label={n.name} />
                ))}
              </FormSelect>
            </ToolbarItem>
            <ToolbarItem>
              <SearchInput aria-label="Filter by name" placeholder="Filter by name" value={name} onChange={(_e, v) => { setName(v); setPage(1); }} onClear={() => { setName(''); setPage(1); }} />
            </ToolbarItem>
            <ToolbarItem>
              <FormSelect aria-label="Runtime" value={runtime} onChange={(_e, v) => { setRuntime(v); setPage(1); }}>
                <FormSelectOption value="" label="All runtimes" />
                {runtimes.map((r) => (
                  <FormSelectOption key={r} value={r} label={r} />
                ))}
              </FormSelect>
            </ToolbarItem>
            <ToolbarItem>
              <FormSelect aria-label="Phase" value={phase} onChange={(_e, v) => { setPhase(v); setPage(1); }}>
                <FormSelectOption value="" label="All phases" />
                {PHASES.map((p) => (
                  <FormSelectOption key={p} value={p} label={p} />
                ))}
              </FormSelect>
            </ToolbarItem>
            <ToolbarItem variant="pagination" align={{ default: 'alignEnd' }}>
              {/* The page the server sent: the last one, when fewer jobs match than the page asked for. */}
              <Pagination itemCount={data?.total ?? 0} perPage={perPage} page={data?.page ?? page} onSetPage={(_e, p) => setPage(p)} onPerPageSelect={(_e, p) => { setPerPage(p); setPage(1); }} isCompact />
            </ToolbarItem>
          </ToolbarContent>
        </Toolbar>
        {data === null ? (
          <Spinner aria-label="Loading jobs" />
        ) : data.total === 0 ? (
          <EmptyState titleText={data.all ? 'No job matches the filters' : 'No training jobs'} headingLevel="h2">
            <EmptyStateBody>
              {data.all ? 'Clear the filters to see every job.' : 'Create one with `kubectl mpijob create NAME --workers 2` or the Python SDK.'}
            </EmptyStateBody>
          </EmptyState>
        ) : (
          <Table aria-label="Training jobs" variant="compact" data-testid="jobs">
            {/* The Progress column shows only when some job reports progress: jobs that report none look as they always did. */}
            <Thead>
              <Tr>
                <Th sort={sortBy('name', 0)}>Name</Th>
                <Th sort={sortBy('namespace', 1)}>Namespace</Th>
                <Th sort={sortBy('phase', 2)}>Phase</Th>
                <Th>Runtime</Th>
                <Th>Workers ready</Th>
                {withProgress && <Th>Progress</Th>}
                <Th>Creator</Th>
                <Th sort={sortBy('created', 3)}>Age</Th>
                <Th>Duration</Th>
                <Th screenReaderText="Actions" />
              </Tr>
            </Thead>
            <Tbody>
              {pageRows.map((j) => {
                const a = access.get(j.namespace);
                const href = paths.job(j.namespace, j.name);
                return (
                  <Tr key={j.namespace + '/' + j.name} data-testid={`job-${j.name}`}>
                    <Td dataLabel="Name">
                      {j.mpi && (
                        <Tooltip content="MPI job">
                          <ClusterIcon aria-label="MPI job" style={{ marginRight: 6 }} />
                        </Tooltip>
                      )}
                      <a href={href} onClick={(e) => { e.preventDefault(); navigate(href); }}>{j.name}</a>
                    </Td>
                    <Td dataLabel="Namespace">{j.namespace}</Td>
                    <Td dataLabel="Phase">
                      <PhaseBadge phase={j.phase} queuePosition={j.queuePosition} />
                      {j.estimate && startsIn(j.estimate.start) && <div style={{ fontSize: 12 }} title={j.estimate.basis}>starts {startsIn(j.estimate.start)}</div>}
                    </Td>
                    <Td dataLabel="Runtime">{j.runtime}</Td>
                    <Td dataLabel="Workers ready">{j.workersReady}/{j.workersTotal}</Td>
                    {withProgress && <Td dataLabel="Progress" data-testid={`progress-${j.name}`}>{progressText(j.progress) || '-'}</Td>}
                    <Td dataLabel="Creator">{j.creator ?? '-'}</Td>
                    <Td dataLabel="Age">{age(j.created, now)}</Td>
                    <Td dataLabel="Duration">{runTime(j.started, j.finished, now)}</Td>
                    <Td isActionCell>
                      <Button variant="link" isInline onClick={() => navigate(paths.job(j.namespace, j.name, 'logs'))} aria-label={`Logs of ${j.name}`}>Logs</Button>{' '}
                      {a?.canPatch && !j.phase.match(/Succeeded|Failed/) && (
                        <Button variant="link" isInline onClick={() => act(j, j.suspended ? 'resume' : 'suspend')}>{j.suspended ? 'Resume' : 'Suspend'}</Button>
                      )}{' '}
                      {a?.canDelete && (
                        <Button variant="link" isDanger isInline onClick={() => setConfirm(j)} aria-label={`Delete ${j.name}`}>Delete</Button>
                      )}
                    </Td>
                  </Tr>
                );
              })}
            </Tbody>
          </Table>
        )}
      </PageSection>
      <DeleteJobModal job={confirm} onDelete={() => { if (confirm) act(confirm, 'delete'); }} onClose={() => setConfirm(null)} />
    </>
  );
}
