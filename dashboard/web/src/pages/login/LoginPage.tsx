import { useEffect, useState } from 'react';
import {
  ActionGroup,
  Alert,
  Button,
  Form,
  FormGroup,
  FormSelect,
  FormSelectOption,
  LoginPage as PFLogin,
  TextInput,
} from '@patternfly/react-core';
import { login, loginUsers } from '../../api/auth';
import { safeNext } from './login';

/** The local cluster's login: pick one of its users, or paste a token. */
export function LoginPage({ reason, next }: { reason: string; next: string }) {
  const [users, setUsers] = useState<string[]>([]);
  const [user, setUser] = useState('');
  const [token, setToken] = useState('');
  const [error, setError] = useState('');
  useEffect(() => {
    loginUsers()
      .then((r) => {
        const names = (r.users ?? []).map((u) => u.name);
        setUsers(names);
        setUser(names[0] ?? '');
      })
      .catch(() => setError('The dashboard cannot be reached.'));
  }, []);
  const submit = async (e: React.FormEvent) => {
    e.preventDefault();
    setError('');
    const res = await login(token ? { token } : { user });
    if (!res.ok) {
      setError(res.error ?? `Login failed (${res.status}).`);
      return;
    }
    window.location.assign(safeNext(next, window.location.origin));
  };
  return (
    <PFLogin loginTitle="Log in to the mpijob dashboard" loginSubtitle="You act as this user: the cluster's permissions apply.">
      {reason && <Alert variant="warning" isInline title={reason} style={{ marginBottom: 16 }} />}
      {error && <Alert variant="danger" isInline title={error} style={{ marginBottom: 16 }} data-testid="login-error" />}
      <Form onSubmit={submit}>
        {users.length > 0 && (
          <FormGroup label="User" fieldId="user">
            <FormSelect id="user" value={user} onChange={(_e, v) => setUser(v)} aria-label="User">
              {users.map((u) => (
                <FormSelectOption key={u} value={u} label={u} />
              ))}
            </FormSelect>
          </FormGroup>
        )}
        <FormGroup label={users.length ? 'or a token' : 'Token'} fieldId="token">
          <TextInput id="token" type="password" value={token} onChange={(_e, v) => setToken(v)} aria-label="Token" />
        </FormGroup>
        <ActionGroup>
          <Button type="submit" variant="primary">Log in</Button>
        </ActionGroup>
      </Form>
    </PFLogin>
  );
}
