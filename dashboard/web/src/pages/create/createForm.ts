// The create wizard's form: what the user types, the checks made as they
// type, the builder's input (jobspec.Input, the same JSON as the SDK's
// shared test vectors) and the plain-language summary of the Review step.

import type { CloneSource, JobInput, RuntimeInfo } from '../../api/types';

export type { CloneSource, RuntimeInfo };

export interface EnvVar {
  name: string;
  value: string;
}

export interface Form {
  name: string;
  namespace: string;
  runtime: string;
  image: string;
  /** Command and arguments, one per line (empty: the runtime's). */
  command: string;
  workers: number;
  /** 0: the runtime's. */
  slotsPerWorker: number;
  env: EnvVar[];
  cpu: string;
  memory: string;
  /** nvidia.com/gpu per Worker; -1: the runtime's (0 removes the runtime's GPUs). */
  gpus: number;
  launcherCpu: string;
  launcherMemory: string;
  queue: string;
  /** Node labels, key=value, one per line. */
  nodeSelector: string;
  /** S3 data connections of the namespace the job gets (the first one's keys as AWS_*). */
  dataConnections: string[];
  /** PersistentVolumeClaims, claim or claim:/mount/path, one per line. */
  pvcs: string;
  /** ConfigMaps, name or name:/mount/path, one per line. */
  configMaps: string;
  /** A line about the job. */
  description: string;
  /** How long the job may run: 90m, 2h, 1h30m ("": no limit). */
  timeout: string;
  /** How many times the whole job starts again after a failure. */
  retries: number;
  /** Kueue WorkloadPriorityClass ("": none). */
  priority: string;
  /** Tolerations, KEY[=VALUE][:EFFECT], one per line. */
  tolerations: string;
  /** Image pull Secrets, one per line. */
  imagePullSecrets: string;
  /** Flags for mpirun before the program, split at spaces. */
  launcherFlags: string;
  /** ServiceAccount whose token the ranks get ("": none, no token). */
  serviceAccount: string;
  /** How long the ranks get to save and exit when the job stops: 90s, 5m ("": the runtime's). */
  gracePeriod: string;
}

export const emptyForm: Form = {
  name: '',
  namespace: '',
  runtime: 'mpi-openmpi',
  image: '',
  command: '',
  workers: 2,
  slotsPerWorker: 0,
  env: [],
  cpu: '',
  memory: '',
  gpus: -1,
  launcherCpu: '',
  launcherMemory: '',
  queue: '',
  nodeSelector: '',
  dataConnections: [],
  pvcs: '',
  configMaps: '',
  description: '',
  timeout: '',
  retries: 0,
  priority: '',
  tolerations: '',
  imagePullSecrets: '',
  launcherFlags: '',
  serviceAccount: '',
  gracePeriod: '',
};

/** The longest job name: the Launcher's pod names add to it (api.MaxJobNameLength). */
export const maxNameLength = 44;

/** nameError checks a job name as the API server and the builder do. */
export function nameError(name: string): string {
  if (name === '') return 'Name the job.';
  if (name.length > maxNameLength) return `Use at most ${maxNameLength} characters (${name.length} now): the Launcher's and Workers' pod names add to it.`;
  if (!/^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/.test(name)) {
    return 'Use lower-case letters, digits and "-", starting and ending with a letter or digit (a DNS label).';
  }
  return '';
}

/** workersError checks the Worker count against the runtime's policy. */
export function workersError(workers: number, max?: number): string {
  if (!Number.isInteger(workers) || workers < 1) return 'A job needs at least 1 Worker.';
  if (max && workers > max) return `The runtime allows at most ${max} Workers (policy max-workers).`;
  return '';
}

