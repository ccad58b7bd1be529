// The documentation's links: every relative link in a Markdown file of the repository names a file
// or folder that exists, inside the repository (a reader of the repository cannot open anything
// outside it), and every #anchor names a heading of the page it points at.

import assert from 'node:assert/strict';
import { existsSync, globSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';

const repoRoot = fileURLToPath(new URL('../', import.meta.url));
const pages = globSync('**/*.md', { cwd: repoRoot, exclude: (name) => name === 'node_modules' || name === 'dist' });

// The page's text without fenced code blocks, whose lines are neither links nor headings.
function withoutFences(text: string): string {
  return text.replace(/^(```|~~~)[\s\S]*?^\1/gm, '');
}

// The page's text without code, fenced or inline, where brackets are not links.
function prose(text: string): string {
  return withoutFences(text).replace(/`[^`\n]*`/g, '');
}

// The targets of the page's inline links and images, `[text](target)`, as written.
function linkTargets(text: string): string[] {
  return [...prose(text).matchAll(/\]\(\s*<?([^)\s>]+)>?(?:\s+"[^"]*")?\s*\)/g)].map((m) => m[1] ?? '');
}

// GitHub's anchors for a page's headings: lower case, punctuation dropped, spaces as hyphens, and
// -1, -2, … after a repeated one.
function anchors(text: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const match of withoutFences(text).matchAll(/^#{1,6}\s+(.+?)\s*#*\s*$/gm)) {
    const slug = (match[1] ?? '')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    out.add(count === 0 ? slug : `${slug}-${count}`);
  }
  return out;
}

/** What is wrong with one link of `page` (a repository path), or undefined when it resolves. */
function brokenLink(page: string, target: string, read = readRepoFile): string | undefined {
  if (/^[a-z][a-z0-9+.-]*:/i.test(target)) return undefined; // https:, mailto:: not the repository's
  const [path = '', anchor = ''] = target.split('#', 2);
  const file = path === '' ? page : relative(repoRoot, resolve(repoRoot, dirname(page), decodeURI(path)));
  if (file.startsWith('..')) return `${target}: outside the repository`;
  const text = read(file);
  if (text === undefined) return `${target}: no such file or folder`;
  return missingAnchor(file, text, anchor) ? `${target}: no heading #${anchor} in ${file}` : undefined;
}

// Whether `anchor` names no heading of a Markdown page (other files' anchors are not checked).
function missingAnchor(file: string, text: string, anchor: string): boolean {
  return anchor !== '' && file.endsWith('.md') && !anchors(text).has(anchor);
}

// A file's text, '' for a folder, undefined when nothing is there.
function readRepoFile(file: string): string | undefined {
  const path = join(repoRoot, file);
  if (!existsSync(path)) return undefined;
  return statSync(path).isDirectory() ? '' : readFileSync(path, 'utf8');
}

describe('the documentation', () => {
  it('has Markdown pages to check', () => {
    assert.ok(pages.includes('README.md') && pages.includes('docs/adr/0016-layout.md'), pages.join(', '));
  });

  it('links only to files, folders and headings that exist in the repository', () => {
    const broken = pages.flatMap((page) =>
      linkTargets(readFileSync(join(repoRoot, page), 'utf8'))
        .map((target) => brokenLink(page, target))
        .filter((problem) => problem !== undefined)
        .map((problem) => `${page}: ${problem}`),
    );
    assert.deepEqual(broken, []);
  });

  it('sees a broken link, an anchor without its heading and a link out of the repository', () => {
    const files: Record<string, string> = {
      'docs/a.md': '# Title\n\n## The `cirrus` command: flags\n\n## Notes\n\n## Notes\n',
      docs: '',
    };
    const read = (file: string): string | undefined => files[file];
    assert.equal(brokenLink('README.md', 'docs/a.md', read), undefined);
    assert.equal(brokenLink('README.md', 'docs/', read), undefined);
    assert.equal(brokenLink('README.md', 'docs/a.md#the-cirrus-command-flags', read), undefined);
    assert.equal(brokenLink('README.md', 'docs/a.md#notes-1', read), undefined);
    assert.equal(brokenLink('docs/a.md', '#title', read), undefined);
    assert.equal(brokenLink('README.md', 'https://example.com/x', read), undefined);
    assert.match(brokenLink('README.md', 'docs/b.md', read) ?? '', /no such file/);
    assert.match(brokenLink('README.md', 'docs/a.md#missing', read) ?? '', /no heading #missing/);
    assert.match(brokenLink('docs/a.md', '../../shared/DESIGN.md', read) ?? '', /outside the repository/);
  });

  it('finds the links of a page, but not in code', () => {
    const text = 'See [a](docs/a.md) and ![chart](x.svg "t").\n\n```\n[no](b.md)\n```\n\n`[no](c.md)`\n';
    assert.deepEqual(linkTargets(text), ['docs/a.md', 'x.svg']);
  });
});
