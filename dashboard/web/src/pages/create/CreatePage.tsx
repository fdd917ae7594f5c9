import { useEffect, useMemo, useRef, useState } from 'react';
import {
  Alert,
  Breadcrumb,
  BreadcrumbItem,
  Button,
  Checkbox,
  CodeBlock,
  CodeBlockCode,
  ExpandableSection,
  Form,
  FormGroup,
  FormHelperText,
  FormSelect,
  FormSelectOption,
  HelperText,
  HelperTextItem,
  NumberInput,
  PageSection,
  Slider,
  TextArea,
  TextInput,
  Title,
  Wizard,
  WizardStep,
} from '@patternfly/react-core';
import type { ApiError } from '../../api/client';
import { createJob, jobInput, quotaCheck } from '../../api/jobs';
import { dataConnections } from '../../api/namespaces';
import { listRuntimes } from '../../api/runtimes';
import { useNamespaces } from '../../app/NamespacesContext';
import { navigate, paths } from '../../app/routes';
import {
  CloneSource,
  cloneName,
  emptyForm,
  fromInput,
  resubmitFix,
  envError,
  Form as JobForm,
  nameError,
  nodeSelectorOf,
  minMemoryBytes,
  priorityError,
  retriesError,
  serviceAccountError,
  gracePeriodError,
  timeoutError,
  tolerationsOf,
  quantityError,
  RuntimeInfo,
  summary,
  toInput,
  workersError,
} from './createForm';
import type { CreateAnswer, FieldError, QuotaCheck } from '../../api/types';

/** Contextual help of each field, in the product's words. */
const help = {
  name: 'A DNS label: lower-case letters, digits and "-", at most 44 characters. The Launcher and Workers are named after it.',
  namespace: 'The project (namespace) the job runs in: its quota and queue apply.',
  runtime: 'The MPI runtime: its MPI flavour, images and shape. Your image and resources replace its own on every Worker.',
  image: 'Image of the Launcher and every Worker (default: the runtime’s). It must run sshd on port 2222 as the runtime’s images do.',
  command: 'What the Launcher runs, one argument per line; e.g. "mpirun" then "python3 /app/train.py". Empty: the runtime’s test program.',
  workers: 'Workers: the pods that host the ranks, besides the Launcher.',
  slots: 'Slots per worker: number of MPI processes per Worker; typically the number of GPUs per Worker.',
  env: 'Environment of the Launcher; mpirun -x NAME passes a variable to the ranks.',
  cpu: 'CPU per Worker, request and limit, e.g. 4 or 500m.',
  memory: 'Memory per Worker, request and limit, e.g. 16Gi.',
  gpus: 'nvidia.com/gpu per Worker; GPU Workers go to the GPU nodes by themselves.',
  launcher: 'The Launcher runs mpirun and hosts no ranks: it rarely needs much.',
  queue: 'Kueue LocalQueue: the job waits Queued until all of it fits. In a namespace with a LocalQueue "default", jobs go there anyway.',
  nodeSelector: 'Node labels the Launcher and Workers need, key=value, one per line.',
  dataConnections: 'S3 data connections of the project: their keys reach the Launcher and every Worker as Secret references, never as values. The first one’s keys are AWS_*, and the job’s artifacts go to s3://BUCKET/NAME/ ($MPIJOB_OUTPUT_URI).',
  pvcs: 'PersistentVolumeClaims mounted on the Launcher and every Worker, claim or claim:/mount/path (default /mnt/claim), one per line.',
  configMaps: 'ConfigMaps of the project mounted read-only on the Launcher and every Worker, each key a file: name or name:/mount/path (default /config/name), one per line.',
  description: 'A line about the job for the people who list it (at most 500 characters).',
  launcherFlags: 'Flags for mpirun (or mpiexec) before the program, e.g. --bind-to none: added after the first word of the command, or of the runtime’s.',
  timeout: 'Stop the job once it has run this long, e.g. 90m, 2h or 1h30m (reason DeadlineExceeded). Empty: no limit.',
  retries: 'Start the whole job again after a failure, up to this many times: every Worker and the Launcher anew, the program from its start (resume from a checkpoint in your program).',
  priority: 'Kueue WorkloadPriorityClass of the job (with a queue): Kueue admits higher ones first and may preempt lower ones for them.',
  tolerations: 'Taints the Launcher and Workers tolerate, KEY[=VALUE][:EFFECT], e.g. dedicated=mpi:NoSchedule (no value: any value; no effect: every effect), one per line.',
  imagePullSecrets: 'Secrets of the project to pull the images with (a private registry), one per line.',
  serviceAccount: 'A ServiceAccount of the project whose token the Launcher and the Workers get (you must be allowed to create its tokens). Empty: none, and no token in the ranks.',
  gracePeriod: 'How long the ranks get to save a checkpoint and exit when the job is stopped, suspended or preempted, e.g. 90s or 5m (at most 1h). Empty: the runtime’s (60s on the shipped ones).',
};

