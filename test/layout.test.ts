// The layout's rules that lint cannot see: no import circle between files (type-only and dynamic
// imports included, which import-x's no-cycle skips), and no file outside the places that may
// (the catalogue, the functions' folders, deploy/, serverless.yml and the Lambda entry, docs,
// tests) names a function, and no file of app/ is 400 lines or more (ADR 0016). The layer rule
// itself is in eslint.config.js.

import assert from 'node:assert/strict';
import { globSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import ts from 'typescript';
import { catalogue } from '../functions/catalogue.ts';

const repoRoot = fileURLToPath(new URL('../', import.meta.url));
const sources = globSync('{app,bin,relay,shared,functions,providers,tools,examples,bench,scripts,test}/**/*.{ts,js}', {
  cwd: repoRoot,
});

// Every relative import of `file` (static, dynamic, type-only, re-exports), as repository paths.
function localImports(file: string): string[] {
  const info = ts.preProcessFile(readFileSync(join(repoRoot, file), 'utf8'), true, true);
  return info.importedFiles
    .map((f) => f.fileName)
    .filter((name) => name.startsWith('.'))
    .map((name) => relative(repoRoot, join(repoRoot, dirname(file), name)));
}

// The first import circle found, as the files around it; undefined when there is none.
function findCircle(graph: ReadonlyMap<string, readonly string[]>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (file: string): string[] | undefined => {
    if (state.get(file) === 'done') return undefined;
    if (state.get(file) === 'open') return [...path.slice(path.indexOf(file)), file];
    state.set(file, 'open');
    path.push(file);
    for (const next of graph.get(file) ?? []) {
      const circle = visit(next);
      if (circle) return circle;
    }
    path.pop();
    state.set(file, 'done');
    return undefined;
  };
  for (const file of graph.keys()) {
    const circle = visit(file);
    if (circle) return circle;
  }
  return undefined;
}

// A file of app/ has fewer lines than this (ADR 0016).
const maxAppLines = 400;

const names = catalogue.map((entry) => entry.name);
const spelled = new RegExp(`['"\`/](${names.join('|')})['"\`/]`, 'g');

// Whether the code of `file` (comments aside) spells a function's name as a string or a path
// segment. In providers/, `'routes'` is the contract's capability (CloudProvider.routes()).
function namesAFunction(file: string, text = readFileSync(join(repoRoot, file), 'utf8')): boolean {
  const code = text.replace(/\/\*[\s\S]*?\*\//g, '').replace(/(^|[^:])\/\/.*$/gm, '$1');
  const found = [...code.matchAll(spelled)].map((match) => match[1]);
  return found.some((name) => !(file.startsWith('providers/') && name === 'routes'));
}

describe('layout', () => {
  it('has no import circle between files', () => {
    const graph = new Map(sources.map((file) => [file, localImports(file)]));
    assert.equal(findCircle(graph)?.join(' → '), undefined);
  });

  it('finds a circle when there is one (the check can fail)', () => {
    assert.deepEqual(
      findCircle(
        new Map([
          ['a.ts', ['b.ts']],
          ['b.ts', ['c.ts']],
          ['c.ts', ['b.ts']],
        ]),
      ),
      ['b.ts', 'c.ts', 'b.ts'],
    );
  });

  it('keeps each file of app/ under 400 lines (ADR 0016)', () => {
    const long = sources
      .filter((file) => file.startsWith('app/'))
      .map((file) => ({ file, lines: readFileSync(join(repoRoot, file), 'utf8').split('\n').length - 1 }))
      .filter(({ lines }) => lines >= maxAppLines)
      .map(({ file, lines }) => `${file}: ${lines} lines`);
    assert.deepEqual(long, []);
  });

  it('names the functions only in the catalogue, their folders, the manifests, docs and tests', () => {
    // bin/lambda.js is the Lambda entry of development and tests: one export per function (what
    // serverless.yml deploys is each function's built `dist/functions/<name>/lambda.handler`), so the names are written there, and
    // test/deploy/serverless.test.ts checks them against serverless.yml and the catalogue.
    // Tests name functions to test them; what tests and benchmarks share (test/harness/, test/faults/)
    // is held to the rule as the product is.
    const isTest = (file: string): boolean =>
      file.startsWith('test/') && !file.startsWith('test/harness/') && !file.startsWith('test/faults/');
    const allowed = (file: string): boolean =>
      file.startsWith('functions/') || file === 'bin/lambda.js' || isTest(file);
    const offenders = sources.filter((file) => !allowed(file) && namesAFunction(file));
    assert.deepEqual(offenders, []);
  });

  it('sees a function named in code, and not in a comment or as the provider capability routes()', () => {
    assert.equal(namesAFunction('x.ts', "const target = 'node-init';"), true);
    assert.equal(namesAFunction('x.ts', 'await import(`../functions/service-lb/index.ts`);'), true);
    assert.equal(namesAFunction('x.ts', '// e.g. node-init\n/* POST /routes */ const a = 1;'), false);
    assert.equal(namesAFunction('providers/x/index.ts', "type Capability = 'loadBalancer' | 'routes';"), false);
  });
});
