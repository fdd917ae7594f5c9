// MPI runtimes: the picker, a new one from a template, and test runs.
import { api, send } from './client';
import { apiRoutes } from './routes';
import type { RuntimeInfo } from './types';

/** The cluster's MPI runtimes, then namespace ns's own (each with its namespace set). */
export const listRuntimes = (ns?: string) => api<{ runtimes: RuntimeInfo[]; canCreate: boolean; policyKeys: string[] }>(apiRoutes.runtimes(ns));

/** Creates a runtime from a template; the answer names any field that is wrong. */
export const createRuntime = (input: { from: string; name: string; description: string; image: string; policy: Record<string, string> }) =>
  send<{ error?: string; fields?: { field: string; message: string }[] }>('POST', apiRoutes.runtimes(), input);

export const testRuntime = (name: string, namespace: string) =>
  api<{ id: string }>(apiRoutes.runtimeTest(name), { method: 'POST', body: JSON.stringify({ namespace }), headers: { 'Content-Type': 'application/json' } });
export const runtimeTestRun = <T>(id: string) => api<T>(apiRoutes.runtimeTestRun(id));
