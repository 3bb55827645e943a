// Lint with type information: the promise rules need the types to see a promise.
import reactHooks from 'eslint-plugin-react-hooks';
import tseslint from 'typescript-eslint';

const promiseRules = {
  // node:test's test() and describe() return promises the runner itself awaits.
  '@typescript-eslint/no-floating-promises': [
    'error',
    { allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['test', 'it', 'describe', 'suite'] }] },
  ],
  '@typescript-eslint/no-misused-promises': 'error',
  '@typescript-eslint/await-thenable': 'error',
};

export default tseslint.config(
  { ignores: ['**/dist/**', '**/node_modules/**', '**/*.js', '**/*.mjs', '**/*.cjs'] },
  {
    files: ['**/*.ts', '**/*.tsx'],
    ignores: ['ui/src/**'],
    extends: [tseslint.configs.base],
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    rules: promiseRules,
  },
  {
    // The browser app is type-checked by its own tsconfig, outside `tsc --build`.
    files: ['ui/src/**/*.ts', 'ui/src/**/*.tsx'],
    extends: [tseslint.configs.base],
    plugins: { 'react-hooks': reactHooks },
    languageOptions: { parserOptions: { project: './ui/tsconfig.app.json', tsconfigRootDir: import.meta.dirname } },
    rules: { ...promiseRules, 'react-hooks/rules-of-hooks': 'error', 'react-hooks/exhaustive-deps': 'error' },
  },
);