const quantity = /^([0-9]+(\.[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$/;

const unitScale: Record<string, number> = {
  '': 1, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};

/** The least memory a Launcher or Worker may ask for (jobspec.MinMemory): 32Mi. */
export const minMemoryBytes = 32 * 2 ** 20;

/** quantityError checks a resource quantity ("" = the runtime's); minBytes
 * is the least a memory quantity may be. */
export function quantityError(v: string, example: string, minBytes = 0): string {
  if (v === '') return '';
  const m = v.trim().match(quantity);
  if (!m) return `"${v}" is not a quantity: use e.g. ${example}.`;
  if (Number(m[1]) === 0) return `"${v}" must be more than 0: use e.g. ${example}.`;
  if (minBytes > 0 && Number(m[1]) * unitScale[m[3] ?? ''] < minBytes) {
    return `"${v}" is less than 32Mi, too little for a pod (memory counts bytes unless it has a unit such as Mi or Gi): use e.g. ${example}.`;
  }
  return '';
}

/** envError checks the environment variables' names. */
export function envError(env: EnvVar[]): string {
  for (const e of env) {
    if (e.name === '' && e.value === '') continue;
    if (!/^[-._a-zA-Z][-._a-zA-Z0-9]*$/.test(e.name)) return `"${e.name}" is not a valid variable name: use letters, digits, "_", "-" or ".", not starting with a digit.`;
  }
  return '';
}

/** A pod's toleration, as the builder takes it (jobspec.Input.tolerations). */
export interface Toleration {
  key?: string;
  operator?: 'Equal' | 'Exists';
  value?: string;
  effect?: string;
}

/** The timeout's form (jobspec.ParseTimeout): whole hours, minutes and seconds, in that order. */
const timeoutPattern = /^(?:([0-9]{1,6})h)?(?:([0-9]{1,6})m)?(?:([0-9]{1,9})s)?$/;

/** timeoutError checks a timeout as the builder does ("" = no limit). */
export function timeoutError(v: string): string {
  const t = v.trim();
  if (t === '') return '';
  const m = t.match(timeoutPattern);
  if (!m) return `"${v}" is not a duration: use e.g. 90m, 2h or 1h30m (whole hours h, minutes m and seconds s; a bare number has no unit).`;
  const secs = Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3] ?? 0);
  if (secs < 1) return `"${v}" must be more than 0: use e.g. 90m, 2h or 1h30m, or leave it empty for no limit.`;
  return '';
}

/** serviceAccountError checks a ServiceAccount's name as the builder does ("" is none). */
export function serviceAccountError(name: string): string {
  const n = name.trim();
  if (n === '') return '';
  if (n.length > 253 || !/^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/.test(n))
    return `"${n}" is not a ServiceAccount name: use lower-case letters, digits, '-' and '.' (kubectl get serviceaccounts).`;
  return '';
}

/** maxGracePeriod is the longest grace period, in seconds (jobspec.MaxGracePeriod). */
export const maxGracePeriod = 3600;

/** gracePeriodError checks a grace period as the builder does: a duration of 1s to 1h ("" is the runtime's). */
export function gracePeriodError(v: string): string {
  const t = v.trim();
  if (t === '') return '';
  const m = t.match(timeoutPattern);
  if (!m) return `"${v}" is not a duration: use e.g. 90s, 5m or 1h (whole hours h, minutes m and seconds s), or leave it empty for the runtime's.`;
  const secs = Number(m[1] ?? 0) * 3600 + Number(m[2] ?? 0) * 60 + Number(m[3] ?? 0);
  if (secs < 1) return `"${v}" must be 1s or more: the ranks get SIGTERM and this long to save and exit.`;
  if (secs > maxGracePeriod) return `"${v}" is more than 1h: a pod that takes longer to stop holds its node that long; save checkpoints more often instead.`;
  return '';
}

/** retriesError checks the retries (0 to 10, jobspec.MaxRetries). */
export function retriesError(n: number): string {
  if (!Number.isInteger(n) || n < 0 || n > 10) return 'Use 0 to 10: how many times the whole job starts again after a failure.';
  return '';
}

/** priorityError: Kueue orders the jobs of a queue by priority. */
export function priorityError(priority: string, queue: string): string {
  if (priority.trim() && !queue.trim()) return 'Kueue orders the jobs of a queue by priority, and this job has no queue: give it a queue as well.';
  return '';
}

/** tolerationsOf reads KEY[=VALUE][:EFFECT] lines (kubectl taint's form); it throws on a bad effect. */
export function tolerationsOf(text: string): Toleration[] {
  const out: Toleration[] = [];
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    const [kv, effect] = line.includes(':') ? [line.slice(0, line.indexOf(':')), line.slice(line.indexOf(':') + 1).trim()] : [line, ''];
    if (effect && !['NoSchedule', 'PreferNoSchedule', 'NoExecute'].includes(effect)) {
      throw new Error(`"${line}": the effect must be NoSchedule, PreferNoSchedule or NoExecute, as in dedicated=gpu:NoSchedule`);
    }
    const t: Toleration = kv.includes('=')
      ? { key: kv.slice(0, kv.indexOf('=')).trim(), operator: 'Equal', value: kv.slice(kv.indexOf('=') + 1).trim() }
      : { key: kv.trim(), operator: 'Exists' };
    if (!t.key) throw new Error(`"${line}" has no taint key: write key=value:Effect, as in dedicated=gpu:NoSchedule`);
    if (effect) t.effect = effect;
    out.push(t);
  }
  return out;
}

