import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { subject } from '../../tools/control-plane/pki.ts';

describe('certificate subjects', () => {
  const cases = [
    { identity: { user: 'alice' }, want: '/CN=alice' },
    { identity: { user: 'cirrus-admin', groups: ['system:masters'] }, want: '/CN=cirrus-admin/O=system:masters' },
    {
      identity: { user: 'system:node:worker-1', groups: ['system:nodes', 'team.a'] },
      want: '/CN=system:node:worker-1/O=system:nodes/O=team.a',
    },
  ];
  for (const { identity, want } of cases) {
    it(want, () => {
      assert.equal(subject(identity), want);
    });
  }

  for (const bad of ['a/b', 'x,y', 'CN=z', 'with space', '']) {
    it(`refuses '${bad}', which the subject syntax would misread`, () => {
      assert.throws(() => subject({ user: 'ok', groups: [bad] }), {
        message: `certificate subject: '${bad}' may only contain letters, digits and ":._@-"`,
      });
    });
  }
});
