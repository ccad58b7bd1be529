// Finds or builds aws-lambda-rie, AWS's Lambda Runtime Interface Emulator
// (github.com/aws/aws-lambda-runtime-interface-emulator, cmd/aws-lambda-rie), that the Lambda tests
// (test/lambda/) and the bench's rie scenario run the packaged functions under. Nothing here is
// cirrus code, and no binary or upstream source is kept in the repository: the Go module beside this
// file names the commit (its tool directive), and the build fetches it through the Go module proxy
// once per machine, as tools/cloud-provider-aws/assets.ts builds the incumbent CCM.
//
// Run directly (`node tools/rie/assets.ts`, `npm run rie:build`) it ensures the binary and prints its path.

import { createHash } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { cacheRoot, goBuild, resolveGoTool, type GoToolBinary, type GoToolOptions } from '../control-plane/index.ts';

const moduleDir = dirname(fileURLToPath(import.meta.url));
const module = 'github.com/aws/aws-lambda-runtime-interface-emulator';
const binaryName = 'aws-lambda-rie';

/**
 * The cached binary (`<cacheRoot>/rie/<version>-<module hash>/aws-lambda-rie`), built first when
 * `build` is set. Throws AssetsUnavailableError when there is none and none can be built here, with
 * what is missing and the command that builds it.
 */
export async function resolveRie(options: GoToolOptions): Promise<GoToolBinary> {
  const version = await pinnedVersion();
  const dir = join(cacheRoot(options.env), 'rie', `${version}-${await moduleHash()}`);
  return resolveGoTool(
    {
      name: binaryName,
      version,
      dir,
      script: 'rie:build',
      build: (staging, progress, env) =>
        goBuild({
          dir: moduleDir,
          pkg: `${module}/cmd/${binaryName}`,
          output: join(staging, binaryName),
          ldflags: [],
          name: binaryName,
          env,
          progress,
        }),
    },
    options,
  );
}

async function pinnedVersion(): Promise<string> {
  const goMod = await readFile(join(moduleDir, 'go.mod'), 'utf8');
  const version = new RegExp(`^\\s*${module.replaceAll('.', '\\.')} (v\\S+)`, 'm').exec(goMod)?.[1];
  if (version === undefined) throw new Error(`tools/rie/go.mod requires no ${module}`);
  return version;
}

async function moduleHash(): Promise<string> {
  const hash = createHash('sha256');
  for (const file of ['go.mod', 'go.sum']) hash.update(await readFile(join(moduleDir, file)));
  return hash.digest('hex').slice(0, 12);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const built = await resolveRie({
    build: true,
    progress: (line) => {
      console.error(line);
    },
  });
  console.log(built.binary);
}
