// The Cluster page's checks: kubectl mpijob doctor's, as the user.
import { api } from './client';
import { apiRoutes } from './routes';
import type { Doctor } from './types';

/** Runs the doctor's checks; the admission probe's dry run goes to namespace ns. */
export const runDoctor = (ns: string) => api<Doctor>(apiRoutes.doctor(ns));
