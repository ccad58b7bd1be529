// Lint rules: typescript-eslint's strict, type-aware set, plus the size limits of the house style
// (complexity 10, 4 parameters), and no floating promises (a dropped promise is a dropped error).
import js from '@eslint/js';
import { readdirSync } from 'node:fs';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

// The layers (DESIGN.md, ADR 0009): functions/ and providers/ use shared/, never the reverse; the
// composition root (shared/cli/root.ts) is the one module of shared/ that imports them. A function
// imports only shared/ (the catalogue, which lists the functions, reads their folders); a provider
// imports only the contract (shared/cloud/), the Kubernetes helpers (shared/kube/) and the IP
// module (shared/net/).
const folders = (dir) =>
  readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name);
const layerRule = (zones) => ({ 'import-x/no-restricted-paths': ['error', { zones }] });
const layers = [
  {
    files: ['shared/**/*.ts'],
    ignores: ['shared/cli/root.ts'],
    rules: layerRule([
      {
        target: './shared',
        from: './functions',
        message: 'shared/ never imports functions/: take it from the composition root (shared/cli/root.ts).',
      },
      {
        target: './shared',
        from: './providers',
        message: 'shared/ never imports providers/: take it from the composition root (shared/cli/root.ts).',
      },
    ]),
  },
  {
    files: ['functions/**/*.ts'],
    rules: layerRule([
      {
        target: './functions',
        from: './providers',
        message: 'A function sees only the contract (shared/cloud/), never a provider.',
      },
      ...folders('functions').map((name) => ({
        target: `./functions/${name}`,
        from: './functions',
        except: [`./${name}`],
        message: 'A function imports only shared/ and its own folder: what two functions share belongs in shared/.',
      })),
    ]),
  },
  {
    files: ['providers/**/*.ts'],
    rules: layerRule([
      { target: './providers', from: './functions', message: 'A provider never imports a function.' },
      {
        target: './providers',
        from: './shared',
        except: ['./cloud', './kube', './net'],
        message:
          'A provider sees only the contract (shared/cloud/), the Kubernetes helpers (shared/kube/) and shared/net/.',
      },
      ...folders('providers').map((name) => ({
        target: `./providers/${name}`,
        from: './providers',
        except: [`./${name}`],
        message: 'A provider imports no other provider.',
      })),
    ]),
  },
];

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/'] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: { allowDefaultProject: ['eslint.config.js', 'bin/cirrus.js', 'bin/lambda.js'] },
        tsconfigRootDir: import.meta.dirname,
      },
    },
    rules: {
      complexity: ['error', 10],
      'max-params': ['error', 4],
      '@typescript-eslint/no-floating-promises': [
        'error',
        {
          // node:test registers suites and tests synchronously; their returned promises are the runner's.
          allowForKnownSafeCalls: [
            { from: 'package', package: 'node:test', name: ['describe', 'it', 'test', 'suite'] },
          ],
        },
      ],
      '@typescript-eslint/explicit-module-boundary-types': 'error',
      '@typescript-eslint/restrict-template-expressions': ['error', { allowNumber: true }],
      // @kubernetes/client-node declares its API objects as classes but serializes plain objects;
      // its own examples pass object literals, which is what this rule would forbid.
      '@typescript-eslint/no-unsafe-class-instance-assignment': 'off',
      // Same reason: spreading those objects to copy them is how their data is used.
      '@typescript-eslint/no-misused-spread': 'off',
    },
  },
  {
    // The example provider is a project of its own (its tsconfig.json resolves cirrus-ccm from its
    // node_modules); here it is checked as part of the repository, where cirrus-ccm is the source.
    files: ['examples/out-of-tree-provider/**/*.ts'],
    languageOptions: { parserOptions: { projectService: false, project: './tsconfig.json' } },
  },
  {
    plugins: { 'import-x': importX },
    settings: {
      'import-x/resolver-next': [createNodeResolver()],
    },
  },
  ...layers,
  { files: ['eslint.config.js', 'bin/cirrus.js', 'bin/lambda.js'], ...tseslint.configs.disableTypeChecked },
  { files: ['bin/cirrus.js', 'bin/lambda.js'], languageOptions: { globals: { process: 'readonly' } } },
  {
    // A provider may wrap the contract's errors ({ cause }); instanceof misses a wrapped one. (findCause's
    // own `instanceof type` in shared/cloud/errors.ts names no contract class, so nothing is exempted.)
    rules: {
      'no-restricted-syntax': [
        'error',
        {
          selector:
            "BinaryExpression[operator='instanceof']:matches([right.name=/^(InstanceNotFoundError|NotImplementedError|ImplementedElsewhereError|RetryError|CloudConfigError)$/], [right.property.name=/^(InstanceNotFoundError|NotImplementedError|ImplementedElsewhereError|RetryError|CloudConfigError)$/])",
          message:
            'Match contract errors with findCause(error, Class) from shared/cloud/errors.ts: a provider may wrap them, and instanceof misses a wrapped one.',
        },
      ],
    },
  },
);
