// The fault suite's reading of its cloud file: which mutations changed nothing.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { replay, type LbRecord } from './records.ts';

const at = 0;
const pid = 1;
const lb = (kind: LbRecord['kind'], extra: Partial<LbRecord> = {}): LbRecord => ({
  kind,
  key: 'default/web',
  uid: 'u1',
  ports: ['TCP/80'],
  at,
  pid,
  ...extra,
});

describe('chaos cloud records', () => {
  it('counts an update to the same targets, an ensure of the same load balancer and a delete of nothing as redundant', () => {
    const { redundantByKind, mutations, lbs } = replay([
      lb('ensure', { nodes: ['a'], targets: ['a=p://a'] }),
      lb('ensure', { nodes: ['a'], targets: ['a=p://a'] }),
      lb('update', { nodes: ['a'], targets: ['a=p://a'] }),
      lb('delete'),
      lb('delete'),
    ]);
    assert.equal(mutations, 5);
    assert.deepEqual(redundantByKind, { ensure: 1, update: 1, delete: 1 });
    assert.equal(lbs.size, 0);
  });

  it('does not count an update that gives a node its provider ID, nor one that changes the nodes', () => {
    const { redundant, lbs } = replay([
      lb('ensure', { nodes: ['a'], targets: ['a='] }),
      lb('update', { nodes: ['a'], targets: ['a=p://a'] }),
      lb('update', { nodes: ['a', 'b'], targets: ['a=p://a', 'b=p://b'] }),
      lb('ensure', { ports: ['TCP/81'], nodes: ['a', 'b'], targets: ['a=p://a', 'b=p://b'] }),
    ]);
    assert.equal(redundant, 0);
    assert.deepEqual(lbs.get('default/web')?.nodes, ['a', 'b']);
    assert.deepEqual(lbs.get('default/web')?.ports, ['TCP/81']);
  });

  it('compares node names when a record has no targets', () => {
    const { redundant } = replay([lb('ensure', { nodes: ['a'] }), lb('update', { nodes: ['a'] })]);
    assert.equal(redundant, 1);
  });
});
