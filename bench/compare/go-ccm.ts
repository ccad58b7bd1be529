// Builds the stock Go cloud-controller-manager with the benchmark cloud (bench/go-ccm/) once per
// machine, as tools/control-plane/assets.ts builds kube-apiserver: into
// <cache>/go-ccm/kubernetes-<version>-<hash>/cloud-controller-manager, keyed by the Go module's
// files, staged in a temporary folder and renamed into place, so that a build that dies half-way
// never looks complete. The module must pin k8s.io/cloud-provider at the control plane's version.

import { createHash } from 'node:crypto';
import { readFile, readdir } from 'node:fs/promises';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  buildFolder,
  cacheRoot,
  goBuild,
  isExecutable,
  pinnedVersions,
  versionStamps,
} from '../../tools/control-plane/index.ts';

const moduleDir = fileURLToPath(new URL('../go-ccm/', import.meta.url));
const binaryName = 'cloud-controller-manager';

export interface GoCcm {
  readonly binary: string;
  /** The Kubernetes version it was built at, e.g. v1.36.3. */
  readonly kubernetes: string;
  /** Seconds the build took, when this call built it; undefined when it came from the cache. */
  readonly builtInSeconds: number | undefined;
}

/** The cached binary, built first when missing (several minutes on 2 cores with cold Go caches). */
export async function goCcm(progress: (line: string) => void): Promise<GoCcm> {
  const kubernetes = await checkedVersion();
  const dir = join(cacheRoot(), 'go-ccm', `kubernetes-${kubernetes}-${await moduleHash()}`);
  const binary = join(dir, binaryName);
  if (await isExecutable(binary)) return { binary, kubernetes, builtInSeconds: undefined };
  const started = performance.now();
  progress(`building the Go cloud-controller-manager (Kubernetes ${kubernetes}) once into ${dir}`);
  await buildFolder(dir, binaryName, (staging) =>
    goBuild({
      dir: moduleDir,
      pkg: '.',
      output: join(staging, binaryName),
      ldflags: versionStamps(kubernetes),
      name: 'go-ccm',
      env: process.env,
      progress,
    }),
  );
  const builtInSeconds = (performance.now() - started) / 1000;
  progress(`built the Go cloud-controller-manager in ${builtInSeconds.toFixed(0)} s`);
  return { binary, kubernetes, builtInSeconds };
}

// k8s.io/cloud-provider v0.X.Y belongs to Kubernetes v1.X.Y: it must be the control plane's.
async function checkedVersion(): Promise<string> {
  const { kubernetes } = await pinnedVersions();
  const goMod = await readFile(join(moduleDir, 'go.mod'), 'utf8');
  const cloudProvider = /^\s*k8s\.io\/cloud-provider (v\S+)/m.exec(goMod)?.[1];
  const expected = kubernetes.replace(/^v1\./, 'v0.');
  if (cloudProvider !== expected) {
    throw new Error(
      `bench/go-ccm/go.mod requires k8s.io/cloud-provider ${cloudProvider ?? '(none)'}, but the control plane is ` +
        `Kubernetes ${kubernetes}: set ${expected} there (and the other k8s.io modules), then run go mod tidy`,
    );
  }
  return kubernetes;
}

async function moduleHash(): Promise<string> {
  const hash = createHash('sha256');
  const files = (await readdir(moduleDir)).filter((f) => f === 'go.mod' || f === 'go.sum' || f.endsWith('.go'));
  for (const file of files.sort())
    hash
      .update(file)
      .update('\0')
      .update(await readFile(join(moduleDir, file)));
  return hash.digest('hex').slice(0, 12);
}
