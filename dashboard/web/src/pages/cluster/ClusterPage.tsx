// The Cluster page: what mpijob depends on, checked as the signed-in user
// (kubectl mpijob doctor's checks, pkg/doctor). What the user may not read
// is skipped, not failed.
import { useEffect, useMemo, useState } from 'react';
import { Alert, Button, FormSelect, FormSelectOption, Label, PageSection, Title } from '@patternfly/react-core';
import { Table, Tbody, Td, Th, Thead, Tr } from '@patternfly/react-table';
import { readUsage, runDoctor } from '../../api/doctor';
import type { Doctor, Usage } from '../../api/types';
import type { ApiError } from '../../api/client';
import { useNamespaces } from '../../app/NamespacesContext';

const color = (severity: string) => (severity === 'ok' ? 'green' : severity === 'error' ? 'red' : severity === 'warning' ? 'orange' : 'grey');

const summary: Record<string, string> = {
  ok: 'Everything mpijob depends on answers.',
  warning: 'mpijob works, with warnings below.',
  error: 'Problems below stop MPI jobs or their logs.',
};

export function ClusterPage() {
  const { namespaces: visible } = useNamespaces();
  const namespaces = useMemo(() => (visible ?? []).filter((n) => n.canCreate), [visible]);
  const [ns, setNs] = useState('');
  const [doc, setDoc] = useState<Doctor | null>(null);
  const [error, setError] = useState('');
  const [running, setRunning] = useState(false);
  useEffect(() => {
    if (!ns && namespaces.length) setNs(namespaces[0].name);
  }, [namespaces, ns]);
  const run = (namespace: string) => {
    setRunning(true);
    setError('');
    runDoctor(namespace).then(
      (d) => {
        setDoc(d);
        setRunning(false);
      },
      (e: ApiError) => {
        setError(e.message);
        setRunning(false);
      },
    );
  };
  useEffect(() => {
    if (ns) run(ns);
  }, [ns]);
  return (
    <>
      <PageSection>
        <Title headingLevel="h1">Cluster</Title>
        <p style={{ marginTop: 8 }}>
          What mpijob depends on, checked as you, as <code>kubectl mpijob doctor</code> does: the versions of Kubernetes, Trainer, JobSet and Kueue and whether
          they work together, mpijob&apos;s admission (a server dry run of a small job in the namespace below), the manager&apos;s leader, the log store, the
          runtimes&apos; images on the nodes and the certificates. A check you may not make is skipped.
        </p>
      </PageSection>
      <PageSection>
        <div style={{ display: 'flex', gap: 8, alignItems: 'center', marginBottom: 16 }}>
          <span>Admission check in namespace</span>
          <FormSelect aria-label="Namespace for the admission check" value={ns} onChange={(_, v) => setNs(v)} style={{ maxWidth: 240 }}>
            {namespaces.map((n) => <FormSelectOption key={n.name} value={n.name} label={n.name} />)}
          </FormSelect>
          <Button variant="secondary" onClick={() => run(ns)} isDisabled={!ns || running} isLoading={running}>Check again</Button>
        </div>
        {namespaces.length === 0 && visible && <Alert variant="info" isInline title="You may create jobs in no namespace, so the admission check cannot run." />}
        {error && <Alert variant="danger" isInline title={error} />}
        {doc && (
          <>
            <Alert variant={doc.worst === 'ok' ? 'success' : doc.worst === 'error' ? 'danger' : 'warning'} isInline title={summary[doc.worst] ?? doc.worst} data-testid="doctor-summary" style={{ marginBottom: 16 }} />
            <Table aria-label="Checks" variant="compact" data-testid="doctor-findings">
              <Thead>
                <Tr><Th>Check</Th><Th>Status</Th><Th>Finding</Th><Th>Fix</Th></Tr>
              </Thead>
              <Tbody>
                {doc.findings.map((f, i) => (
                  <Tr key={`${f.check}-${i}`}>
                    <Td>{f.check}</Td>
                    <Td><Label color={color(f.severity)}>{f.severity}</Label></Td>
                    <Td>{f.message}</Td>
                    <Td>{f.fix ?? ''}</Td>
                  </Tr>
                ))}
              </Tbody>
            </Table>
          </>
        )}
      </PageSection>
      <UsageSection />
    </>
  );
}

const fmt = (v: number) => (v === 0 ? '0' : v < 10 ? v.toFixed(3) : v.toFixed(1));

/** What MPI jobs used per namespace (kubectl mpijob usage): requests times how long pods were placed, and the CPU used. */
function UsageSection() {
  const [since, setSince] = useState('7d');
  const [u, setU] = useState<Usage | null>(null);
  const [error, setError] = useState('');
  useEffect(() => {
    setError('');
    readUsage(since).then(setU, (e: ApiError) => setError(e.message));
  }, [since]);
  return (
    <PageSection>
      <Title headingLevel="h2">Usage</Title>
      <p style={{ margin: '8px 0' }}>
        What MPI jobs asked for (requests, times how long their pods were placed) and the CPU they used, per namespace you may see, with its cost center
        (the namespace&apos;s label <code>mpijob.dev/cost-center</code>), as <code>kubectl mpijob usage</code> shows it.
      </p>
      <div style={{ display: 'flex', gap: 8, alignItems: 'center', marginBottom: 16 }}>
        <span>Over the last</span>
        <FormSelect aria-label="Usage window" value={since} onChange={(_, v) => setSince(v)} style={{ maxWidth: 160 }}>
          {['1h', '1d', '7d', '30d', '90d'].map((w) => <FormSelectOption key={w} value={w} label={w} />)}
        </FormSelect>
      </div>
      {error && <Alert variant="warning" isInline title={error} />}
      {u && u.rows.length === 0 && <Alert variant="info" isInline title={`No MPI job ran in a namespace you may see in the last ${u.since}.`} />}
      {u && u.rows.length > 0 && (
        <Table aria-label="Usage per namespace" variant="compact" data-testid="usage-table">
          <Thead>
            <Tr><Th>Namespace</Th><Th>Cost center</Th><Th>CPU-hours</Th><Th>CPU-hours used</Th><Th>Memory GiB-hours</Th><Th>GPU-hours</Th></Tr>
          </Thead>
          <Tbody>
            {u.rows.map((r) => (
              <Tr key={`${r.namespace}/${r.costCenter ?? ''}`}>
                <Td>{r.namespace}</Td>
                <Td>{r.costCenter || '-'}</Td>
                <Td>{fmt(r.cpuHours)}</Td>
                <Td>{fmt(r.cpuUsedHours)}</Td>
                <Td>{fmt(r.memoryGiBHours)}</Td>
                <Td>{fmt(r.gpuHours)}</Td>
              </Tr>
            ))}
          </Tbody>
        </Table>
      )}
    </PageSection>
  );
}
