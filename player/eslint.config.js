// `make lint` checks the player's JavaScript (page, probe, adapters, tests, build script) and
// the collector dashboard's script with ESLint's recommended rules. It runs from the
// repository root (`--config player/eslint.config.js`), so the paths here are from the root.
import js from '@eslint/js';
import globals from 'globals';

export default [
  { ignores: ['**/node_modules/**', 'player/dist/**'] },
  js.configs.recommended,
  {
    // 2025: import attributes (the ABR catalog is JSON); the bundle is built for older browsers.
    files: ['player/src/**/*.js'],
    languageOptions: { ecmaVersion: 2025, sourceType: 'module', globals: { ...globals.browser } },
  },
  {
    // Classic scripts of the dashboard; uPlot is loaded before them as a global.
    files: ['server/web/static/**/*.js'],
    languageOptions: { ecmaVersion: 2022, sourceType: 'script', globals: { ...globals.browser, uPlot: 'readonly' } },
  },
  {
    files: ['player/tests/**/*.mjs', 'player/*.mjs', 'player/*.js', 'player/driver/*.mjs'],
    languageOptions: { ecmaVersion: 2025, sourceType: 'module', globals: { ...globals.node } },
  },
  {
    rules: {
      'no-unused-vars': ['error', { argsIgnorePattern: '^_', caughtErrors: 'none' }],
      eqeqeq: ['error', 'always', { null: 'ignore' }],
      'prefer-const': 'error',
      'no-var': 'error',
    },
  },
];
