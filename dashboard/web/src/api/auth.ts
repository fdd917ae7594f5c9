// Who the user is: login, logout, and mpijob-manager's state they see.
import { api, send } from './client';
import { apiRoutes } from './routes';
import type { Manager } from './types';

export const whoami = () => api<{ user: string }>(apiRoutes.whoami());
export const manager = () => api<Manager>(apiRoutes.manager());
export const loginUsers = () => api<{ users: { name: string }[] }>(apiRoutes.loginUsers());
export const login = (body: { token: string } | { user: string }) => send<{ error?: string; user?: string }>('POST', apiRoutes.login(), body);
export const logout = () => send('POST', apiRoutes.logout());
