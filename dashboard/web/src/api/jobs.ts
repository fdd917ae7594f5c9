// Jobs: read, act on, create, and their tabs' data.
import { api, send } from './client';
import { apiRoutes } from './routes';
import type { ArtifactList, CloneSource, CreateAnswer, JobInput, Metrics, ProgressPoint, QuotaCheck, RegisterAnswer, RegisterRequest, Stacks } from './types';

export const deleteJob = (ns: string, name: string) => api(apiRoutes.job(ns, name), { method: 'DELETE' });
export const suspendJob = (ns: string, name: string, what: 'suspend' | 'resume') => api(apiRoutes.jobAction(ns, name, what), { method: 'POST' });
export const jobInput = (ns: string, name: string) => api<CloneSource>(apiRoutes.jobInput(ns, name));
export const jobMetrics = (ns: string, name: string) => api<Metrics>(apiRoutes.jobMetrics(ns, name));
export const jobProgress = (ns: string, name: string) => api<{ points: ProgressPoint[] }>(apiRoutes.jobProgress(ns, name));
/** Takes every rank's stack now (a POST: it signals the ranks, which keep running). */
export const jobStacks = (ns: string, name: string) => api<Stacks>(apiRoutes.jobStacks(ns, name), { method: 'POST' });
export const jobArtifacts = (ns: string, name: string) => api<ArtifactList>(apiRoutes.jobArtifacts(ns, name));
/** Registers the job's model in the model registry, as the user; the answer says what happened, or why not. */
export const registerModel = (ns: string, name: string, req: RegisterRequest) =>
  send<RegisterAnswer>('POST', apiRoutes.jobRegister(ns, name), req);

/** Creates the job (or with dryRun only checks it); the answer names any field that is wrong. */
export const createJob = (ns: string, input: JobInput, dryRun: boolean) => send<CreateAnswer>('POST', apiRoutes.createJob(ns, dryRun), input);

/** The namespace's quota as the job would use it. */
export const quotaCheck = (ns: string, input: JobInput) =>
  api<QuotaCheck>(apiRoutes.quotaCheck(ns), { method: 'POST', body: JSON.stringify(input), headers: { 'Content-Type': 'application/json' } });
