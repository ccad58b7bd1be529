// `cirrus version` (and `cirrus --version`): what this cirrus is, and what it runs with.

import { registeredCloudProviders } from '../../shared/cloud/registry.ts';
import type { CommandLine } from '../config.ts';
import type { Io } from './io.ts';
import { importProviderModule } from './provider-module.ts';

/**
 * The Kubernetes release cirrus targets: the controllers' behaviour it matches, and the
 * kube-apiserver and etcd its tests and `cirrus cluster` run (k8s.io/kubernetes in
 * tools/control-plane/go.mod, which tools/control-plane/bump.sh moves, this line with it).
 */
export const kubernetesRelease = 'v1.36.3';

/** Prints the versions; exit status 0. */
export async function runVersion(line: CommandLine<'providerModule'>, io: Io): Promise<number> {
  if (line.config.providerModule !== undefined) await importProviderModule(line.config.providerModule);
  io.stdout.write(
    [
      `cirrus ${await packageVersion()}`,
      `kubernetes ${kubernetesRelease} (the release whose cloud controllers cirrus matches, and whose control plane it is tested against)`,
      `node ${process.version}`,
      `providers ${registeredCloudProviders().join(', ') || '(none)'}`,
      '',
    ].join('\n'),
  );
  return 0;
}

// Imported, not read from a path: a build inlines it, wherever its files end up.
async function packageVersion(): Promise<string> {
  const { default: pkg } = await import('../../package.json', { with: { type: 'json' } });
  return pkg.version;
}
