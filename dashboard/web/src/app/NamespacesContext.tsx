import { createContext, useContext, useEffect, useState, type ReactNode } from 'react';
import { listNamespaces } from '../api/namespaces';
import type { Namespace } from '../api/types';

/** The namespaces the user may see jobs in, with what they may do there: read once for every page. */
export interface Namespaces {
  /** null until they are read. */
  namespaces: Namespace[] | null;
  error: string;
}

const Ctx = createContext<Namespaces>({ namespaces: null, error: '' });

export function NamespacesProvider({ children }: { children: ReactNode }) {
  const [value, setValue] = useState<Namespaces>({ namespaces: null, error: '' });
  useEffect(() => {
    listNamespaces().then(
      (namespaces) => setValue({ namespaces, error: '' }),
      (e: Error) => setValue({ namespaces: [], error: e.message }),
    );
  }, []);
  return <Ctx.Provider value={value}>{children}</Ctx.Provider>;
}

export const useNamespaces = () => useContext(Ctx);
