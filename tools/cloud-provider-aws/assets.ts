// Finds or builds aws-cloud-controller-manager, the CCM of kubernetes/cloud-provider-aws, that the
// migration test (test/migration/) runs before and after cirrus on one cluster and one emulator.
// Nothing here is cirrus code, and no binary or upstream source is kept in the repository: the Go
// module beside this file names the release (its tool directive), and the build fetches it through
// the Go module proxy once per machine, as tools/control-plane/assets.ts builds kube-apiserver.
//
// `go install k8s.io/cloud-provider-aws/cmd/aws-cloud-controller-manager@<version>` refuses the
// module (its go.mod has a replace directive); as a requirement of this module its replace is not
// applied, and github.com/google/cel-go resolves to the version its go.mod requires.
//
// Run directly (`node tools/cloud-provider-aws/assets.ts`) it ensures the binary and prints its path.

import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  cacheRoot,
  goBuild,
  pinnedVersions,
  resolveGoTool,
  type GoToolBinary,
  type GoToolOptions,
} from '../control-plane/index.ts';

const moduleDir = dirname(fileURLToPath(import.meta.url));
const pkg = 'k8s.io/cloud-provider-aws/cmd/aws-cloud-controller-manager';
const binaryName = 'aws-cloud-controller-manager';

/**
 * The cached binary, built first when `build` is set. Throws AssetsUnavailableError when there is
 * none and none can be built here, with what is missing and the command that builds it.
 */
export async function resolveCloudProviderAws(options: GoToolOptions): Promise<GoToolBinary> {
  const version = await checkedVersion();
  const dir = join(cacheRoot(options.env), 'cloud-provider-aws', `${version}-${await moduleHash()}`);
  return resolveGoTool(
    {
      name: binaryName,
      version,
      dir,
      script: 'cloud-provider-aws:build',
      build: (staging, progress, env) =>
        goBuild({
          dir: moduleDir,
          pkg,
          output: join(staging, binaryName),
          // As upstream's Makefile stamps its release builds.
          ldflags: [`-X k8s.io/component-base/version.gitVersion=${version}`, `-X main.gitVersion=${version}`],
          name: binaryName,
          env,
          progress,
        }),
    },
    options,
  );
}

// cloud-provider-aws v1.X.* is released for Kubernetes v1.X: it must be the control plane's minor.
async function checkedVersion(): Promise<string> {
  const { kubernetes } = await pinnedVersions();
  const goMod = await readFile(join(moduleDir, 'go.mod'), 'utf8');
  const version = /^\s*k8s\.io\/cloud-provider-aws (v\S+)/m.exec(goMod)?.[1];
  const minor = (v: string | undefined): string | undefined => /^v1\.(\d+)\./.exec(v ?? '')?.[1];
  if (version === undefined || minor(version) !== minor(kubernetes)) {
    throw new Error(
      `tools/cloud-provider-aws/go.mod requires k8s.io/cloud-provider-aws ${version ?? '(none)'}, but the control ` +
        `plane is Kubernetes ${kubernetes}: require its latest v1.${minor(kubernetes) ?? '?'}.* there, then run go mod tidy`,
    );
  }
  return version;
}

async function moduleHash(): Promise<string> {
  const hash = createHash('sha256');
  for (const file of ['go.mod', 'go.sum']) hash.update(await readFile(join(moduleDir, file)));
  return hash.digest('hex').slice(0, 12);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const built = await resolveCloudProviderAws({
    build: true,
    progress: (line) => {
      console.error(line);
    },
  });
  console.log(built.binary);
}
