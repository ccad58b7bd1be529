// deploy/helm/cirrus rendered by real Helm (tools/helm/, built once per machine by
// `npm run helm:build` and the test run's global setup; a test never builds it), and what each
// values example renders as: the kustomize build it must equal (ADR 0025).

import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { loadAll } from 'js-yaml';
import { AssetsUnavailableError } from '../../tools/control-plane/index.ts';
import { resolveHelm } from '../../tools/helm/assets.ts';
import assert from 'node:assert/strict';
import { build, identity, knativeRoot, standaloneRoot, type KubeObject } from './kustomize.ts';

export const chartDir = fileURLToPath(new URL('../../deploy/helm/cirrus/', import.meta.url));

/** The helm binary, or why the suites needing it skip (with CIRRUS_TEST_REQUIRE_CONTROL_PLANE=1, none: a failure). */
export async function findHelm(
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ binary?: string; skip: string | false }> {
  try {
    return { binary: (await resolveHelm({ build: false, env })).binary, skip: false };
  } catch (error) {
    if (!(error instanceof AssetsUnavailableError) || env['CIRRUS_TEST_REQUIRE_CONTROL_PLANE'] === '1') throw error;
    return { skip: `no helm: ${error.message}` };
  }
}

/** The release's namespace in every rendering: the one the kustomize bases write. */
export const namespace = 'cirrus-system';

/** A stand-in for the signing secret an operator generates (never committed). */
const signingSecret = 'test-signing-secret';

/** One values example, the files it is rendered with, and the kustomize build it equals. */
export interface Example {
  readonly values: string;
  /** `--set-file` arguments, relative to the repository. */
  readonly setFiles: Readonly<Record<string, string>>;
  readonly kustomize: string;
}

export const examples: readonly Example[] = [
  {
    values: 'examples/static.yaml',
    setFiles: { 'cloudConfig.content': 'deploy/standalone/overlays/example/cloud.yaml' },
    kustomize: join(standaloneRoot, 'overlays/example'),
  },
  {
    values: 'examples/aws-irsa.yaml',
    setFiles: { 'cloudConfig.content': 'deploy/standalone/overlays/aws/cloud.conf' },
    kustomize: join(standaloneRoot, 'overlays/aws'),
  },
  {
    values: 'examples/knative.yaml',
    setFiles: { 'cloudConfig.content': 'deploy/knative/overlays/example/cloud.yaml' },
    kustomize: join(knativeRoot, 'overlays/example'),
  },
  {
    values: 'examples/knative-aws.yaml',
    setFiles: { 'cloudConfig.content': 'deploy/knative/overlays/aws/cloud.conf' },
    kustomize: join(knativeRoot, 'overlays/aws'),
  },
];

const repoRoot = fileURLToPath(new URL('../../', import.meta.url));

/** Runs helm; its stdout, or an Error with its stderr. */
export function runHelm(
  binary: string,
  args: readonly string[],
): { ok: true; out: string } | { ok: false; err: string } {
  const result = spawnSync(binary, args, { cwd: repoRoot, encoding: 'utf8' });
  if (result.error) throw result.error;
  return result.status === 0
    ? { ok: true, out: result.stdout }
    : { ok: false, err: `${result.stderr}${result.stdout}` };
}

/** The image an operator gives (`--set image.repository`): the kustomize overlays' stand-in. */
export const repository = 'registry.example.com/cirrus';

/** The arguments giving an example its values and files (the image and the signing secret stand-ins). */
export function exampleArgs(example: Example): string[] {
  return [
    '--set',
    `image.repository=${repository}`,
    '-f',
    join(chartDir, example.values),
    ...Object.entries(example.setFiles).flatMap(([key, file]) => ['--set-file', `${key}=${file}`]),
    '--set',
    `signing.secret=${signingSecret}`,
  ];
}

/** `helm template` of the chart with `args`, in namespace cirrus-system: its objects. */
export function template(binary: string, args: readonly string[]): KubeObject[] {
  const result = runHelm(binary, ['template', 'cirrus', chartDir, '--namespace', namespace, ...args]);
  if (!result.ok) throw new Error(`helm template ${args.join(' ')} failed:\n${result.err}`);
  return loadAll(result.out).filter((o): o is KubeObject => o !== null && typeof o === 'object');
}

/** The kustomize build an example equals, its signing secret the same stand-in. */
export function kustomizeTwin(example: Example): KubeObject[] {
  return build(example.kustomize, {
    readFile: (path) =>
      path.endsWith('/signing-secret') && !existsSync(path) ? signingSecret : readFileSync(path, 'utf8'),
  });
}

function exampleNamed(values: string): Example {
  const example = examples.find((e) => e.values === values);
  assert.ok(example, values);
  return example;
}

/**
 * What the RBAC proof and the fresh-cluster scenario run on: with helm, the chart's objects in
 * place of the kustomize bases' (the chart renders the bases' objects — helm.test.ts holds them
 * equal — so one run proves both, ADR 0025); without helm, the bases' own.
 */
export async function deployedObjects(): Promise<
  | {
      readonly source: 'chart';
      /** The chart's object of each object's identity (rbac-proof's ObjectSource). */
      readonly substitute: (objects: readonly KubeObject[], root: string) => KubeObject[];
      /** The rendering of one values example. */
      readonly rendered: (values: string) => KubeObject[];
    }
  | { readonly source: 'kustomize' }
> {
  const { binary } = await findHelm();
  if (binary === undefined) return { source: 'kustomize' };
  const rendered = (values: string): KubeObject[] => template(binary, exampleArgs(exampleNamed(values)));
  const byIdentity = (values: readonly string[]): Map<string, KubeObject> =>
    new Map(values.flatMap((v) => rendered(v).map((o) => [identity(o), o] as const)).reverse());
  const standalone = byIdentity(['examples/static.yaml']);
  const knative = byIdentity(['examples/knative-aws.yaml', 'examples/knative.yaml']);
  const substitute = (objects: readonly KubeObject[], root: string): KubeObject[] =>
    objects.map((object) => {
      const chart = (root === standaloneRoot ? standalone : knative).get(identity(object));
      assert.ok(chart, `the chart renders ${identity(object)}`);
      return chart;
    });
  return { source: 'chart', substitute, rendered };
}
