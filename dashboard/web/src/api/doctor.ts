// The Cluster page's checks: kubectl mpijob doctor's, as the user.
import { api } from './client';
import { apiRoutes } from './routes';
import type { Doctor, Usage } from './types';

/** Runs the doctor's checks; the admission probe's dry run goes to namespace ns. */
export const runDoctor = (ns: string) => api<Doctor>(apiRoutes.doctor(ns));

/** CPU-, memory- and GPU-hours per namespace over the window since (7d, 30d, ...), for the namespaces the user may see. */
export const readUsage = (since: string) => api<Usage>(apiRoutes.usage(since));
