// ESLint for the pages' JavaScript (web/src): eslint's recommended rules, for plain browser
// scripts (no modules: index.html loads them in order) that share the `podprof` namespace
// object (window.podprof) and use uPlot from /assets/uPlot.min.js. Formatting is prettier's
// (.prettierrc.json); `npm run check` (web/check.sh) runs both.
import js from '@eslint/js';
import globals from 'globals';

export default [
  {
    files: ['src/**/*.js'],
    ...js.configs.recommended,
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'script',
      globals: {
        ...globals.browser,
        podprof: 'readonly',
        uPlot: 'readonly',
      },
    },
    rules: {
      ...js.configs.recommended.rules,
      'no-unused-vars': ['error', {args: 'after-used', caughtErrors: 'all'}],
      'no-var': 'error',
      'prefer-const': 'error',
      eqeqeq: ['error', 'always', {null: 'ignore'}],
      strict: ['error', 'function'],
    },
  },
  {
    files: ['*.mjs'],
    ...js.configs.recommended,
    languageOptions: {ecmaVersion: 2022, sourceType: 'module', globals: globals.node},
  },
];
