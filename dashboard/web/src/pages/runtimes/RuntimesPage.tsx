import { useEffect, useMemo, useState } from 'react';
import {
  Alert,
  Button,
  Card,
  CardBody,
  CardTitle,
  Form,
  FormGroup,
  FormHelperText,
  FormSelect,
  FormSelectOption,
  HelperText,
  HelperTextItem,
  TextInput,
  Label,
  PageSection,
  Title,
} from '@patternfly/react-core';
import { Table, Tbody, Td, Th, Thead, Tr } from '@patternfly/react-table';
import type { ApiError } from '../../api/client';
import { createRuntime, listRuntimes, runtimeTestRun, testRuntime } from '../../api/runtimes';
import { useNamespaces } from '../../app/NamespacesContext';
import type { Namespace, RuntimeInfo } from '../../api/types';

interface Check {
  name: string;
  result: 'PASS' | 'FAIL' | 'RUNNING' | 'SKIP';
  detail: string;
}
interface Progress {
  job: string;
  namespace: string;
  phase?: string;
  checks: Check[] | null;
  done: boolean;
}

/** The MPI runtimes: flavour, images, shape and policy, and Test runtime. */
export function RuntimesPage() {
  const [rts, setRts] = useState<RuntimeInfo[] | null>(null);
  const [admin, setAdmin] = useState<{ canCreate: boolean; policyKeys: string[] }>({ canCreate: false, policyKeys: [] });
  const visible = useNamespaces().namespaces;
  const namespaces = useMemo(() => (visible ?? []).filter((n) => n.canCreate), [visible]);
  const [error, setError] = useState('');
  // The namespace whose own runtimes are listed after the cluster's.
  const [ownNs, setOwnNs] = useState('');
  useEffect(() => {
    if (!ownNs && namespaces.length) setOwnNs(namespaces[0].name);
  }, [namespaces, ownNs]);
  const load = () =>
    listRuntimes(ownNs || undefined).then(
      (r) => {
        setRts(r.runtimes);
        setAdmin({ canCreate: r.canCreate, policyKeys: r.policyKeys ?? [] });
      },
      (e: ApiError) => setError(e.message),
    );
  useEffect(() => {
    load();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [ownNs]);
  return (
    <>
      <PageSection>
        <Title headingLevel="h1">MPI runtimes</Title>
        <p style={{ marginTop: 8 }}>
          The runtimes a job can start from. Test runtime runs a job of 1 Launcher and 2 Workers with the runtime’s own test program and checks image pull, SSH keys
          and MPI spawn, as <code>kubectl mpijob runtimes test</code> does; the test job is deleted after.
        </p>
      </PageSection>
      <PageSection>
        {namespaces.length > 1 && (
          <div style={{ display: 'flex', gap: 8, alignItems: 'center', marginBottom: 16 }}>
            <span>Also the runtimes of namespace</span>
            <FormSelect aria-label="Namespace whose own runtimes are listed" value={ownNs} onChange={(_, v) => setOwnNs(v)} style={{ maxWidth: 240 }}>
              {namespaces.map((n) => <FormSelectOption key={n.name} value={n.name} label={n.name} />)}
            </FormSelect>
          </div>
        )}
        {error && <Alert variant="danger" isInline title={error} />}
        {rts?.length === 0 && <Alert variant="info" isInline title="No MPI runtimes: install them with kubectl apply --server-side -k config/runtimes" />}
        {(rts ?? []).map((rt) => (
          <RuntimeCard key={`${rt.namespace ?? ''}/${rt.name}`} rt={rt} namespaces={rt.namespace ? namespaces.filter((n) => n.name === rt.namespace) : namespaces} admin={admin} onCreated={load} />
        ))}
      </PageSection>
    </>
  );
}

function RuntimeCard({ rt, namespaces, admin, onCreated }: { rt: RuntimeInfo; namespaces: Namespace[]; admin: { canCreate: boolean; policyKeys: string[] }; onCreated: () => void }) {
  const [templating, setTemplating] = useState(false);
  const [ns, setNs] = useState('');
  const [progress, setProgress] = useState<Progress | null>(null);
  const [error, setError] = useState('');
  const [running, setRunning] = useState(false);
  useEffect(() => {
    if (!ns && namespaces.length) setNs(namespaces[0].name);
  }, [namespaces, ns]);

  const test = async () => {
    setError('');
    setProgress(null);
    setRunning(true);
    try {
      const { id } = await testRuntime(rt.name, ns);
      for (;;) {
        await new Promise((r) => setTimeout(r, 1000));
        const r = await runtimeTestRun<{ progress: Progress; error: string }>(id);
        setProgress(r.progress);
        if (r.error) setError(r.error);
        if (r.progress.done) break;
      }
    } catch (e) {
      setError((e as Error).message);
    }
    setRunning(false);
  };

  const policy = Object.entries(rt.policy ?? {});
  return (
    <Card style={{ marginBottom: 16 }} data-testid={`runtime-${rt.namespace ? `${rt.namespace}-` : ''}${rt.name}`}>
      <CardTitle>
        {rt.name} {rt.mpi && <Label color="blue">{rt.mpi}</Label>} {rt.namespace && <Label color="purple">namespace {rt.namespace}&apos;s own</Label>}
      </CardTitle>
      <CardBody>
        {rt.description && <p>{rt.description}</p>}
        <dl style={{ display: 'grid', gridTemplateColumns: 'max-content 1fr', gap: '4px 16px', marginTop: 8 }}>
          <dt>Images</dt>
          <dd>Launcher {rt.launcherImage ?? '-'}; Workers {rt.workerImage ?? '-'}</dd>
          <dt>Shape</dt>
          <dd>
            {rt.launcherHostsRanks ? 'the Launcher hosts ranks too' : 'a Launcher that hosts no ranks'}; {rt.slotsPerWorker} {rt.slotsPerWorker === 1 ? 'slot' : 'slots'} per Worker; Worker
            {' '}{Object.entries(rt.workerRequests ?? {}).map(([k, v]) => `${k} ${v}`).join(', ') || 'no requests'}
          </dd>
          <dt>Default command</dt>
          <dd><code>{(rt.command ?? []).join(' ') || '-'}</code></dd>
          <dt>Policy</dt>
          <dd>{policy.length ? policy.map(([k, v]) => `${k}: ${v}`).join('; ') : 'none'}</dd>
        </dl>
        {namespaces.length > 0 && (
          <div style={{ display: 'flex', gap: 8, alignItems: 'center', marginTop: 12 }}>
            <FormSelect aria-label={`Namespace for testing ${rt.name}`} value={ns} onChange={(_, v) => setNs(v)} style={{ maxWidth: 240 }}>
              {namespaces.map((n) => <FormSelectOption key={n.name} value={n.name} label={n.name} />)}
            </FormSelect>
            <Button variant="secondary" onClick={test} isDisabled={running || !ns} isLoading={running}>Test runtime</Button>
            {admin.canCreate && !rt.namespace && <Button variant="link" onClick={() => setTemplating(!templating)}>Use as template</Button>}
          </div>
        )}
        {templating && <TemplateForm from={rt} policyKeys={admin.policyKeys} onCreated={() => { setTemplating(false); onCreated(); }} />}
        {error && <Alert variant="danger" isInline title={error} style={{ marginTop: 12 }} />}
        {progress && (
          <div style={{ marginTop: 12 }}>
            <p>Test job {progress.namespace}/{progress.job}{progress.phase ? ` (${progress.phase})` : ''}{progress.done ? ', deleted' : ''}</p>
            <Table aria-label={`Checks of ${rt.name}`} variant="compact">
              <Thead>
                <Tr><Th>Check</Th><Th>Result</Th><Th>Detail</Th></Tr>
              </Thead>
              <Tbody>
                {(progress.checks ?? []).map((c) => (
                  <Tr key={c.name} data-testid={`check-${c.name}`} data-result={c.result}>
                    <Td>{c.name}</Td>
                    <Td><Label color={c.result === 'PASS' ? 'green' : c.result === 'FAIL' ? 'red' : 'grey'}>{c.result}</Label></Td>
                    <Td>{c.detail}</Td>
                  </Tr>
                ))}
              </Tbody>
            </Table>
          </div>
        )}
      </CardBody>
    </Card>
  );
}

/** What each policy key means, for the template form. */
const policyHelp: Record<string, string> = {
  'max-workers': 'Most Workers a job may ask for, e.g. 16.',
  'max-gpus-per-worker': 'Most nvidia.com/gpu per Worker, e.g. 8.',
  'required-node-selector': 'Node labels every pod must ask for, key=value[,key=value].',
  'required-tolerations': 'Tolerations every pod must carry, key[=value]:Effect[,...].',
  'gang-scheduling-timeout': 'How long Workers may wait to be placed together, e.g. 10m.',
  'progress-timeout': 'Warn when a running Launcher prints nothing this long, e.g. 30m.',
};

interface Answer {
  name?: string;
  error?: string;
  fields?: { field: string; message: string }[];
}

/** Create a ClusterTrainingRuntime from another as a template, the policy as a form. */
function TemplateForm({ from, policyKeys, onCreated }: { from: RuntimeInfo; policyKeys: string[]; onCreated: () => void }) {
  const [name, setName] = useState(`${from.name}-custom`);
  const [description, setDescription] = useState(from.description ?? '');
  const [image, setImage] = useState('');
  const [policy, setPolicy] = useState<Record<string, string>>({ ...(from.policy ?? {}) });
  const [answer, setAnswer] = useState<Answer | null>(null);
  const errorOf = (f: string) => answer?.fields?.find((e) => e.field === f)?.message ?? '';
  const submit = async () => {
    const res = await createRuntime({ from: from.name, name, description, image, policy });
    if (res.ok) onCreated();
    else setAnswer(res);
  };
  const group = (id: string, label: string, help: string, value: string, set: (v: string) => void, field = id) => (
    <FormGroup label={label} fieldId={`tmpl-${from.name}-${id}`} key={id}>
      <TextInput id={`tmpl-${from.name}-${id}`} aria-label={label} value={value} validated={errorOf(field) ? 'error' : 'default'} onChange={(_, v) => set(v)} />
      <FormHelperText>
        <HelperText>
          <HelperTextItem variant={errorOf(field) ? 'error' : 'default'} data-testid={errorOf(field) ? `error-${field}` : undefined}>{errorOf(field) || help}</HelperTextItem>
        </HelperText>
      </FormHelperText>
    </FormGroup>
  );
  return (
    <Form style={{ marginTop: 16, maxWidth: 720 }} onSubmit={(e) => { e.preventDefault(); submit(); }} data-testid={`template-${from.name}`}>
      <Title headingLevel="h3">New runtime from {from.name}</Title>
      {answer?.error && <Alert variant="danger" isInline title={answer.error} />}
      {group('name', 'Name', 'The new ClusterTrainingRuntime’s name.', name, setName)}
      {group('description', 'Description', 'What the runtime is for, shown in the runtime picker.', description, setDescription)}
      {group('image', 'Image', `Launcher and Worker image (default: ${from.workerImage ?? 'the template’s'}). It must run sshd on port 2222.`, image, setImage)}
      {policyKeys.map((k) => group(`policy-${k}`, `Policy: ${k}`, policyHelp[k] ?? '', policy[k] ?? '', (v) => setPolicy({ ...policy, [k]: v }), `policy.${k}`))}
      <div><Button type="submit" variant="primary">Create runtime</Button></div>
    </Form>
  );
}
