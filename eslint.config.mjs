// Lint for the whole repo. Module boundaries (STYLE.md 9): domain libs import only domain
// libs; adapters and the store build on the domain; services use domain libs and the store
// but never pick an adapter (the app wires adapters in); only the app sees everything.
import js from '@eslint/js';
import { createProjectGraphAsync } from '@nx/devkit';
import nx from '@nx/eslint-plugin';
import tseslint from 'typescript-eslint';

// The boundary rule reads Nx's cached project graph and silently skips itself when there is
// none (a fresh clone, `rm -rf .nx`). Build (or refresh) the graph before any file is linted,
// so the rule runs wherever eslint does: `npm run lint`, `npx eslint <file>`, an editor.
await createProjectGraphAsync({ exitOnError: true });

// Packages that talk to the outside world: only the adapters (libs/platform) and the app may
// import them. Domain code stays testable without a broker, a database or a model.
const ADAPTER_PACKAGES = ['kafkajs', 'ioredis', 'pg', '@electric-sql/pglite', 'openai', 'bullmq'].flatMap((p) => [p, `${p}/*`]);

export default [
  { ignores: ['**/dist/**', '**/node_modules/**', 'libs/proto/src/gen/**', '**/*.js', '**/*.mjs', '.nx/**', 'coverage/**'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ['**/*.ts'],
    plugins: { '@nx': nx },
    rules: {
      '@nx/enforce-module-boundaries': [
        'error',
        {
          allow: [],
          depConstraints: [
            { sourceTag: 'type:domain', onlyDependOnLibsWithTags: ['type:domain'], bannedExternalImports: ADAPTER_PACKAGES },
            { sourceTag: 'type:adapter', onlyDependOnLibsWithTags: ['type:domain'] },
            { sourceTag: 'type:store', onlyDependOnLibsWithTags: ['type:domain'] },
            { sourceTag: 'type:service', onlyDependOnLibsWithTags: ['type:domain', 'type:store'], bannedExternalImports: ADAPTER_PACKAGES },
            { sourceTag: 'type:sdk', onlyDependOnLibsWithTags: ['type:domain'], bannedExternalImports: ADAPTER_PACKAGES },
            { sourceTag: 'type:app', onlyDependOnLibsWithTags: ['type:domain', 'type:store', 'type:adapter', 'type:service', 'type:sdk'] },
          ],
        },
      ],
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/no-explicit-any': 'error',
    },
  },
  {
    files: ['**/*.spec.ts'],
    rules: { '@nx/enforce-module-boundaries': 'off' },
  },
];
