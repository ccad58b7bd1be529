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
import { build, knativeRoot, standaloneRoot, type KubeObject } from './kustomize.ts';

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

/** The arguments giving an example its values and files (the signing secret a stand-in). */
export function exampleArgs(example: Example): string[] {
  return [
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
