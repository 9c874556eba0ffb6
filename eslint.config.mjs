// Lint for the whole repo. Module boundaries (STYLE.md 9): domain libs import only domain
// libs; adapters and the store build on the domain; services use domain libs and the store
// but never pick an adapter (the app wires adapters in); only the app sees everything.
import js from '@eslint/js';
import nx from '@nx/eslint-plugin';
import tseslint from 'typescript-eslint';

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
            { sourceTag: 'type:domain', onlyDependOnLibsWithTags: ['type:domain'] },
            { sourceTag: 'type:adapter', onlyDependOnLibsWithTags: ['type:domain'] },
            { sourceTag: 'type:store', onlyDependOnLibsWithTags: ['type:domain'] },
            { sourceTag: 'type:service', onlyDependOnLibsWithTags: ['type:domain', 'type:store'] },
            { sourceTag: 'type:sdk', onlyDependOnLibsWithTags: ['type:domain'] },
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
