import { useState } from 'react';
import { Alert, Button, Card, CardBody, CardTitle, Content, EmptyState, EmptyStateBody, Flex, Label, Spinner } from '@patternfly/react-core';
import { Table, Tbody, Td, Th, Thead, Tr } from '@patternfly/react-table';
import { jobStacks } from '../../api/jobs';
import { live } from '../../lib/metrics';
import type { Phase, Stacks } from '../../api/types';

// The Stacks tab: where each rank of a running job is now. Taking them runs
// the stack collector in the job's pods as the user (the right to create
// pods/exec, as kubectl mpijob stacks); the ranks keep running. Identical
// stacks are grouped, the largest group first, the odd one out named.
export function StacksTab({ namespace, name, phase }: { namespace: string; name: string; phase: Phase }) {
  const [stacks, setStacks] = useState<Stacks | null>(null);
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState('');
  const [at, setAt] = useState<Date | null>(null);
  const take = () => {
    setBusy(true);
    jobStacks(namespace, name)
      .then((s) => { setStacks(s); setError(''); setAt(new Date()); })
      .catch((e: Error) => setError(e.message))
      .finally(() => setBusy(false));
  };
  if (!live(phase)) {
    return (
      <EmptyState titleText="No ranks to look at" headingLevel="h3" data-testid="stacks-not-running">
        <EmptyStateBody>Stacks show where a running job's ranks are; this job is {phase}. Its Logs tab has its output.</EmptyStateBody>
      </EmptyState>
    );
  }
  return (
    <Flex direction={{ default: 'column' }} gap={{ default: 'gapMd' }} style={{ marginTop: 16 }} data-testid="stacks">
      <Flex alignItems={{ default: 'alignItemsCenter' }}>
        <Button onClick={take} isLoading={busy} isDisabled={busy} data-testid="take-stacks">
          {stacks ? 'Take them again' : 'Take stacks'}
        </Button>
        <Content component="small">
          Every rank's Python stack, taken at once; the ranks keep running.
          {at && ` Taken at ${at.toLocaleTimeString([], { hour12: false })}.`}
        </Content>
      </Flex>
      {error && <Alert variant="danger" isInline title="No stacks" data-testid="stacks-error">{error}</Alert>}
      {busy && !stacks && <Spinner aria-label="Taking the stacks" />}
      {stacks?.failed?.map((f) => <Alert key={f} variant="warning" isInline isPlain title={`No stacks from ${f}`} />)}
      {stacks && stacks.groups.length === 0 && (
        <Alert variant="info" isInline title="No MPI rank runs in the job's pods now" data-testid="stacks-none">
          mpirun starts the ranks once every Worker is ready: the Logs tab shows how far it got.
        </Alert>
      )}
      {stacks?.contrast && (
        <Alert variant="info" isInline title={stacks.contrast[0].toUpperCase() + stacks.contrast.slice(1)} data-testid="stacks-contrast" />
      )}
      {stacks?.groups.map((g) => (
        <Card key={g.rankText} isCompact data-testid="stack-group" data-ranks={g.rankText}>
          <CardTitle>
            <Flex gap={{ default: 'gapSm' }} alignItems={{ default: 'alignItemsCenter' }}>
              <span>{g.headline}</span>
              <Label isCompact>{g.states}</Label>
              <Label isCompact color="blue">{g.pods}{g.nodes?.length ? ` · ${g.nodes.join(', ')}` : ''}</Label>
            </Flex>
          </CardTitle>
          {g.frames && g.frames.length > 0 && (
            <CardBody>
              <Table aria-label={`Stack of ranks ${g.rankText}`} variant="compact" borders={false}>
                <Thead>
                  <Tr>
                    <Th width={30}>Frame (innermost first)</Th>
                    <Th>Line of code</Th>
                  </Tr>
                </Thead>
                <Tbody>
                  {g.frames.map((f, i) => (
                    <Tr key={i}>
                      <Td dataLabel="Frame" title={f.file}><code>{f.file.split('/').pop()}:{f.line} {f.func.startsWith('<') ? f.func : `${f.func}()`}</code></Td>
                      <Td dataLabel="Line of code"><code>{f.source ?? ''}</code></Td>
                    </Tr>
                  ))}
                </Tbody>
              </Table>
            </CardBody>
          )}
        </Card>
      ))}
    </Flex>
  );
}
