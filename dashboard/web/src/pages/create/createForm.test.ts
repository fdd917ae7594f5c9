import { describe, expect, it } from 'vitest';
import { cloneName, emptyForm, envError, fromInput, nameError, nodeSelectorOf, priorityError, quantityError, resubmitFix, retriesError, summary, timeoutError, times, toInput, tolerationsOf, workersError } from './createForm';

describe('nameError', () => {
  it.each([
    ['train-1', ''],
    ['', 'Name the job.'],
    ['Bad_Name', 'DNS label'],
    ['-lead', 'DNS label'],
    ['trail-', 'DNS label'],
    ['n'.repeat(45), 'at most 44 characters (45 now)'],
  ])('%s', (name, want) => {
    const got = nameError(name);
    if (want === '') expect(got).toBe('');
    else expect(got).toContain(want);
  });
});

describe('workersError', () => {
  it('needs one Worker', () => expect(workersError(0)).toBe('A job needs at least 1 Worker.'));
  it('keeps to the policy', () => expect(workersError(9, 8)).toContain('at most 8 Workers'));
  it('accepts the fit', () => expect(workersError(8, 8)).toBe(''));
});

describe('quantityError and envError', () => {
  it('quantities', () => {
    expect(quantityError('500m', '4')).toBe('');
    expect(quantityError('32Gi', '16Gi')).toBe('');
    expect(quantityError('', '16Gi')).toBe('');
    expect(quantityError('lots', '16Gi')).toBe('"lots" is not a quantity: use e.g. 16Gi.');
  });
  it('env names', () => {
    expect(envError([{ name: 'NCCL_DEBUG', value: 'INFO' }])).toBe('');
    expect(envError([{ name: '1X', value: '' }])).toContain('not a valid variable name');
  });
});

describe('toInput', () => {
  it('0 GPUs removes the runtime\'s, the default sends nothing', () => {
    expect(toInput({ ...emptyForm, name: 'j', gpus: 0 }).resources_per_worker).toEqual({ 'nvidia.com/gpu': '0' });
    expect(toInput({ ...emptyForm, name: 'j' }).resources_per_worker).toBeUndefined();
  });
  it('gives the builder only what the user set', () => {
    expect(toInput({ ...emptyForm, name: 'j', workers: 3 })).toEqual({ name: 'j', runtime: 'mpi-openmpi', workers: 3 });
  });
  it('maps every field to jobspec.Input', () => {
    const got = toInput({
      ...emptyForm, name: 'j', workers: 4, slotsPerWorker: 2, image: ' reg/x:1 ', command: 'mpirun\n python3 train.py \n',
      cpu: '2', memory: '8Gi', gpus: 1, launcherCpu: '500m', launcherMemory: '1Gi',
      env: [{ name: 'A', value: '1' }, { name: '', value: '' }], queue: 'default', nodeSelector: 'disktype=ssd\n',
    });
    expect(got).toEqual({
      name: 'j', runtime: 'mpi-openmpi', workers: 4, slots_per_worker: 2, image: 'reg/x:1', command: ['mpirun', 'python3 train.py'],
      resources_per_worker: { cpu: '2', memory: '8Gi', 'nvidia.com/gpu': '1' }, launcher_resources: { cpu: '500m', memory: '1Gi' },
      env: [{ name: 'A', value: '1' }], queue: 'default', node_selector: { disktype: 'ssd' },
    });
  });
  it('refuses a node label that is not key=value', () => {
    expect(() => nodeSelectorOf('ssd')).toThrow('"ssd" is not key=value');
  });
});