/** The wizard; from ("NS/NAME") clones that job, resubmit applies its failure's fix. */
export function CreatePage({ from = '', resubmit = false }: { from?: string; resubmit?: boolean }) {
  const [form, setForm] = useState<JobForm>(emptyForm);
  const [origin, setOrigin] = useState('');
  const { namespaces: visible, error: nsError } = useNamespaces();
  const namespaces = useMemo(() => visible?.filter((n) => n.canCreate) ?? null, [visible]);
  const [rts, setRts] = useState<RuntimeInfo[]>([]);
  const [serverErrors, setServerErrors] = useState<FieldError[]>([]);
  const [answer, setAnswer] = useState<CreateAnswer | null>(null);
  const [quota, setQuota] = useState<QuotaCheck | null>(null);
  const [problem, setProblem] = useState('');
  const [creating, setCreating] = useState(false);
  const set = (patch: Partial<JobForm>) => {
    setForm((f) => ({ ...f, ...patch }));
    setServerErrors([]);
    setAnswer(null);
  };

  const [connections, setConnections] = useState<{ names: string[]; message?: string } | null>(null);
  useEffect(() => {
    if (!form.namespace) return;
    let stop = false;
    setConnections(null);
    dataConnections(form.namespace).then(
      (r) => { if (!stop) setConnections({ names: r.connections, message: r.message }); },
      (e: ApiError) => { if (!stop) setConnections({ names: [], message: e.message }); },
    );
    return () => { stop = true; };
  }, [form.namespace]);

  useEffect(() => {
    // The cluster's runtimes and the namespace's own, marked.
    listRuntimes(form.namespace || undefined).then((r) => setRts(r.runtimes), (e: ApiError) => setProblem(e.message));
  }, [form.namespace]);
  useEffect(() => {
    if (nsError) setProblem(nsError);
    if (namespaces?.length && !from) setForm((f) => (f.namespace ? f : { ...f, namespace: namespaces[0].name }));
  }, [namespaces, nsError, from]);
  useEffect(() => {
    const [ns, name] = from.split('/');
    if (ns && name) {
      jobInput(ns, name).then(
        (src: CloneSource) => {
          let f = { ...fromInput(src.input, ns), name: cloneName(name) };
          let why = '';
          if (resubmit) [f, why] = resubmitFix(f, src);
          setForm(f);
          const lost = src.notCarried?.length ? ` Not carried (kubectl mpijob clone keeps them): ${src.notCarried.join(', ')}.` : '';
          setOrigin(`${resubmit ? 'Resubmitting' : 'Cloned from'} ${ns}/${name}.${why ? ' ' + why : ''}${lost}`);
        },
        (e: ApiError) => setProblem(`Cannot clone ${from}: ${e.message}`),
      );
    }
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);

  const rt = rts.find((r) => r.name === form.runtime);
  const maxWorkers = rt?.policy?.['max-workers'] ? Number(rt.policy['max-workers']) : undefined;

  // Checks made as the user types; the server's answers (builder,
  // admission, quota) come on top, by field.
  const local: Record<string, string> = {
    name: nameError(form.name),
    workers: workersError(form.workers, maxWorkers),
    'resources_per_worker.cpu': quantityError(form.cpu, '4 or 500m'),
    'resources_per_worker.memory': quantityError(form.memory, '16Gi', minMemoryBytes),
    'launcher_resources.cpu': quantityError(form.launcherCpu, '500m'),
    'launcher_resources.memory': quantityError(form.launcherMemory, '1Gi', minMemoryBytes),
    env: envError(form.env),
    slots_per_worker: form.slotsPerWorker < 0 ? 'Use 1 or more (MPI ranks per Worker), or 0 for the runtime’s.' : '',
    timeout: timeoutError(form.timeout),
    retries: retriesError(form.retries),
    service_account: serviceAccountError(form.serviceAccount),
    grace_period: gracePeriodError(form.gracePeriod),
    priority: priorityError(form.priority, form.queue),
    description: form.description.length > 500 ? `Use at most 500 characters (${form.description.length} now).` : '',
  };
  try {
    tolerationsOf(form.tolerations);
  } catch (e) {
    local.tolerations = `${(e as Error).message}.`;
  }
  try {
    nodeSelectorOf(form.nodeSelector);
  } catch (e) {
    local.node_selector = `${(e as Error).message}: write one label per line as key=value.`;
  }
  const quotaErrors = quota?.fields ?? [];
  const errorOf = (field: string) =>
    local[field] || serverErrors.find((e) => e.field === field || e.field.startsWith(field + '.'))?.message || quotaErrors.find((e) => e.field === field)?.message || '';
  const basicsOK = !local.name && !local.description && !!form.namespace;
  const configOK = !local.workers && !local.slots_per_worker && !local.env;
  const advancedOK = !local.timeout && !local.retries && !local.priority && !local.tolerations && !local.node_selector && !local.service_account && !local.grace_period;
  const resourcesOK = !Object.keys(local).some((k) => k.includes('resources') && local[k]) && quotaErrors.length === 0 && advancedOK;

  // The live quota check: the admission pre-flight's numbers, as the form
  // changes (debounced).
  const input = useMemo(() => toInput(form), [form]);
  const seq = useRef(0);
  useEffect(() => {
    if (!form.namespace || local.name || local.workers) return;
    const n = ++seq.current;
    const t = window.setTimeout(() => {
      quotaCheck(form.namespace, input).then(
        (q) => n === seq.current && setQuota(q),
        (e: ApiError) => n === seq.current && setQuota({ fits: false, queued: false, lines: [], error: e.message }),
      );
    }, 400);
    return () => window.clearTimeout(t);
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, [input, form.namespace]);

  // The Review step: a server-side dry run (admission included).
  const dryRun = async () => {
    setAnswer(null);
    const r = await createJob(form.namespace, input, true);
    setAnswer(r);
    setServerErrors(r.fields ?? []);
  };
  const create = async () => {
    setCreating(true);
    const r = await createJob(form.namespace, input, false);
    setCreating(false);
    if (r.error) {
      setAnswer(r);
      setServerErrors(r.fields ?? []);
      return;
    }
    navigate(paths.job(form.namespace, form.name));
  };

  if (namespaces && namespaces.length === 0) {
    return (
      <PageSection>
        <Alert variant="info" isInline title="You may not create jobs in any namespace." data-testid="no-create">
          Ask for the edit role in a project to create MPI jobs there.
        </Alert>
      </PageSection>
    );
  }

  const field = (id: string, label: string, helpText: string, control: React.ReactNode, errField = id) => {
    const err = errorOf(errField);
    return (
      <FormGroup label={label} fieldId={id}>
        {control}
        <FormHelperText>
          <HelperText>
            {err ? (
              <HelperTextItem variant="error" id={`${id}-error`}>{err}</HelperTextItem>
            ) : (
              <HelperTextItem>{helpText}</HelperTextItem>
            )}
          </HelperText>
        </FormHelperText>
      </FormGroup>
    );
  };
  const invalid = (f: string) => (errorOf(f) ? 'error' : 'default');

  return (
    <>
      <PageSection>
        <Breadcrumb>
          <BreadcrumbItem to="/" onClick={(e) => { e.preventDefault(); navigate('/'); }}>Training jobs</BreadcrumbItem>
          <BreadcrumbItem isActive>{from ? (resubmit ? 'Edit and resubmit' : 'Clone') : 'Create MPI job'}</BreadcrumbItem>
        </Breadcrumb>
        <Title headingLevel="h1" style={{ marginTop: 12 }}>{from ? (resubmit ? `Edit and resubmit ${from}` : `Clone ${from}`) : 'Create MPI job'}</Title>
        {problem && <Alert variant="danger" isInline title={problem} />}
        {origin && <Alert variant="info" isInline title={origin} data-testid="origin" style={{ marginTop: 12 }} />}
      </PageSection>
      <PageSection>
        <Wizard height={640} onClose={() => navigate('/')} onSave={create} navAriaLabel="Create MPI job steps">
          <WizardStep name="Basics" id="basics" footer={{ isNextDisabled: !basicsOK }}>
            <Form onSubmit={(e) => e.preventDefault()}>
              {field('name', 'Name', help.name,
                <TextInput id="name" aria-label="Name" value={form.name} validated={form.name && invalid('name') === 'error' ? 'error' : 'default'} onChange={(_, v) => set({ name: v })} />)}
              {field('namespace', 'Namespace', help.namespace,
                <FormSelect id="namespace" aria-label="Namespace" value={form.namespace} onChange={(_, v) => set({ namespace: v })}>
                  {(namespaces ?? []).map((n) => <FormSelectOption key={n.name} value={n.name} label={n.name} />)}
                </FormSelect>)}
              {field('description', 'Description', help.description,
                <TextInput id="description" aria-label="Description" placeholder="e.g. digits, 4 Workers, nightly" value={form.description} validated={invalid('description')} onChange={(_, v) => set({ description: v })} />)}
            </Form>
          </WizardStep>
          <WizardStep name="Configuration" id="configuration" footer={{ isNextDisabled: !configOK }}>
            <Form onSubmit={(e) => e.preventDefault()}>
              {field('runtime', 'Runtime', help.runtime,
                <FormSelect id="runtime" aria-label="Runtime" value={form.runtime} onChange={(_, v) => set({ runtime: v, slotsPerWorker: 0 })}>
                  {rts.map((r) => <FormSelectOption key={`${r.namespace ?? ''}/${r.name}`} value={r.name} label={`${r.name}${r.mpi ? ` (${r.mpi})` : ''}${r.namespace ? ` · namespace ${r.namespace}'s own` : ''}`} />)}
                </FormSelect>)}
              {rt && (
                <div data-testid="runtime-info" style={{ fontSize: 14, color: 'var(--pf-t--global--text--color--subtle)' }}>
                  {rt.description ? `${rt.description.replace(/\.?$/, '.')} ` : ''}{rt.launcherImage && rt.launcherImage !== rt.workerImage ? `Worker image ${rt.workerImage}, Launcher image ${rt.launcherImage}` : `Image ${rt.workerImage}`}; {rt.slotsPerWorker} {rt.slotsPerWorker === 1 ? 'slot' : 'slots'} per Worker by default
                  {rt.policy && Object.keys(rt.policy).length > 0 ? `; policy: ${Object.entries(rt.policy).map(([k, v]) => `${k} ${v}`).join(', ')}` : ''}.
                </div>
              )}
              {field('image', 'Image', help.image,
                <TextInput id="image" aria-label="Image" placeholder={rt?.workerImage ?? ''} value={form.image} validated={invalid('image')} onChange={(_, v) => set({ image: v })} />)}
              {field('command', 'Command and arguments', help.command,
                <TextArea id="command" aria-label="Command and arguments" placeholder={(rt?.command ?? []).join('\n')} value={form.command} validated={invalid('command')} onChange={(_, v) => set({ command: v })} autoResize />)}
              {field('launcher-flags', 'Launcher flags', help.launcherFlags,
                <TextInput id="launcher-flags" aria-label="Launcher flags" placeholder="--bind-to none" value={form.launcherFlags} validated={invalid('launcher_flags')} onChange={(_, v) => set({ launcherFlags: v })} />, 'launcher_flags')}
              {field('workers', 'Workers', help.workers,
                <div style={{ display: 'flex', gap: 16, alignItems: 'center' }}>
                  <Slider style={{ flex: 1 }} min={1} max={64} value={Math.min(Math.max(form.workers, 1), 64)} onChange={(_, v) => set({ workers: Math.round(v) })} aria-label="Workers slider" />
                  <NumberInput id="workers" value={form.workers} min={0} inputAriaLabel="Workers" minusBtnAriaLabel="fewer Workers" plusBtnAriaLabel="more Workers"
                    validated={invalid('workers')}
                    onMinus={() => set({ workers: form.workers - 1 })} onPlus={() => set({ workers: form.workers + 1 })}
                    onChange={(e) => set({ workers: Number((e.target as HTMLInputElement).value) })} />
                </div>)}
              {field('slots', 'Slots per worker', help.slots,
                <NumberInput id="slots" value={form.slotsPerWorker || rt?.slotsPerWorker || 1} min={1} inputAriaLabel="Slots per worker" minusBtnAriaLabel="fewer slots" plusBtnAriaLabel="more slots"
                  validated={invalid('slots_per_worker')}
                  onMinus={() => set({ slotsPerWorker: (form.slotsPerWorker || rt?.slotsPerWorker || 1) - 1 })}
                  onPlus={() => set({ slotsPerWorker: (form.slotsPerWorker || rt?.slotsPerWorker || 1) + 1 })}
                  onChange={(e) => set({ slotsPerWorker: Number((e.target as HTMLInputElement).value) })} />, 'slots_per_worker')}
              {field('data-connections', 'Data connections', help.dataConnections,
                <div data-testid="data-connections">
                  {connections === null ? (
                    <span>Loading the project’s data connections…</span>
                  ) : connections.names.length === 0 ? (
                    <span data-testid="no-data-connections">{connections.message || `Project ${form.namespace} has no S3 data connection.`}</span>
                  ) : (
                    connections.names.map((c) => (
                      <Checkbox key={c} id={`dc-${c}`} label={c} isChecked={form.dataConnections.includes(c)}
                        onChange={(_e, on) => set({ dataConnections: on ? [...form.dataConnections, c] : form.dataConnections.filter((x) => x !== c) })} />
                    ))
                  )}
                </div>, 'data_connections')}
              {field('pvcs', 'PersistentVolumeClaims', help.pvcs,
                <TextArea id="pvcs" aria-label="PersistentVolumeClaims" placeholder="results:/mnt/results" value={form.pvcs} validated={invalid('pvcs')} onChange={(_, v) => set({ pvcs: v })} />, 'pvcs')}
              {field('config-maps', 'ConfigMaps', help.configMaps,
                <TextArea id="config-maps" aria-label="ConfigMaps" placeholder="train-config" value={form.configMaps} validated={invalid('config_maps')} onChange={(_, v) => set({ configMaps: v })} />, 'config_maps')}
              {field('env', 'Environment variables', help.env,
                <div>
                  {form.env.map((e, i) => (
                    <div key={i} style={{ display: 'flex', gap: 8, marginBottom: 4 }}>
                      <TextInput aria-label={`Variable ${i + 1} name`} placeholder="NAME" value={e.name} onChange={(_, v) => set({ env: form.env.map((x, j) => (j === i ? { ...x, name: v } : x)) })} />
                      <TextInput aria-label={`Variable ${i + 1} value`} placeholder="value" value={e.value} onChange={(_, v) => set({ env: form.env.map((x, j) => (j === i ? { ...x, value: v } : x)) })} />
                      <Button variant="plain" aria-label={`Remove variable ${i + 1}`} onClick={() => set({ env: form.env.filter((_, j) => j !== i) })}>✕</Button>
                    </div>
                  ))}
                  <Button variant="link" isInline onClick={() => set({ env: [...form.env, { name: '', value: '' }] })}>Add variable</Button>
                </div>)}
            </Form>
          </WizardStep>
          <WizardStep name="Resources" id="resources" footer={{ isNextDisabled: !resourcesOK }}>
            <Form onSubmit={(e) => e.preventDefault()}>
              {field('cpu', 'CPU per Worker', help.cpu,
                <TextInput id="cpu" aria-label="CPU per Worker" placeholder={rt?.workerRequests?.cpu ?? ''} value={form.cpu} validated={invalid('resources_per_worker.cpu')} onChange={(_, v) => set({ cpu: v })} />, 'resources_per_worker.cpu')}
              {field('memory', 'Memory per Worker', help.memory,
                <TextInput id="memory" aria-label="Memory per Worker" placeholder={rt?.workerRequests?.memory ?? ''} value={form.memory} validated={invalid('resources_per_worker.memory')} onChange={(_, v) => set({ memory: v })} />, 'resources_per_worker.memory')}
              {field('gpus', 'GPUs per Worker', help.gpus,
                <FormSelect id="gpus" aria-label="GPUs per Worker" value={String(form.gpus)} validated={invalid('resources_per_worker.nvidia.com/gpu')} onChange={(_, v) => set({ gpus: Number(v) })}>
                  {rt?.workerRequests?.['nvidia.com/gpu'] ? (
                    [<FormSelectOption key="-1" value="-1" label={`the runtime’s (${rt.workerRequests['nvidia.com/gpu']})`} />, <FormSelectOption key="0" value="0" label="0 (none)" />]
                  ) : (
                    <FormSelectOption key="-1" value="-1" label="0" />
                  )}
                  {[1, 2, 4, 8].map((g) => <FormSelectOption key={g} value={String(g)} label={String(g)} />)}
                </FormSelect>, 'resources_per_worker.nvidia.com/gpu')}
              {!rt?.launcherHostsRanks && (
                <>
                  {field('launcher-cpu', 'Launcher CPU', help.launcher,
                    <TextInput id="launcher-cpu" aria-label="Launcher CPU" placeholder={rt?.launcherRequests?.cpu ?? ''} value={form.launcherCpu} validated={invalid('launcher_resources.cpu')} onChange={(_, v) => set({ launcherCpu: v })} />, 'launcher_resources.cpu')}
                  {field('launcher-memory', 'Launcher memory', help.launcher,
                    <TextInput id="launcher-memory" aria-label="Launcher memory" placeholder={rt?.launcherRequests?.memory ?? ''} value={form.launcherMemory} validated={invalid('launcher_resources.memory')} onChange={(_, v) => set({ launcherMemory: v })} />, 'launcher_resources.memory')}
                </>
              )}
              <QuotaPanel quota={quota} />
              <ExpandableSection toggleText="Advanced" data-testid="advanced">
                {field('queue', 'Queue', help.queue,
                  <TextInput id="queue" aria-label="Queue" value={form.queue} validated={invalid('queue')} onChange={(_, v) => set({ queue: v })} />)}
                {field('node-selector', 'Node selector', help.nodeSelector,
                  <TextArea id="node-selector" aria-label="Node selector" value={form.nodeSelector} validated={invalid('node_selector')} onChange={(_, v) => set({ nodeSelector: v })} />, 'node_selector')}
                {field('priority', 'Priority', help.priority,
                  <TextInput id="priority" aria-label="Priority" placeholder="e.g. high" value={form.priority} validated={invalid('priority')} onChange={(_, v) => set({ priority: v })} />)}
                {field('timeout', 'Timeout', help.timeout,
                  <TextInput id="timeout" aria-label="Timeout" placeholder="e.g. 2h" value={form.timeout} validated={invalid('timeout')} onChange={(_, v) => set({ timeout: v })} />)}
                {field('retries', 'Retries', help.retries,
                  <NumberInput id="retries" value={form.retries} min={0} max={10} inputAriaLabel="Retries" minusBtnAriaLabel="fewer retries" plusBtnAriaLabel="more retries"
                    validated={invalid('retries')}
                    onMinus={() => set({ retries: form.retries - 1 })} onPlus={() => set({ retries: form.retries + 1 })}
                    onChange={(e) => set({ retries: Number((e.target as HTMLInputElement).value) })} />)}
                {field('grace-period', 'Grace period', help.gracePeriod,
                  <TextInput id="grace-period" aria-label="Grace period" placeholder="e.g. 5m" value={form.gracePeriod} validated={invalid('grace_period')} onChange={(_, v) => set({ gracePeriod: v })} />, 'grace_period')}
                {field('service-account', 'ServiceAccount', help.serviceAccount,
                  <TextInput id="service-account" aria-label="ServiceAccount" placeholder="none: no token in the ranks" value={form.serviceAccount} validated={invalid('service_account')} onChange={(_, v) => set({ serviceAccount: v })} />, 'service_account')}
                {field('tolerations', 'Tolerations', help.tolerations,
                  <TextArea id="tolerations" aria-label="Tolerations" placeholder="dedicated=mpi:NoSchedule" value={form.tolerations} validated={invalid('tolerations')} onChange={(_, v) => set({ tolerations: v })} />)}
                {field('image-pull-secrets', 'Image pull Secrets', help.imagePullSecrets,
                  <TextArea id="image-pull-secrets" aria-label="Image pull Secrets" placeholder="registry-creds" value={form.imagePullSecrets} validated={invalid('image_pull_secrets')} onChange={(_, v) => set({ imagePullSecrets: v })} />, 'image_pull_secrets')}
              </ExpandableSection>
            </Form>
          </WizardStep>
          <WizardStep name="Review" id="review" footer={{ nextButtonText: creating ? 'Creating…' : 'Create', isNextDisabled: creating || !basicsOK || !configOK || !resourcesOK || !answer || !!answer.error }}>
            <Review form={form} rt={rt} answer={answer} onCheck={dryRun} />
          </WizardStep>
        </Wizard>
      </PageSection>
    </>
  );
}

function QuotaPanel({ quota }: { quota: QuotaCheck | null }) {
  if (!quota) return null;
  if (quota.error) return <Alert variant="info" isInline title={quota.error} data-testid="quota" />;
  const title = quota.fits
    ? quota.lines.length
      ? `Fits the namespace's quota${quota.queued ? ' (Kueue admits it whole when the quota in use allows)' : ''}.`
      : 'The namespace has no quota on what this job asks for.'
    : 'Over the namespace’s quota: this job would be refused.';
  return (
    <Alert variant={quota.fits ? 'success' : 'danger'} isInline title={title} data-testid="quota">
      {quota.lines.length > 0 && (
        <table style={{ marginTop: 8 }}>
          <thead>
            <tr><th style={{ textAlign: 'left', paddingRight: 16 }}>Resource</th><th style={{ paddingRight: 16 }}>Requested</th><th style={{ paddingRight: 16 }}>In use</th><th>Quota</th></tr>
          </thead>
          <tbody>
            {quota.lines.map((l) => (
              <tr key={l.quota + l.resource}><td style={{ paddingRight: 16 }}>{l.resource}</td><td>{l.requested}</td><td>{l.used}</td><td>{l.hard} ({l.quota})</td></tr>
            ))}
          </tbody>
        </table>
      )}
      {(quota.fields ?? []).map((f) => <div key={f.field}>{f.message}</div>)}
    </Alert>
  );
}

function Review({ form, rt, answer, onCheck }: { form: JobForm; rt?: RuntimeInfo; answer: CreateAnswer | null; onCheck: () => void }) {
  useEffect(() => {
    onCheck();
    // eslint-disable-next-line react-hooks/exhaustive-deps
  }, []);
  return (
    <div>
      <Title headingLevel="h2">{form.name} in {form.namespace}</Title>
      <p data-testid="summary" style={{ fontSize: 18, margin: '12px 0' }}>{summary(form, rt)}</p>
      <ul style={{ marginBottom: 12 }}>
        <li>Runtime {form.runtime}{rt?.mpi ? ` (${rt.mpi})` : ''}</li>
        <li>Image {form.image || `${rt?.workerImage ?? 'the runtime’s'} (the runtime’s)`}</li>
        <li>Command {form.command.trim() ? form.command.split('\n').filter((l) => l.trim()).join(' ') : 'the runtime’s'}{form.launcherFlags.trim() ? `, with launcher flags ${form.launcherFlags.trim()}` : ''}</li>
        {form.queue && <li>Queue {form.queue}</li>}
        {form.dataConnections.length > 0 && <li data-testid="review-data-connections">Data connections {form.dataConnections.join(', ')} (artifacts to s3://BUCKET/{form.name}/)</li>}
        {form.pvcs.trim() && <li>PVCs {form.pvcs.split('\n').filter((l) => l.trim()).join(', ')}</li>}
        {form.configMaps.trim() && <li>ConfigMaps {form.configMaps.split('\n').filter((l) => l.trim()).join(', ')}</li>}
        {form.description.trim() && <li data-testid="review-description">Description {form.description.trim()}</li>}
        {form.priority.trim() && <li>Priority {form.priority.trim()}</li>}
        {form.timeout.trim() && <li data-testid="review-timeout">Timeout {form.timeout.trim()}</li>}
        {form.retries > 0 && <li>Retries up to {form.retries} (the whole job starts again)</li>}
        {form.gracePeriod.trim() && <li data-testid="review-grace-period">Grace period {form.gracePeriod.trim()} (to save and exit when stopped)</li>}
        {form.serviceAccount.trim() && <li data-testid="review-service-account">ServiceAccount {form.serviceAccount.trim()} (its token in the ranks)</li>}
        {form.tolerations.trim() && <li>Tolerations {form.tolerations.split('\n').filter((l) => l.trim()).join(', ')}</li>}
        {form.imagePullSecrets.trim() && <li>Image pull Secrets {form.imagePullSecrets.split('\n').filter((l) => l.trim()).join(', ')}</li>}
      </ul>
      {!answer && <Alert variant="info" isInline title="Checking the job with the cluster (dry run, admission included)…" />}
      {answer?.error && (
        <Alert variant="danger" isInline title="The cluster would refuse this job" data-testid="dry-run-error">
          {answer.error}
          {(answer.fields ?? []).map((f) => <div key={f.field}>{f.field}: {f.message}</div>)}
        </Alert>
      )}
      {answer && !answer.error && <Alert variant="success" isInline title="The cluster accepts this job (dry run)." data-testid="dry-run-ok" />}
      {answer && !answer.error && (answer.placement ?? []).length > 0 && (
        <Alert variant="info" isInline title="Can the cluster place it now?" data-testid="dry-run-placement" style={{ marginTop: 12 }}>
          <ul>
            {(answer.placement ?? []).map((l) => <li key={l}>{l}</li>)}
          </ul>
        </Alert>
      )}
      {answer?.yaml && (
        <ExpandableSection toggleText="View YAML" style={{ marginTop: 12 }}>
          <CodeBlock><CodeBlockCode>{answer.yaml}</CodeBlockCode></CodeBlock>
        </ExpandableSection>
      )}
    </div>
  );
}