/** formatToleration writes a toleration as tolerationsOf reads it. */
export function formatToleration(t: Toleration): string {
  return `${t.key ?? ''}${t.operator === 'Equal' ? `=${t.value ?? ''}` : ''}${t.effect ? `:${t.effect}` : ''}`;
}

/** lines are the non-empty trimmed lines of a text field. */
function lines(text: string): string[] {
  return text.split('\n').map((l) => l.trim()).filter((l) => l !== '');
}

/** nodeSelectorOf reads "key=value" lines; it throws on a line without "=". */
export function nodeSelectorOf(text: string): Record<string, string> {
  const out: Record<string, string> = {};
  for (const raw of text.split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    const i = line.indexOf('=');
    if (i <= 0) throw new Error(`"${line}" is not key=value`);
    out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

/** toInput is the builder's input (jobspec.Input) for the form. */
export function toInput(f: Form): JobInput {
  const input: JobInput = { name: f.name, runtime: f.runtime, workers: f.workers };
  if (f.slotsPerWorker > 0) input.slots_per_worker = f.slotsPerWorker;
  if (f.image.trim()) input.image = f.image.trim();
  const command = f.command.split('\n').map((l) => l.trim()).filter((l) => l !== '');
  if (command.length) input.command = command;
  const worker: Record<string, string> = {};
  if (f.cpu.trim()) worker.cpu = f.cpu.trim();
  if (f.memory.trim()) worker.memory = f.memory.trim();
  if (f.gpus >= 0) worker['nvidia.com/gpu'] = String(f.gpus);
  if (Object.keys(worker).length) input.resources_per_worker = worker;
  const launcher: Record<string, string> = {};
  if (f.launcherCpu.trim()) launcher.cpu = f.launcherCpu.trim();
  if (f.launcherMemory.trim()) launcher.memory = f.launcherMemory.trim();
  if (Object.keys(launcher).length) input.launcher_resources = launcher;
  const env = f.env.filter((e) => e.name !== '');
  if (env.length) input.env = env.map((e) => ({ name: e.name, value: e.value }));
  if (f.queue.trim()) input.queue = f.queue.trim();
  if (f.dataConnections.length) input.data_connections = [...f.dataConnections];
  const pvcs = pvcsOf(f.pvcs);
  if (pvcs.length) input.pvcs = pvcs;
  const configMaps = pvcsOf(f.configMaps).map((p) => (p.mount_path ? { name: p.claim, mount_path: p.mount_path } : { name: p.claim }));
  if (configMaps.length) input.config_maps = configMaps;
  try {
    const sel = nodeSelectorOf(f.nodeSelector);
    if (Object.keys(sel).length) input.node_selector = sel;
  } catch {
    // shown next to the field; the builder is not asked
  }
  if (f.description.trim()) input.description = f.description.trim();
  if (f.timeout.trim()) input.timeout = f.timeout.trim();
  if (f.retries) input.retries = f.retries;
  if (f.serviceAccount.trim()) input.service_account = f.serviceAccount.trim();
  if (f.gracePeriod.trim()) input.grace_period = f.gracePeriod.trim();
  if (f.priority.trim()) input.priority = f.priority.trim();
  try {
    const tolerations = tolerationsOf(f.tolerations);
    if (tolerations.length) input.tolerations = tolerations;
  } catch {
    // shown next to the field
  }
  const secrets = lines(f.imagePullSecrets);
  if (secrets.length) input.image_pull_secrets = secrets;
  const flags = f.launcherFlags.split(/\s+/).filter((x) => x !== '');
  if (flags.length) input.launcher_flags = flags;
  return input;
}

/** summary is the Review step's sentence: "4 Workers × 2 slots = 8 ranks, 8 CPUs, 32Gi, 4 GPUs", for what the form sets, else the runtime's. */
export function summary(f: Form, rt?: RuntimeInfo): string {
  const slots = f.slotsPerWorker > 0 ? f.slotsPerWorker : rt?.slotsPerWorker || 1;
  const worker: Record<string, string> = { ...(rt?.workerRequests ?? {}) };
  if (f.cpu.trim()) worker.cpu = f.cpu.trim();
  if (f.memory.trim()) worker.memory = f.memory.trim();
  if (f.gpus >= 0) worker['nvidia.com/gpu'] = String(f.gpus);
  return summaryOf(f.workers, slots, worker);
}

/**
 * summaryOf is a job of `workers` Workers with `slots` slots each, each asking for `worker`, in a sentence: Go's
 * jobview.Summary, which a job's page shows; both are tested with pkg/jobview/testdata/summaries.json.
 */
export function summaryOf(workers: number, slots: number, worker: Record<string, string>): string {
  slots = Math.max(slots, 1);
  const ranks = workers * slots;
  const agree = (n: number, one: string, many: string) => `${n} ${n === 1 ? one : many}`;
  const parts = [`${agree(workers, 'Worker', 'Workers')} × ${agree(slots, 'slot', 'slots')} = ${agree(ranks, 'rank', 'ranks')}`];
  if (worker.cpu !== undefined) parts.push(`${readable('cpu', workers, worker.cpu)} CPUs`);
  if (worker.memory !== undefined) parts.push(readable('memory', workers, worker.memory));
  let gpus = 0;
  for (const [k, v] of Object.entries(worker)) if (k.endsWith('/gpu')) gpus += Number(v) * workers;
  parts.push(agree(gpus, 'GPU', 'GPUs'));
  return parts.join(', ');
}

const binaryUnits: [string, number][] = [['Ei', 2 ** 60], ['Pi', 2 ** 50], ['Ti', 2 ** 40], ['Gi', 2 ** 30], ['Mi', 2 ** 20], ['Ki', 2 ** 10]];
const decimalScale: Record<string, number> = { '': 1, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18 };

/**
 * readable is n × q as Go's jobview.Readable writes such a sum: CPUs in cores ("2", "1.5") or millicores under one
 * ("500m"); memory exact in the largest binary unit that divides it ("4608Mi") when q is binary, else in the largest
 * binary unit to three significant digits ("14.9Gi").
 */
export function readable(name: 'cpu' | 'memory', n: number, q: string): string {
  const m = q.trim().match(quantity);
  if (!m) return `${n} × ${q}`;
  const unit = m[3] ?? '';
  const binary = unit.endsWith('i');
  const scale = binary ? binaryUnits.find(([u]) => u === unit)![1] : decimalScale[unit];
  if (name === 'cpu') {
    const milli = Math.round(Number(m[1]) * scale * 1000) * n;
    return milli % 1000 === 0 ? String(milli / 1000) : milli < 1000 ? `${milli}m` : String(milli / 1000);
  }
  const bytes = Number(m[1]) * scale * n;
  if (binary && Number.isInteger(bytes)) {
    const exact = binaryUnits.find(([, size]) => bytes % size === 0);
    if (exact) return `${bytes / exact[1]}${exact[0]}`;
  }
  if (bytes < 1024) return String(bytes);
  const [u, size] = binaryUnits.find(([, s]) => bytes >= s)!;
  return `${threeDigits(bytes / size)}${u}`;
}

/** threeDigits is Go's strconv.FormatFloat(v, 'g', 3, 64): "14.9", "128", "1e+03". */
function threeDigits(v: number): string {
  const p = v.toPrecision(3);
  if (!p.includes('e')) return String(Number(p));
  const [mant, exp] = p.split('e');
  const e = Number(exp);
  return `${Number(mant)}e${e < 0 ? '-' : '+'}${String(Math.abs(e)).padStart(2, '0')}`;
}

/** times multiplies a quantity ("500m", "8Gi", "4") by n, keeping its unit. */
export function times(n: number, q: string): string {
  const m = q.trim().match(quantity);
  if (!m) return `${n} × ${q}`;
  const v = Number(m[1]) * n;
  const unit = m[3] ?? '';
  if (unit === 'm' && v % 1000 === 0) return String(v / 1000);
  return `${Number.isInteger(v) ? v : v.toFixed(2)}${unit}`;
}

/** fromInput fills the form from a job's inputs (the inverse of toInput). */
export function fromInput(input: JobInput, namespace: string): Form {
  const res = (input.resources_per_worker ?? {}) as Record<string, string>;
  const launcher = (input.launcher_resources ?? {}) as Record<string, string>;
  const sel = (input.node_selector ?? {}) as Record<string, string>;
  return {
    ...emptyForm,
    name: String(input.name ?? ''),
    namespace,
    runtime: String(input.runtime ?? emptyForm.runtime),
    image: String(input.image ?? input.worker_image ?? ''),
    command: ((input.command ?? []) as string[]).join('\n'),
    workers: Number(input.workers ?? 1),
    slotsPerWorker: Number(input.slots_per_worker ?? 0),
    env: ((input.env ?? []) as { name: string; value?: string }[]).map((e) => ({ name: e.name, value: e.value ?? '' })),
    cpu: res.cpu ?? '',
    memory: res.memory ?? '',
    gpus: res['nvidia.com/gpu'] !== undefined ? Number(res['nvidia.com/gpu']) : -1,
    launcherCpu: launcher.cpu ?? '',
    launcherMemory: launcher.memory ?? '',
    queue: String(input.queue ?? ''),
    nodeSelector: Object.entries(sel).map(([k, v]) => `${k}=${v}`).join('\n'),
    dataConnections: ((input.data_connections ?? []) as string[]).slice(),
    pvcs: ((input.pvcs ?? []) as { claim: string; mount_path?: string }[]).map((p) => (p.mount_path ? `${p.claim}:${p.mount_path}` : p.claim)).join('\n'),
    configMaps: ((input.config_maps ?? []) as { name: string; mount_path?: string }[]).map((c) => (c.mount_path ? `${c.name}:${c.mount_path}` : c.name)).join('\n'),
    description: String(input.description ?? ''),
    timeout: String(input.timeout ?? ''),
    retries: Number(input.retries ?? 0),
    priority: String(input.priority ?? ''),
    tolerations: ((input.tolerations ?? []) as Toleration[]).map(formatToleration).join('\n'),
    imagePullSecrets: ((input.image_pull_secrets ?? []) as string[]).join('\n'),
    launcherFlags: ((input.launcher_flags ?? []) as string[]).join(' '),
    serviceAccount: String(input.service_account ?? ''),
    gracePeriod: String(input.grace_period ?? ''),
  };
}

/** pvcsOf reads the PVC lines (claim or claim:/mount/path) into the builder's form. */
export function pvcsOf(text: string): { claim: string; mount_path?: string }[] {
  return text
    .split('\n')
    .map((l) => l.trim())
    .filter((l) => l !== '')
    .map((l) => {
      const i = l.indexOf(':');
      return i < 0 ? { claim: l } : { claim: l.slice(0, i), mount_path: l.slice(i + 1) };
    });
}

/** cloneName suggests a name for a copy: NAME-2, NAME-3, ... within the length limit. */
export function cloneName(name: string): string {
  const m = name.match(/^(.*)-(\d+)$/);
  const [stem, n] = m ? [m[1], Number(m[2]) + 1] : [name, 2];
  const suffix = `-${n}`;
  return stem.slice(0, maxNameLength - suffix.length).replace(/-+$/, '') + suffix;
}

/**
 * resubmitFix is the change "Edit and resubmit" applies for a failure's
 * reason: after an OOM kill, twice the memory that was too little. It
 * returns the changed form and a sentence saying what changed ("" when the
 * reason has no fix of its own).
 */
export function resubmitFix(f: Form, src: CloneSource): [Form, string] {
  switch (src.reason) {
    case 'WorkerOOMKilled': {
      const was = f.memory || src.workerMemoryLimit;
      if (!was) return [f, ''];
      const memory = times(2, was);
      return [{ ...f, memory }, `Memory per Worker raised from ${was} to ${memory}: a Worker was killed for using more than its limit.`];
    }
    case 'LauncherOOMKilled': {
      const was = f.launcherMemory || src.launcherMemoryLimit;
      if (!was) return [f, ''];
      const launcherMemory = times(2, was);
      return [{ ...f, launcherMemory }, `Launcher memory raised from ${was} to ${launcherMemory}: the Launcher was killed for using more than its limit.`];
    }
  }
  return [f, ''];
}
