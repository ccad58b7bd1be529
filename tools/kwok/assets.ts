// Finds or builds kwok (Kubernetes WithOut Kubelet, sigs.k8s.io/kwok), which the scale scenario of
// the bench (bench/scenarios/scale.ts) runs against the bench's control plane so that thousands of
// Nodes heartbeat through Leases and report their status as live kubelets would. Nothing here is
// cirrus code, and no binary or upstream source is kept in the repository: `kwokVersion` names the
// release, and the build fetches its Go module through the Go module proxy once per machine, as
// tools/helm/ builds helm (a module of one requirement completed by `go build -mod=mod`; see there).
//
// kwok itself has no stages built in (kwokctl hands it upstream's): the build writes upstream's two
// default Node stages, kustomize/stage/node/fast/node-initialize.yaml and
// kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml from the module it
// built, into stages.yaml beside the binary, for `kwok --config`.
//
// Run directly (`node tools/kwok/assets.ts`, `npm run kwok:build`) it ensures the binary and prints
// its path.

import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
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

/**
 * The kwok release the bench runs (the newest the Go module proxy served when it was added). To
 * bump: change it; the next `npm run kwok:build` builds it into a new cache folder.
 */
export const kwokVersion = 'v0.8.0';

const module = 'sigs.k8s.io/kwok';
const binaryName = 'kwok';
const stagesName = 'stages.yaml';
// Upstream's default Node stages (as kwokctl's default configuration names them): initialized at
// once, then a Lease heartbeat and a status heartbeat every ~10 minutes.
const defaultNodeStages = [
  'kustomize/stage/node/fast/node-initialize.yaml',
  'kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml',
];

/** The stages file the build writes beside the binary `binary` (a resolveKwok() answer). */
export function kwokStages(binary: string): string {
  return join(dirname(binary), stagesName);
}

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

// Built in a module of one requirement (inRequirementModule); its default Node stages are read from
// the module go downloaded.
async function buildKwok(staging: string, progress: ProgressSink, env: NodeJS.ProcessEnv): Promise<void> {
  await inRequirementModule({ name: binaryName, module, version: kwokVersion }, env, async (dir, goEnv) => {
    await goBuild({
      dir,
      pkg: `${module}/cmd/kwok`,
      output: join(staging, binaryName),
      // As upstream's release script (hack/releases.sh) stamps a release into pkg/consts.
      ldflags: [`-X ${module}/pkg/consts.Version=${kwokVersion}`],
      name: binaryName,
      env: goEnv,
      progress,
    });
    const { stdout } = await promisify(execFile)('go', ['list', '-m', '-f', '{{.Dir}}', module], {
      cwd: dir,
      env: goEnv,
    });
    const sources = await Promise.all(defaultNodeStages.map((file) => readFile(join(stdout.trim(), file), 'utf8')));
    await writeFile(join(staging, stagesName), sources.join('\n---\n'));
  });
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
