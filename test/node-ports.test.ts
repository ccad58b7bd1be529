// The tests share one API server (test/global-setup.ts starts it), whose node ports are one pool: a
// Service that asks for a fixed nodePort fails with `422 … provided port is already allocated` when
// another test's Service holds it (issue 43: test/providers/aws-security-groups.test.ts asked for
// 30103). So no test sends the API server a Service with a nodePort written as a number: leave it
// out and let the API server allocate one, or, where a test needs to give one
// (allocateLoadBalancerNodePorts: false), pick it at run time and retry on a collision
// (aws-annotations.test.ts's withFreeNodePort).
//
// What this sees: a `nodePort: <expression with a number in it>` inside the arguments of a call
// that creates, replaces or patches a Service (createNamespacedService, replaceNamespacedService,
// patchNamespacedService, …). A Service built apart and handed to the provider alone (never to
// the API server) may have any nodePort; one built apart and then sent is not seen.

import assert from 'node:assert/strict';
import { globSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import ts from 'typescript';

const repoRoot = fileURLToPath(new URL('../', import.meta.url));
const writesService = /^(create|replace|patch)(Namespaced)?Service$/;

function containsNumber(node: ts.Node): boolean {
  return ts.isNumericLiteral(node) || (ts.forEachChild(node, (child) => containsNumber(child) || undefined) ?? false);
}

function calledName(call: ts.CallExpression): string | undefined {
  const callee = call.expression;
  if (ts.isPropertyAccessExpression(callee)) return callee.name.text;
  return ts.isIdentifier(callee) ? callee.text : undefined;
}

/** Each fixed nodePort `text` sends the API server, as `file:line` (`file` as given). */
export function fixedNodePorts(file: string, text: string): string[] {
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node, sent: boolean): void => {
    const inCall = sent || (ts.isCallExpression(node) && writesService.test(calledName(node) ?? ''));
    if (
      inCall &&
      ts.isPropertyAssignment(node) &&
      node.name.getText(source) === 'nodePort' &&
      containsNumber(node.initializer)
    ) {
      const { line } = source.getLineAndCharacterOfPosition(node.getStart(source));
      found.push(`${file}:${line + 1}: nodePort: ${node.initializer.getText(source)}`);
    }
    ts.forEachChild(node, (child) => {
      visit(child, inCall);
    });
  };
  visit(source, false);
  return found;
}

describe('node ports in tests', () => {
  it('no test sends the shared API server a Service with a fixed nodePort', () => {
    const files = globSync('{test,bench}/**/*.ts', { cwd: repoRoot });
    assert.ok(files.length > 100, `${files.length} files`);
    const found = files.flatMap((file) => {
      const text = readFileSync(join(repoRoot, file), 'utf8');
      return text.includes('nodePort') ? fixedNodePorts(file, text) : [];
    });
    assert.deepEqual(found, []);
  });

  it('finds one, naming file and line, and leaves alone an allocated one and one never sent', () => {
    const text = [
      'await core.createNamespacedService({',
      "  namespace: 'default',",
      "  body: { spec: { type: 'LoadBalancer', ports: [{ port: 80, nodePort: 30103 }] } },",
      '});',
      'await core.patchNamespacedService({ name, namespace, body: { spec: { ports: [{ port: 80, nodePort: base + 80 }] } } });',
      'await core.createNamespacedService({ namespace, body: { spec: { ports: [{ port: 80, nodePort }] } } });',
      'await core.createNamespacedService({ namespace, body: { spec: { ports: [{ port: 80 }] } } });',
      'const inMemory = { spec: { ports: [{ port: 80, nodePort: 30080 }] } };',
    ].join('\n');
    assert.deepEqual(fixedNodePorts('x.test.ts', text), [
      'x.test.ts:3: nodePort: 30103',
      'x.test.ts:5: nodePort: base + 80',
    ]);
  });
});
