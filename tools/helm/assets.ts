// Finds or builds helm, the Helm 3 client, that the chart test (test/deploy/helm.test.ts) runs to
// lint and render deploy/helm/cirrus/. Nothing here is cirrus code, and no binary or upstream source
// is kept in the repository: `version` below names the release, and the build fetches its Go module
// (helm.sh/helm/v3) through the Go module proxy once per machine, as tools/cloud-provider-aws/ builds
// the incumbent CCM.
//
// Unlike tools/cloud-provider-aws/, no go.mod is kept here: the build writes a module of one
// requirement into a temporary folder and lets `go build -mod=mod` complete it. With helm as the only
// requirement, minimal version selection picks exactly the versions helm's own go.mod names, and the
// checksum database verifies every module it downloads, so nothing is lost by not pinning go.sum.
//
// Run directly (`node tools/helm/assets.ts`) it ensures the binary and prints its path.

import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  cacheRoot,
  goBuild,
  inRequirementModule,
  resolveGoTool,
  type GoToolBinary,
  type GoToolOptions,
  type ProgressSink,
} from '../control-plane/index.ts';

/** The Helm release the tests run. To bump: change it; the next run builds it into a new cache folder. */
export const helmVersion = 'v3.22.0';

const module = 'helm.sh/helm/v3';
const binaryName = 'helm';

/**
 * The cached binary (`<cacheRoot>/helm/<version>/helm`), built first when `build` is set. Throws
 * AssetsUnavailableError when there is none and none can be built here, with what is missing and
 * the command that builds it.
 */
export function resolveHelm(options: GoToolOptions): Promise<GoToolBinary> {
  return resolveGoTool(
    {
      name: binaryName,
      version: helmVersion,
      dir: join(cacheRoot(options.env), 'helm', helmVersion),
      script: 'helm:build',
      build: buildHelm,
    },
    options,
  );
}

// Built in a module of one requirement (inRequirementModule).
async function buildHelm(staging: string, progress: ProgressSink, env: NodeJS.ProcessEnv): Promise<void> {
  await inRequirementModule({ name: binaryName, module, version: helmVersion }, env, (dir, goEnv) =>
    goBuild({
      dir,
      pkg: `${module}/cmd/helm`,
      output: join(staging, binaryName),
      // As upstream's Makefile stamps a release (internal/version): the version, and no "unreleased".
      ldflags: [`-X ${module}/internal/version.version=${helmVersion}`, `-X ${module}/internal/version.metadata=`],
      name: binaryName,
      env: goEnv,
      progress,
    }),
  );
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const built = await resolveHelm({
    build: true,
    progress: (line) => {
      console.error(line);
    },
  });
  console.log(built.binary);
}
