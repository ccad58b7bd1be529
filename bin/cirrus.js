#!/usr/bin/env node
// The `cirrus` executable. Plain JavaScript so that an older Node.js gets a clear message instead
// of a syntax error; the CLI itself is TypeScript, run through Node's type stripping (Node >= 24).
const major = Number(process.versions.node.split('.')[0]);
if (major < 24) {
  process.stderr.write(
    `cirrus needs Node.js 24 or newer; this is ${process.version}.\n` +
      "Inside the repository, 'npm run cirrus -- <command>' uses the Node.js 24 that npm ci installed.\n",
  );
  process.exit(1);
}
const { runFromProcess } = await import('../app/cli/process.ts');
await runFromProcess();
