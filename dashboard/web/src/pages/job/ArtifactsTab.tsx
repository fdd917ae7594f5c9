import { useEffect, useState } from 'react';
import { Alert, Button, Content, Spinner } from '@patternfly/react-core';
import { Table, Tbody, Td, Th, Thead, Tr } from '@patternfly/react-table';
import { jobArtifacts } from '../../api/jobs';
import { apiRoutes } from '../../api/routes';
import { age } from '../../lib/format';
import { bytes } from '../../lib/progress';
import type { ArtifactList } from '../../api/types';
import { RegisterModelModal } from './RegisterModelModal';

// The Artifacts tab: what the job wrote to its $MPIJOB_OUTPUT_URI, under
// s3://BUCKET/JOB/ on its first data connection or under /mnt/CLAIM/JOB/ on
// its PVC (read through a short-lived pod), read as the user; each can be
// downloaded.
export function ArtifactsTab({ namespace, name, now, succeeded }: { namespace: string; name: string; now: number; succeeded?: boolean }) {
  const [list, setList] = useState<ArtifactList | null>(null);
  const [registering, setRegistering] = useState(false);
  const [error, setError] = useState('');
  const [tick, setTick] = useState(0);
  useEffect(() => {
    let stop = false;
    jobArtifacts(namespace, name)
      .then((r) => { if (!stop) { setList(r); setError(''); } })
      .catch((e: Error) => { if (!stop) setError(e.message); });
    return () => { stop = true; };
  }, [namespace, name, tick]);

  if (error) return <Alert variant="warning" isInline title="The artifacts cannot be read" data-testid="artifacts-error" style={{ marginTop: 16 }}>{error}</Alert>;
  if (!list) return <Spinner aria-label="Loading the artifacts" />;
  if (list.message && list.objects.length === 0 && !list.uri) {
    return <Content component="p" style={{ marginTop: 16 }} data-testid="artifacts-none">{list.message}</Content>;
  }
  return (
    <div style={{ marginTop: 16 }} data-testid="artifacts">
      <Content component="p">
        {list.uri}{' '}
        {list.claim ? <>on PVC <b>{list.claim}</b>, read through a short-lived pod that mounts it read-only</> : <>on data connection <b>{list.connection}</b></>}{' '}
        <Button variant="link" isInline onClick={() => setTick((t) => t + 1)}>Refresh</Button>
      </Content>
      {succeeded && (list.models ?? []).length > 0 && (
        <Button variant="secondary" onClick={() => setRegistering(true)} data-testid="register-open" style={{ marginBottom: 8 }}>
          Register model
        </Button>
      )}
      {registering && (
        <RegisterModelModal namespace={namespace} job={name} models={list.models ?? []}
          onClose={() => setRegistering(false)} />
      )}
      {list.objects.length === 0 ? (
        <Content component="p" data-testid="artifacts-empty">No artifacts yet: the job writes them to $MPIJOB_OUTPUT_URI.</Content>
      ) : (
        <Table aria-label="Artifacts" variant="compact">
          <Thead>
            <Tr><Th>Name</Th><Th>Size</Th><Th>Age</Th><Th screenReaderText="Download" /></Tr>
          </Thead>
          <Tbody>
            {list.objects.map((o) => (
              <Tr key={o.name} data-testid={`artifact-${o.name}`}>
                <Td dataLabel="Name">{o.name}</Td>
                <Td dataLabel="Size">{bytes(o.size)}</Td>
                <Td dataLabel="Age">{age(o.lastModified, now)}</Td>
                <Td dataLabel="Download">
                  <Button component="a" variant="link" isInline href={apiRoutes.jobArtifact(namespace, name, o.name)} download>
                    Download
                  </Button>
                </Td>
              </Tr>
            ))}
          </Tbody>
        </Table>
      )}
    </div>
  );
}
