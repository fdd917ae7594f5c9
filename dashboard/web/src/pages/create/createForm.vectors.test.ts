import { describe, expect, it } from 'vitest';
import type { JobInput } from '../../api/types';
import { envError, gracePeriodError, minMemoryBytes, nameError, priorityError, quantityError, retriesError, serviceAccountError, summaryOf, timeoutError, tolerationsOf, workersError } from './createForm';
import type { Toleration } from './createForm';

// The builder's shared vectors (pkg/jobspec/testdata/vectors, which Go and
// the SDK test too): the checks the wizard makes as the user types must
// refuse what the builder refuses, and let through what it builds, so the
// form's rules (the 44-character name, quantities, variable names) cannot
// drift from Go's.
const files = import.meta.glob('../../../../../pkg/jobspec/testdata/vectors/*.json', { eager: true, import: 'default' });
const vectors = Object.entries(files).map(([path, v]) => ({
  name: path.split('/').pop()!.replace(/\.json$/, ''),
  ...(v as { input: JobInput; error?: { field: string; value: string } }),
}));

/** What the form says of the input's field ("" = nothing wrong); undefined: the form does not check it. */
function formCheck(field: string, input: JobInput): string | undefined {
  const [group, key] = field.split('.');
  switch (group) {
    case 'name':
      return nameError(input.name);
    case 'workers':
      return workersError(input.workers);
    case 'env':
      // The wizard sets names and values; a variable from a ConfigMap or
      // a Secret is the CLI's and the SDK's to write.
      if ((input.env ?? []).some((e) => e.valueFrom)) return undefined;
      return envError((input.env ?? []).map((e) => ({ name: e.name, value: e.value ?? '' })));
    case 'timeout':
      return timeoutError(input.timeout ?? '');
    case 'retries':
      return retriesError(input.retries ?? 0);
    case 'service_account':
      return serviceAccountError(input.service_account ?? '');
    case 'grace_period':
      return gracePeriodError(input.grace_period ?? '');
    case 'priority':
      // The name's form is the server's to check; the queue rule is the form's.
      if ((input.priority ?? '') !== '' && !/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/.test(input.priority ?? '')) return undefined;
      return priorityError(input.priority ?? '', input.queue ?? '');
    case 'tolerations': {
      // The form reads KEY[=VALUE][:EFFECT] lines; a vector's tolerations are written back that way.
      const ts = (input.tolerations ?? []) as Toleration[];
      if (ts.some((t) => (t.operator === 'Exists' && t.value) || (t.key ?? '').includes('='))) return undefined;
      const text = ts.map((t) => `${t.key ?? ''}${t.operator === 'Exists' ? '' : `=${t.value ?? ''}`}${t.effect ? `:${t.effect}` : ''}`).join('\n');
      try {
        tolerationsOf(text);
        return '';
      } catch (e) {
        return (e as Error).message;
      }
    }
    case 'resources_per_worker':
    case 'launcher_resources':
      if (key !== 'cpu' && key !== 'memory') return undefined;
      return quantityError(((group === 'resources_per_worker' ? input.resources_per_worker : input.launcher_resources) ?? {})[key] ?? '', 'x', key === 'memory' ? minMemoryBytes : 0);
  }
  return undefined;
}

describe('the form checks as the builder does', () => {
  it('loads the vectors', () => {
    expect(vectors.length).toBeGreaterThanOrEqual(20);
  });
  const checked = ['name', 'workers', 'env', 'resources_per_worker.cpu', 'resources_per_worker.memory', 'launcher_resources.cpu', 'launcher_resources.memory', 'timeout', 'retries', 'priority', 'tolerations', 'service_account', 'grace_period'];
  for (const v of vectors) {
    if (v.error) {
      const said = formCheck(v.error.field, v.input);
      if (said === undefined) continue; // checked by the server only
      it(`refuses ${v.name} at ${v.error.field}`, () => {
        expect(said).not.toBe('');
      });
    } else {
      it(`lets ${v.name} through`, () => {
        for (const f of checked) {
          const said = formCheck(f, v.input);
          if (said !== undefined) expect(said, f).toBe('');
        }
      });
    }
  }
});

// The job's resources in a sentence (pkg/jobview/testdata/summaries.json,
// which Go's jobview.Summary is tested with): the Review step says of a
// job what its page will say.
const summaries = (import.meta.glob('../../../../../pkg/jobview/testdata/summaries.json', { eager: true, import: 'default' }) as Record<
  string,
  { vectors: { name: string; workers: number; slotsPerWorker: number; worker: Record<string, string>; summary: string }[] }
>);
const summaryVectors = Object.values(summaries)[0].vectors;

describe('the summary matches Go', () => {
  it('has the vectors', () => expect(summaryVectors.length).toBeGreaterThanOrEqual(8));
  for (const v of summaryVectors) {
    it(v.name, () => expect(summaryOf(v.workers, v.slotsPerWorker, v.worker)).toBe(v.summary));
  }
});
