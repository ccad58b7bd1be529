// Lint rules: typescript-eslint's strict, type-aware set, plus the size limits of the house style
// (complexity 10, 4 parameters), and no floating promises (a dropped promise is a dropped error).
import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['node_modules/'] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: { projectService: { allowDefaultProject: ['eslint.config.js', 'bin/cirrus.js', 'bin/lambda.js'] }, tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      complexity: ['error', 10],
      'max-params': ['error', 4],
      '@typescript-eslint/no-floating-promises': ['error', {
        // node:test registers suites and tests synchronously; their returned promises are the runner's.
        allowForKnownSafeCalls: [{ from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite'] }],
      }],
      '@typescript-eslint/explicit-module-boundary-types': 'error',
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      // @kubernetes/client-node declares its API objects as classes but serializes plain objects;
      // its own examples pass object literals, which is what this rule would forbid.
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
      // Same reason: spreading those objects to copy them is how their data is used.
      '@typescript-eslint/no-misused-spread': 'off',
    },
  },
  { files: ['eslint.config.js', 'bin/cirrus.js', 'bin/lambda.js'], ...tseslint.configs.disableTypeChecked },
  { files: ['bin/cirrus.js', 'bin/lambda.js'], languageOptions: { globals: { process: 'readonly' } } },
);
