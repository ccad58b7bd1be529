// A node's IPs (shared/net/ip.ts): their canonical text, and the provided-node-ip annotation.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { canonicalNodeIp, parseNodeIpAnnotation } from '../../shared/net/ip.ts';

describe('canonicalNodeIp', () => {
  const cases: [string, string | undefined][] = [
    ['10.0.0.1', '10.0.0.1'],
    ['2001:DB8:0:0:0:0:0:1', '2001:db8::1'],
    ['::ffff:10.0.0.1', '10.0.0.1'],
    ['10.0.0', undefined],
    ['worker-1', undefined],
  ];
  for (const [input, want] of cases) {
    it(`${input} → ${String(want)}`, () => {
      assert.equal(canonicalNodeIp(input), want);
    });
  }
});

describe('parseNodeIpAnnotation', () => {
  const valid: [string, string[]][] = [
    ['10.0.0.1', ['10.0.0.1']],
    ['10.0.0.1,2001:db8::1', ['10.0.0.1', '2001:db8::1']],
    [' 2001:db8::1 , 10.0.0.1', ['2001:db8::1', '10.0.0.1']],
    ['0.0.0.0', ['0.0.0.0']],
  ];
  for (const [input, want] of valid) {
    it(`accepts "${input}"`, () => {
      assert.deepEqual(parseNodeIpAnnotation(input), want);
    });
  }
  const invalid: [string, RegExp][] = [
    ['', /empty/],
    ['10.0.0.1,10.0.0.2', /one IPv4 and one IPv6/],
    ['10.0.0.1,2001:db8::1,10.0.0.3', /more than two/],
    ['not-an-ip', /is not an IP address/],
    ['0.0.0.0,2001:db8::1', /unspecified address/],
  ];
  for (const [input, message] of invalid) {
    it(`refuses "${input}"`, () => {
      assert.throws(() => parseNodeIpAnnotation(input), message);
    });
  }
});
