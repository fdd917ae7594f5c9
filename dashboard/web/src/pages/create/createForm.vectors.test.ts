import { describe, expect, it } from 'vitest';
import type { JobInput } from '../../api/types';
import { envError, minMemoryBytes, nameError, quantityError, workersError } from './createForm';

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
  const checked = ['name', 'workers', 'env', 'resources_per_worker.cpu', 'resources_per_worker.memory', 'launcher_resources.cpu', 'launcher_resources.memory'];
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
