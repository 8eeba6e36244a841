// Flat config: typescript-eslint's recommended rules over the TypeScript sources.
import js from '@eslint/js';
import reactHooks from 'eslint-plugin-react-hooks';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['.dependency-cruiser.cjs', 'node_modules/', '.venv/', '.data/', 'dist/', 'apps/dashboard/dist/', 'test-results/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    rules: {
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      '@typescript-eslint/consistent-type-imports': 'error',
      'no-console': 'off',
      // The layout's first rule: no import climbs more than one folder. Reach another area through
      // its subpath import (#core/<context>, #db/<table group>, #contracts/<name>, ...; package.json
      // "imports"). Which area may import which is checked by dependency-cruiser (.dependency-cruiser.cjs).
      'no-restricted-imports': [
        'error',
        { patterns: [{ regex: '^(\\.\\./){2,}', message: 'Import through a subpath import (#core/..., #db/...) instead of climbing folders.' }] },
      ],
    },
  },
  // The dashboard (React): the two classic hook rules.
  {
    files: ['apps/dashboard/**/*.{ts,tsx}'],
    plugins: { 'react-hooks': reactHooks },
    rules: {
      'react-hooks/rules-of-hooks': 'error',
      'react-hooks/exhaustive-deps': 'error',
    },
  },
);
