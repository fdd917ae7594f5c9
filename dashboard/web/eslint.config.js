// ESLint for the dashboard's front end (make verify runs it): TypeScript's
// recommended rules, the rules of hooks, and no import cycles (pages import
// app/routes to move between pages, never app/App).
import js from '@eslint/js';
import importX, { createNodeResolver } from 'eslint-plugin-import-x';
import reactHooks from 'eslint-plugin-react-hooks';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/**', 'node_modules/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['src/**/*.{ts,tsx}'],
    plugins: { 'import-x': importX, 'react-hooks': reactHooks },
    settings: {
      // import-x reads TypeScript modules to follow their imports.
      'import-x/extensions': ['.ts', '.tsx', '.js'],
      'import-x/parsers': { '@typescript-eslint/parser': ['.ts', '.tsx'] },
      'import-x/resolver-next': [createNodeResolver({ extensions: ['.ts', '.tsx', '.js', '.json'] })],
    },
    rules: {
      'import-x/no-cycle': 'error',
      'import-x/no-unresolved': 'error',
      'react-hooks/rules-of-hooks': 'error',
      'react-hooks/exhaustive-deps': 'error',
    },
  },
  {
    files: ['e2e/**/*.mjs'],
    // Node scripts that drive Chromium; page.evaluate bodies run in the page.
    languageOptions: {
      globals: Object.fromEntries(['process', 'console', 'setTimeout', 'URL', 'fetch', 'Buffer', 'performance', 'window', 'document'].map((g) => [g, 'readonly'])),
    },
  },
);
