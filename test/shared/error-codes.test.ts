// The error codes are listed in one place (shared/wire/replies.ts errorCodes) and documented in the
// HTTP contract's table of replies (docs/http-contract.md): the two hold the same codes, each with
// the same status.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { describe, it } from 'node:test';
import { errorCodes } from '../../shared/wire/replies.ts';

const contract = readFileSync(new URL('../../docs/http-contract.md', import.meta.url), 'utf8');

// The rows `| <status> | `<code>` | …` of a page's tables, as code → status, in the page's order.
function documentedCodes(page: string): [string, number][] {
  return [...page.matchAll(/^\|\s*(\d{3})\s*\|\s*`([A-Z_]+)`\s*\|/gm)].map((m) => [m[2] ?? '', Number(m[1])]);
}

describe('error codes', () => {
  it('are the HTTP contract’s table of replies, each with its status, and each once', () => {
    const documented = documentedCodes(contract);
    assert.deepEqual(
      documented.map(([code]) => code).filter((code, i, all) => all.indexOf(code) !== i),
      [],
      'a code documented twice',
    );
    assert.deepEqual(Object.fromEntries(documented), errorCodes);
  });

  it('reads a table row’s status and code, and nothing else', () => {
    const page = '| 404 | `CIRRUS_ERR_NOT_FOUND` | no such route |\n| status | code |\nSee `CIRRUS_ERR_CLOSING`.\n';
    assert.deepEqual(documentedCodes(page), [['CIRRUS_ERR_NOT_FOUND', 404]]);
  });
});
