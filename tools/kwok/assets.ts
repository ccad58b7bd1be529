// Finds or builds kwok (Kubernetes WithOut Kubelet, sigs.k8s.io/kwok), which the scale scenario of
// the bench (bench/scenarios/scale.ts) runs against the bench's control plane so that thousands of
// Nodes heartbeat through Leases and report their status as live kubelets would. Nothing here is
// cirrus code, and no binary or upstream source is kept in the repository: `kwokVersion` names the
// release, and the build fetches its Go module through the Go module proxy once per machine, as
// tools/helm/ builds helm (a module of one requirement completed by `go build -mod=mod`; see there).
//
// Run directly (`node tools/kwok/assets.ts`, `npm run kwok:build`) it ensures the binary and prints
// its path.

import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  cacheRoot,
  goBuild,
  resolveGoTool,
  type GoToolBinary,
  type GoToolOptions,
  type ProgressSink,
} from '../control-plane/index.ts';

/**
 * The kwok release the bench runs (the newest the Go module proxy served when it was added). To
 * bump: change it; the next `npm run kwok:build` builds it into a new cache folder.
 */
export const kwokVersion = 'v0.8.0';

const module = 'sigs.k8s.io/kwok';
const binaryName = 'kwok';

/**
 * The cached binary (`<cacheRoot>/kwok/<version>/kwok`), built first when `build` is set. Throws
 * AssetsUnavailableError when there is none and none can be built here, with what is missing and
 * the command that builds it.
 */
export function resolveKwok(options: GoToolOptions): Promise<GoToolBinary> {
  return resolveGoTool(
    {
      name: binaryName,
      version: kwokVersion,
      dir: join(cacheRoot(options.env), 'kwok', kwokVersion),
      script: 'kwok:build',
      build: buildKwok,
    },
    options,
  );
}

async function buildKwok(staging: string, progress: ProgressSink, env: NodeJS.ProcessEnv): Promise<void> {
  const moduleDir = await mkdtemp(join(tmpdir(), 'cirrus-kwok-module-'));
  try {
    await writeFile(
      join(moduleDir, 'go.mod'),
      `module cirrus.local/kwok-build\n\ngo 1.26.0\n\nrequire ${module} ${kwokVersion}\n`,
    );
    await goBuild({
      dir: moduleDir,
      pkg: `${module}/cmd/kwok`,
      output: join(staging, binaryName),
      // As upstream's release script (hack/releases.sh) stamps a release into pkg/consts.
      ldflags: [`-X ${module}/pkg/consts.Version=${kwokVersion}`],
      name: binaryName,
      env: { ...env, GOFLAGS: `${env['GOFLAGS'] ?? ''} -mod=mod`.trim() },
      progress,
    });
  } finally {
    await rm(moduleDir, { recursive: true, force: true });
  }
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const built = await resolveKwok({
    build: true,
    progress: (line) => {
      console.error(line);
    },
  });
  console.log(built.binary);
}
