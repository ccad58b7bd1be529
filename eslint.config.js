// Lint rules: typescript-eslint's strict, type-aware set, plus the size limits of the house style
// (complexity 10, 4 parameters), and no floating promises (a dropped promise is a dropped error).
import js from '@eslint/js';
import { readdirSync } from 'node:fs';
import { createNodeResolver, importX } from 'eslint-plugin-import-x';
import tseslint from 'typescript-eslint';

// The layers (docs/adr/0009-function-catalogue-and-layers.md, amended by ADR 0016): every top-level
// folder has one role, and imports run one way, with no exemption:
//   bin → app → functions, relay, providers, tools → shared
//   scripts (the build) → app and below; test → anything but bench; bench → test/harness and below.
// Inside those: a function imports only shared/ and its own folder (functions/catalogue.ts, which
// lists them, reads their folders); a provider, and the conformance kit beside the providers, import
// only the contract (shared/cloud/), the Kubernetes helpers (shared/kube/) and shared/net/.
const folders = (dir) =>
  readdirSync(dir, { withFileTypes: true })
    .filter((d) => d.isDirectory())
    .map((d) => d.name);
const layerRule = (zones) => ({ 'import-x/no-restricted-paths': ['error', { zones }] });
const above = {
  app: 'the application (app/) composes everything; nothing below imports it',
  functions: 'functions/ are reached through the catalogue from app/',
  relay: 'the relay is composed by app/',
  providers: 'providers are registered by app/ (providers/index.ts)',
  tools: 'tooling (tools/) is used by app/, tests and benchmarks',
  scripts: 'scripts/ is the build',
  test: 'tests import product code, never the reverse',
  bench: 'benchmarks import test/harness/, never the reverse',
};
const forbid = (target, names) =>
  names.map((name) => ({
    target: `./${target}`,
    from: `./${name}`,
    message: `${target}/ never imports ${name}/: ${above[name]}.`,
  }));
const layers = [
  { files: ['shared/**/*.{ts,js}'], rules: layerRule(forbid('shared', Object.keys(above))) },
  {
    files: ['tools/**/*.{ts,js}'],
    rules: layerRule(forbid('tools', ['app', 'functions', 'relay', 'providers', 'scripts', 'test', 'bench'])),
  },
  {
    files: ['relay/**/*.{ts,js}'],
    rules: layerRule(forbid('relay', ['app', 'functions', 'providers', 'tools', 'scripts', 'test', 'bench'])),
  },
  {
    files: ['functions/**/*.{ts,js}'],
    rules: layerRule([
      ...forbid('functions', ['app', 'relay', 'tools', 'scripts', 'test', 'bench']),
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
    files: ['providers/**/*.{ts,js}'],
    rules: layerRule([
      ...forbid('providers', ['app', 'relay', 'tools', 'scripts', 'test', 'bench']),
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
        message: 'A provider (or the conformance kit) imports no other provider.',
      })),
    ]),
  },
  { files: ['app/**/*.{ts,js}'], rules: layerRule(forbid('app', ['scripts', 'test', 'bench'])) },
  { files: ['bin/**/*.{ts,js}'], rules: layerRule(forbid('bin', ['scripts', 'test', 'bench'])) },
  { files: ['scripts/**/*.{ts,js}'], rules: layerRule(forbid('scripts', ['test', 'bench'])) },
  { files: ['test/**/*.{ts,js}'], rules: layerRule(forbid('test', ['bench'])) },
  {
    files: ['bench/**/*.{ts,js}'],
    rules: layerRule([
      {
        target: './bench',
        from: './test',
        except: ['./harness'],
        message: 'bench/ imports only test/harness/ of test/: what both use lives there.',
      },
    ]),
  },
  {
    files: ['examples/**/*.{ts,js}'],
    rules: layerRule(
      ['app', 'functions', 'relay', 'providers', 'shared', 'tools', 'scripts', 'test', 'bench'].map((name) => ({
        target: './examples',
        from: `./${name}`,
        message: 'An example uses cirrus as its users do: through the cirrus-ccm package, not the source.',
      })),
    ),
  },
];

export default tseslint.config(
  { ignores: ['node_modules/', 'dist/'] },
  js.configs.recommended,
  ...tseslint.configs.strictTypeChecked,
  {
    languageOptions: {
      parserOptions: {
        projectService: {
          allowDefaultProject: [
            'eslint.config.js',
            'bin/cirrus.js',
            'bin/lambda.js',
            'test/harness/rie/runtime-client.js',
          ],
        },
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
    files: ['test/harness/rie/runtime-client.js'],
    languageOptions: { globals: { process: 'readonly', Buffer: 'readonly' } },
  },
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
