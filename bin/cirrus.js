#!/usr/bin/env node
// The `cirrus` executable. Plain JavaScript so that an older Node.js gets a clear message instead
// of a syntax error; the CLI itself is TypeScript, run through Node's type stripping (Node >= 24).
// The package's `cirrus` (dist/lib/cirrus.js, built from this file) runs outside the repository,
// where no npm script brings Node.js 24: the advice depends on which one runs.
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  const inRepository = import.meta.url.endsWith('/bin/cirrus.js');
  process.stderr.write(
    `cirrus needs Node.js 24 or newer; this is ${process.version}.\n` +
      (inRepository
        ? "In the repository, 'npm run cirrus -- <command>' runs it with the Node.js 24 that npm ci installed.\n"
        : 'Install Node.js 24 or newer (https://nodejs.org, or a version manager: nvm install 24) and run cirrus ' +
          'with it first on the PATH.\n'),
  );
  process.exit(1);
}
const { runFromProcess } = await import('../app/cli/process.ts');
await runFromProcess();
