// `npm run build`: what cirrus ships, built from the TypeScript that development and the tests run
// directly (ADR 0011). Into dist/:
//
//   lib/, types/        the npm package cirrus-ccm: its modules as JavaScript, dependencies left to
//                       npm (package.json's exports and bin point here), and the .d.ts
//   image/              the container image's cirrus: the whole command line, every dependency
//                       bundled, one lazily loaded chunk per command, function and provider
//   functions/<name>/   one function's artifact: the AWS Lambda handler (lambda.js → `handler`) and
//                       a command line that serves only it; no other function, no relay
//   relay/              a command line that runs only the relay
//
// Every deployment artifact is one folder of ES modules (bundled, tree-shaken, minified by
// esbuild) that needs no node_modules; index.js in it is the library a --provider-module imports
// as 'cirrus-ccm' (app/cli/provider-module.ts). A function or command an artifact leaves out is replaced by
// a module that throws, naming the artifact, if anything ever imports it.
//
//   node scripts/build.ts [lib|image|functions|relay]… [--out-dir dir]   (default: all, into dist/)

import { copyFile, mkdir, readdir, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { gzipSync } from 'node:zlib';
import * as esbuild from 'esbuild';
import { catalogue } from '../functions/catalogue.ts';

const root = fileURLToPath(new URL('../', import.meta.url));
const at = (path: string): string => join(root, path);

/** The targets, in build order. */
export const targets = ['lib', 'image', 'functions', 'relay'] as const;
export type Target = (typeof targets)[number];

/** One folder written by a build: its size, and the files it was built from (relative to the repository). */
export interface Artifact {
  readonly dir: string;
  readonly files: number;
  readonly bytes: number;
  readonly gzipBytes: number;
  readonly inputs: readonly string[];
}

// The modules a narrower artifact leaves out: each function's implementation, the relay, and the
// commands of app/cli/commands.ts (each imported lazily, so leaving one out costs nothing until used).
const implementation = (name: string): string => at(`functions/${name}/index.ts`);
const relayModule = at('relay/index.ts');
const commandModules = ['cluster', 'reconcile', 'relay', 'serve', 'start'].map((c) => at(`app/cli/${c}.ts`));

// CommonJS dependencies bundled into ES modules still call require() for Node's built-ins.
const requireShim =
  "import { createRequire as __cirrusCreateRequire } from 'node:module'; const require = __cirrusCreateRequire(import.meta.url);";

function absentPlugin(artifact: string, absent: ReadonlySet<string>): esbuild.Plugin {
  return {
    name: 'cirrus-absent',
    setup(build) {
      build.onResolve({ filter: /\.ts$/ }, (args) => {
        if (args.kind === 'entry-point') return undefined;
        const path = resolve(args.resolveDir, args.path);
        return absent.has(path) ? { path, namespace: 'cirrus-absent' } : undefined;
      });
      build.onLoad({ filter: /.*/, namespace: 'cirrus-absent' }, (args) => ({
        contents: `throw new Error(${JSON.stringify(`${relative(root, args.path)} is not in this artifact (${artifact}); the image's cirrus has everything`)});`,
        loader: 'js',
      }));
    },
  };
}

// Node's http module as CommonJS, never through the ES module facade. Node builds a built-in's
// facade by reading every export, and node:http's WebSocket, CloseEvent and MessageEvent are lazy
// getters that load Node's own copy of undici to answer: one ES `import … from 'node:http'`
// (client-node's, the host's) costs ~13 MB of resident set and ~50 ms of CPU at start, for classes
// cirrus never uses. Read through require(), the module is the same object and the getters run
// only if something reads them (Node 24.21; lib/http.js, BuiltinModule#syncExports).
function httpAsCommonJsPlugin(): esbuild.Plugin {
  return {
    name: 'cirrus-http-commonjs',
    setup(build) {
      build.onResolve({ filter: /^(node:)?http$/ }, (args) =>
        args.namespace === 'cirrus-http'
          ? { path: 'node:http', external: true }
          : { path: 'http', namespace: 'cirrus-http' },
      );
      build.onLoad({ filter: /.*/, namespace: 'cirrus-http' }, () => ({
        contents: "module.exports = require('node:http');",
        loader: 'js',
      }));
    },
  };
}

// The Lambda entry of one function: its handler, its app built during the sandbox's init phase
// (the top-level await holds the init phase until the app is ready; ADR 0033).
function lambdaEntryPlugin(name: string): esbuild.Plugin {
  return {
    name: 'cirrus-lambda-entry',
    setup(build) {
      build.onResolve({ filter: /^cirrus:lambda$/ }, () => ({ path: 'lambda', namespace: 'cirrus-entry' }));
      build.onLoad({ filter: /.*/, namespace: 'cirrus-entry' }, () => ({
        contents: `import { sandboxHandler } from './app/lambda/index.ts';\nexport const handler = await sandboxHandler(${JSON.stringify(name)});\n`,
        resolveDir: root,
        loader: 'js',
      }));
    },
  };
}

interface Bundle {
  readonly name: string;
  readonly entries: Record<string, string>;
  readonly absent?: ReadonlySet<string>;
  readonly plugins?: esbuild.Plugin[];
}

// A deployment artifact: everything bundled, one folder, ES modules. Resolves with its inputs.
async function bundle(out: string, spec: Bundle, version: string): Promise<string[]> {
  const { metafile } = await esbuild.build({
    absWorkingDir: root,
    metafile: true,
    entryPoints: Object.entries(spec.entries).map(([name, path]) => ({ in: path, out: name })),
    outdir: out,
    bundle: true,
    splitting: true,
    format: 'esm',
    platform: 'node',
    target: 'node24',
    minify: true,
    legalComments: 'eof',
    banner: { js: requireShim },
    // debug (client-node's) tries an optional require('supports-color'); only a devDependency
    // installs it here, and an artifact holds production code only: left to fail, as debug expects.
    external: ['supports-color'],
    plugins: [absentPlugin(spec.name, spec.absent ?? new Set()), ...(spec.plugins ?? [])],
    logLevel: 'warning',
  });
  if (spec.name.startsWith('functions/')) await nameAwsModules(out, metafile, Object.keys(spec.entries));
  const manifest = { name: `cirrus-${spec.name.replaceAll('/', '-')}`, version, private: true, type: 'module' };
  await writeFile(join(out, 'package.json'), `${JSON.stringify(manifest, null, 2)}\n`);
  return filesOf(metafile);
}

// The files a bundle was built from: the metafile's inputs but the plugins' virtual modules, which
// esbuild names `<namespace>:<path>` (cirrus-http:http, cirrus-absent:…, cirrus-entry:lambda).
function filesOf(metafile: esbuild.Metafile): string[] {
  return Object.keys(metafile.inputs).filter((input) => !/^[a-z][a-z-]*:/.test(input));
}

const awsProvider = 'providers/aws/index.ts';

/**
 * Renames the modules of a function's artifact that only the aws provider loads (its own, the AWS
 * SDK's, bowser; providers/index.ts imports it on first use) to `aws-*.js`, and the imports of them,
 * so that serverless.yml can leave them out of a package for another provider (1.5 MB unpacked).
 * Throws if a module named `aws-*.js` is loaded by anything else.
 */
async function nameAwsModules(out: string, metafile: esbuild.Metafile, entries: readonly string[]): Promise<void> {
  const renames = awsOnlyModules(out, metafile, entries);
  for (const [from, to] of renames) await rename(join(out, from), join(out, to));
  for (const file of await readdir(out)) {
    if (!file.endsWith('.js')) continue;
    const text = await readFile(join(out, file), 'utf8');
    let next = text;
    for (const [from, to] of renames) next = next.replaceAll(`"./${from}"`, `"./${to}"`);
    if (next !== text) await writeFile(join(out, file), next);
  }
}

// The modules only the aws provider loads, each with its new name (those already named aws-* aside).
function awsOnlyModules(out: string, metafile: esbuild.Metafile, entries: readonly string[]): Map<string, string> {
  const outputs = Object.keys(metafile.outputs).filter((file) => file.endsWith('.js'));
  const name = (file: string): string => file.slice(file.lastIndexOf('/') + 1);
  const aws = outputs.find((file) => metafile.outputs[file]?.entryPoint === awsProvider);
  if (aws === undefined) throw new Error(`${out}: no module for ${awsProvider}`);
  // What loads without the aws provider: everything reachable from the entries, but through it.
  const without = reachable(
    metafile,
    outputs.filter((file) => entries.some((entry) => name(file) === `${entry}.js`)),
    aws,
  );
  const misnamed = outputs.filter((file) => without.has(file) && name(file).startsWith('aws-'));
  if (misnamed.length > 0)
    throw new Error(`${out}: ${misnamed.map(name).join(', ')} named as the aws provider's, but loaded without it`);
  const only = [...reachable(metafile, [aws])].filter((file) => !without.has(file) && !name(file).startsWith('aws-'));
  return new Map(only.map((file) => [name(file), `aws-${name(file)}`]));
}

// The outputs `from` load, statically or dynamically, themselves included; never past `stop`.
function reachable(metafile: esbuild.Metafile, from: readonly string[], stop?: string): Set<string> {
  const reached = new Set<string>();
  const visit = (file: string): void => {
    if (file === stop || reached.has(file)) return;
    reached.add(file);
    for (const i of metafile.outputs[file]?.imports ?? []) if (!i.external) visit(i.path);
  };
  for (const file of from) visit(file);
  return reached;
}

// The npm package's modules: cirrus's own code bundled per entry (shared chunks, so the registry
// and the error classes exist once), dependencies imported from node_modules.
async function buildLib(out: string): Promise<string[]> {
  const { metafile } = await esbuild.build({
    absWorkingDir: root,
    metafile: true,
    entryPoints: [
      { in: at('app/index.ts'), out: 'index' },
      { in: at('providers/fake/index.ts'), out: 'fake' },
      { in: at('providers/conformance/index.ts'), out: 'conformance' },
      { in: at('bin/cirrus.js'), out: 'cirrus' },
    ],
    outdir: join(out, 'lib'),
    bundle: true,
    splitting: true,
    packages: 'external',
    format: 'esm',
    platform: 'node',
    target: 'node24',
    logLevel: 'warning',
  });
  // `cirrus cluster` and `start` build the control plane from the Go module beside their code.
  for (const file of ['go.mod', 'go.sum']) await copyFile(at(`tools/control-plane/${file}`), join(out, 'lib', file));
  await declarations(join(out, 'types'));
  return filesOf(metafile);
}

// The .d.ts of the package's entries and what they reference, with import paths ending in .js as
// a consumer's TypeScript expects.
async function declarations(out: string): Promise<void> {
  const tsc = at('node_modules/typescript/bin/tsc');
  const child = spawn(process.execPath, [tsc, '-p', at('tsconfig.build.json'), '--outDir', out], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const [code] = (await once(child, 'exit')) as [number | null];
  if (code !== 0) throw new Error(`tsc -p tsconfig.build.json failed (exit ${String(code)})`);
  for (const file of await filesUnder(out)) {
    if (!file.endsWith('.d.ts')) continue;
    const text = await readFile(file, 'utf8');
    await writeFile(file, text.replace(/((?:from|import)\s*\(?\s*['"]\.{1,2}\/[^'"]*)\.ts(['"])/g, '$1.js$2'));
  }
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { withFileTypes: true, recursive: true });
  return entries.filter((e) => e.isFile()).map((e) => join(e.parentPath, e.name));
}

const functionNames = catalogue.map((entry) => entry.name);

// The artifacts of one target, as bundles (lib is built apart).
function bundles(target: Exclude<Target, 'lib'>): Bundle[] {
  const library = at('app/index.ts');
  const cli = at('bin/cirrus.js');
  // The image reads node:http through require() (a cold start's memory: bench/scenarios/coldstart.ts);
  // the functions' artifacts, whose Lambda packaging is sized apart, are left as they are.
  if (target === 'image') {
    const plugins = [httpAsCommonJsPlugin()];
    return [{ name: 'image', entries: { cirrus: cli, index: library }, plugins }];
  }
  const exceptServe = commandModules.filter((m) => !m.endsWith('/serve.ts'));
  if (target === 'relay') {
    const absent = new Set([
      ...functionNames.map(implementation),
      ...commandModules.filter((m) => !m.endsWith('/relay.ts')),
    ]);
    return [{ name: 'relay', entries: { cirrus: cli, index: library }, absent }];
  }
  return functionNames.map((name) => ({
    name: `functions/${name}`,
    entries: { cirrus: cli, lambda: 'cirrus:lambda', index: library },
    absent: new Set([...functionNames.filter((n) => n !== name).map(implementation), relayModule, ...exceptServe]),
    plugins: [lambdaEntryPlugin(name)],
  }));
}

/**
 * Builds `which` targets into `outDir` (default dist/). Each artifact is written into a staging
 * folder inside `outDir` and moved in when complete, so a reader never sees half of one.
 */
export async function build(which: readonly Target[] = targets, outDir = at('dist')): Promise<Artifact[]> {
  const { version } = JSON.parse(await readFile(at('package.json'), 'utf8')) as { version: string };
  const staging = join(outDir, `.staging-${String(process.pid)}`);
  const done = new Map<string, string[]>();
  try {
    for (const target of which) {
      if (target === 'lib') {
        const inputs = await buildLib(staging);
        done.set('lib', inputs).set('types', []);
        continue;
      }
      for (const spec of bundles(target)) {
        done.set(spec.name, await bundle(join(staging, spec.name), spec, version));
        if (target === 'image')
          for (const file of ['go.mod', 'go.sum'])
            await copyFile(at(`tools/control-plane/${file}`), join(staging, spec.name, file));
      }
    }
    for (const dir of done.keys()) await moveIn(join(staging, dir), join(outDir, dir));
  } finally {
    await rm(staging, { recursive: true, force: true });
  }
  return Promise.all([...done].map(async ([dir, inputs]) => measure(join(outDir, dir), inputs)));
}

// Replaces `target` by `source`; another build may have put a `target` back in between, once.
async function moveIn(source: string, target: string): Promise<void> {
  await mkdir(dirname(target), { recursive: true });
  for (let attempt = 1; ; attempt += 1) {
    await rm(target, { recursive: true, force: true });
    try {
      await rename(source, target);
      return;
    } catch (error) {
      const code = (error as { code?: string }).code;
      if (attempt === 3 || (code !== 'ENOTEMPTY' && code !== 'EEXIST')) throw error;
    }
  }
}

async function measure(dir: string, inputs: readonly string[]): Promise<Artifact> {
  const files = await filesUnder(dir);
  let bytes = 0;
  let gzipBytes = 0;
  for (const file of files) {
    bytes += (await stat(file)).size;
    gzipBytes += gzipSync(await readFile(file)).length;
  }
  return { dir, files: files.length, bytes, gzipBytes, inputs };
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const { values, positionals } = parseArgs({ options: { 'out-dir': { type: 'string' } }, allowPositionals: true });
  const unknown = positionals.filter((p) => !(targets as readonly string[]).includes(p));
  if (unknown.length > 0) {
    process.stderr.write(`build: unknown target ${unknown.join(', ')} (targets: ${targets.join(', ')})\n`);
    process.exit(2);
  }
  const started = performance.now();
  const which = positionals.length === 0 ? targets : (positionals as Target[]);
  const artifacts = await build(which, values['out-dir'] === undefined ? undefined : resolve(values['out-dir']));
  const mb = (n: number): string => `${(n / 1048576).toFixed(2)} MB`;
  // On stderr: npm runs this as prepack, and `npm pack --json` owns stdout.
  for (const a of artifacts)
    process.stderr.write(
      `${relative(process.cwd(), a.dir).padEnd(28)} ${String(a.files).padStart(4)} files  ${mb(a.bytes).padStart(9)}  gzip ${mb(a.gzipBytes)}\n`,
    );
  process.stderr.write(`built in ${((performance.now() - started) / 1000).toFixed(1)} s\n`);
}
