// Namespaces the user may see jobs in, and their data connections.
import { api } from './client';
import { apiRoutes } from './routes';
import type { Namespace } from './types';

export const listNamespaces = () => api<{ namespaces: Namespace[] | null }>(apiRoutes.namespaces()).then((r) => r.namespaces ?? []);
export const dataConnections = (ns: string) => api<{ connections: string[]; message?: string }>(apiRoutes.dataConnections(ns));
