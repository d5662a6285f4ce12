// ESLint for the pages' JavaScript (web/src), web/'s tool config and the pages' tests
// (tests/web): eslint's recommended rules. Paths are from the repository's root: web/check.sh
// runs eslint there (--config web/eslint.config.mjs), since tests/web lies outside web/.
// Formatting is prettier's (.prettierrc.json); `npm run check` (web/check.sh) runs both.
import js from '@eslint/js';
import globals from 'globals';

export default [
  {
    // The pages: plain browser scripts (no modules: index.html loads them in order) that share
    // the `podprof` namespace object (window.podprof) and use uPlot from /assets/uPlot.min.js.
    files: ['web/src/**/*.js'],
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
    files: ['web/*.mjs'],
    ...js.configs.recommended,
    languageOptions: {ecmaVersion: 2022, sourceType: 'module', globals: globals.node},
  },
  {
    // The tests: node modules whose page.evaluate() callbacks run in the browser, so both
    // sets of globals.
    files: ['tests/web/*.mjs'],
    ...js.configs.recommended,
    languageOptions: {
      ecmaVersion: 2022,
      sourceType: 'module',
      globals: {...globals.node, ...globals.browser},
    },
  },
];