describe('summary', () => {
  it("the issue's sentence", () => {
    expect(summary({ ...emptyForm, workers: 4, slotsPerWorker: 2, cpu: '2', memory: '8Gi', gpus: 1 })).toBe('4 Workers × 2 slots = 8 ranks, 8 CPUs, 32Gi, 4 GPUs');
  });
  it("the runtime's sizes when the user sets none", () => {
    const rt = { name: 'r', launcherHostsRanks: false, workers: 1, slotsPerWorker: 1, workerRequests: { cpu: '100m', memory: '128Mi' } };
    expect(summary({ ...emptyForm, workers: 1 }, rt)).toBe('1 Worker × 1 slot = 1 rank, 100m CPUs, 128Mi, 0 GPUs');
  });
  it('times', () => {
    expect(times(10, '100m')).toBe('1');
    expect(times(3, '1.5')).toBe('4.50');
    expect(times(2, '16Gi')).toBe('32Gi');
  });
});

describe('clone', () => {
  it('fromInput is the inverse of toInput', () => {
    const f = { ...emptyForm, name: 'j', namespace: 'team-a', workers: 4, slotsPerWorker: 2, image: 'reg/x:1', command: 'mpirun\npython3 t.py', cpu: '2', memory: '8Gi', gpus: 1, launcherCpu: '500m', launcherMemory: '1Gi', env: [{ name: 'A', value: '1' }], queue: 'default', nodeSelector: 'disktype=ssd' };
    expect(fromInput(toInput(f), 'team-a')).toEqual(f);
  });
  it('carries what a job sets besides its shape: timeout, retries, priority, tolerations, pull Secrets, description, ConfigMaps, grace period, ServiceAccount', () => {
    const f = {
      ...emptyForm, name: 'j', namespace: 'team-a', queue: 'default', description: 'nightly digits', timeout: '1h30m', retries: 2, priority: 'high',
      tolerations: 'dedicated=mpi:NoSchedule\nspot', imagePullSecrets: 'regcred', launcherFlags: '--bind-to none', configMaps: 'cfg\nother:/etc/other',
      gracePeriod: '5m', serviceAccount: 'trainer',
    };
    const input = toInput(f);
    expect([input.grace_period, input.service_account]).toEqual(['5m', 'trainer']);
    expect(input.tolerations).toEqual([{ key: 'dedicated', operator: 'Equal', value: 'mpi', effect: 'NoSchedule' }, { key: 'spot', operator: 'Exists' }]);
    expect(input.launcher_flags).toEqual(['--bind-to', 'none']);
    expect(input.config_maps).toEqual([{ name: 'cfg' }, { name: 'other', mount_path: '/etc/other' }]);
    expect(fromInput(input, 'team-a')).toEqual(f);
  });
  it('refuses a bad timeout, retries, a priority without a queue and a bad toleration as the builder does', () => {
    expect(timeoutError('90')).toContain('is not a duration');
    expect(timeoutError('0m')).toContain('must be more than 0');
    expect(timeoutError('2h')).toBe('');
    expect(retriesError(11)).toContain('0 to 10');
    expect(priorityError('high', '')).toContain('no queue');
    expect(priorityError('high', 'default')).toBe('');
    expect(() => tolerationsOf('a=b:Sometimes')).toThrow('the effect must be');
    expect(() => tolerationsOf('=b')).toThrow('has no taint key');
  });
  it('cloneName', () => {
    expect(cloneName('train')).toBe('train-2');
    expect(cloneName('train-2')).toBe('train-3');
    expect(cloneName('n'.repeat(44))).toBe('n'.repeat(42) + '-2');
  });
  it('resubmitFix doubles the memory that was too little', () => {
    const [f, why] = resubmitFix({ ...emptyForm, memory: '' }, { input: { name: 'j', runtime: 'mpi-openmpi', workers: 1 }, reason: 'WorkerOOMKilled', workerMemoryLimit: '1Gi' });
    expect(f.memory).toBe('2Gi');
    expect(why).toContain('from 1Gi to 2Gi');
    const [g] = resubmitFix({ ...emptyForm, launcherMemory: '300Mi' }, { input: { name: 'j', runtime: 'mpi-openmpi', workers: 1 }, reason: 'LauncherOOMKilled' });
    expect(g.launcherMemory).toBe('600Mi');
    expect(resubmitFix(emptyForm, { input: { name: 'j', runtime: 'mpi-openmpi', workers: 1 }, reason: 'ProgramError' })[1]).toBe('');
  });
});
