// The static provider's address management, pure parts: address arithmetic, the loadBalancers
// section of the cloud-config, and the allocation decisions. The API side is in
// static-load-balancer.test.ts.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Service } from '@kubernetes/client-node';
import { CloudConfigError, findCause } from '../../shared/cloud/errors.ts';
import { parseInventory } from '../../providers/static/index.ts';
import { formatIp } from '../../shared/net/ip.ts';
import { blockContains, blockSize, firstCommon, lowestFree, type AddressBlock } from '../../providers/static/ip.ts';
import {
  ADDRESSES_ANNOTATION,
  allocate,
  AllocationError,
  heldBy,
  POOL_ANNOTATION,
  readRequest,
  type Allocation,
} from '../../providers/static/ipam.ts';
import {
  canonicalLoadBalancerIp as canonicalIp,
  parseBlock,
  parseLoadBalancerIp as parseIp,
  reloadProblem,
  type LoadBalancerConfig,
} from '../../providers/static/pools.ts';

function block(text: string): AddressBlock {
  const parsed = parseBlock(text);
  if (typeof parsed === 'string') assert.fail(`${text} does not parse: ${parsed}`);
  return parsed;
}

function ip(text: string) {
  const parsed = parseIp(text);
  assert.ok(parsed, `${text} is an address`);
  return parsed;
}

describe('parseIp and formatIp', () => {
  const canonical: [string, string][] = [
    ['192.0.2.1', '192.0.2.1'],
    ['0.0.0.0', '0.0.0.0'],
    ['255.255.255.255', '255.255.255.255'],
    ['2001:DB8::1', '2001:db8::1'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    ['2001:db8:0:0:1:0:0:1', '2001:db8::1:0:0:1'], // equal runs: the first one is compressed
    ['2001:db8:0:0:1:0:0:0', '2001:db8:0:0:1::'], // the longest run wins
    ['2001:db8:0:1:1:1:1:1', '2001:db8:0:1:1:1:1:1'], // a single zero group is never "::"
    ['::', '::'],
    ['::1', '::1'],
    ['1::', '1::'],
    ['fe80::', 'fe80::'],
    ['ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff'],
  ];
  for (const [text, expected] of canonical) {
    it(`writes ${text} as ${expected}`, () => {
      assert.equal(canonicalIp(text), expected);
    });
  }

  it('computes values as bigints', () => {
    assert.deepEqual(parseIp('192.0.2.1'), { family: 'IPv4', value: 0xc0000201n });
    assert.deepEqual(parseIp('2001:db8::1'), { family: 'IPv6', value: 0x20010db8000000000000000000000001n });
    assert.equal(formatIp({ family: 'IPv6', value: (1n << 128n) - 1n }), 'ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff');
  });

  const invalid = [
    '',
    '192.0.2',
    '192.0.2.256',
    '01.2.3.4',
    '1.2.3.4.5',
    ' 1.2.3.4',
    '1.2.3.-1',
    'fe80::1%eth0',
    '::ffff:192.0.2.1',
    '1::2::3',
    'g::1',
    '1:2:3:4:5:6:7:8:9',
    'example.com',
  ];
  for (const text of invalid) {
    it(`rejects ${JSON.stringify(text)}`, () => {
      assert.equal(parseIp(text), undefined);
    });
  }
});

describe('parseBlock', () => {
  const valid: { text: string; family: string; first: string; last: string; size: bigint }[] = [
    { text: '192.0.2.0/24', family: 'IPv4', first: '192.0.2.1', last: '192.0.2.254', size: 254n },
    { text: '192.0.2.16/28', family: 'IPv4', first: '192.0.2.17', last: '192.0.2.30', size: 14n },
    { text: '192.0.2.0/30', family: 'IPv4', first: '192.0.2.1', last: '192.0.2.2', size: 2n },
    { text: '192.0.2.0/31', family: 'IPv4', first: '192.0.2.0', last: '192.0.2.1', size: 2n },
    { text: '192.0.2.7/32', family: 'IPv4', first: '192.0.2.7', last: '192.0.2.7', size: 1n },
    { text: '192.0.2.7', family: 'IPv4', first: '192.0.2.7', last: '192.0.2.7', size: 1n },
    { text: '192.0.2.0-192.0.2.255', family: 'IPv4', first: '192.0.2.0', last: '192.0.2.255', size: 256n },
    { text: '192.0.2.10 - 192.0.2.20', family: 'IPv4', first: '192.0.2.10', last: '192.0.2.20', size: 11n },
    { text: '192.0.2.255-192.0.3.0', family: 'IPv4', first: '192.0.2.255', last: '192.0.3.0', size: 2n },
    { text: '10.0.0.0/8', family: 'IPv4', first: '10.0.0.1', last: '10.255.255.254', size: 16_777_214n },
    { text: '2001:db8::/120', family: 'IPv6', first: '2001:db8::1', last: '2001:db8::ff', size: 255n },
    { text: '2001:db8::/126', family: 'IPv6', first: '2001:db8::1', last: '2001:db8::3', size: 3n },
    { text: '2001:db8::/127', family: 'IPv6', first: '2001:db8::', last: '2001:db8::1', size: 2n },
    { text: '2001:db8::5/128', family: 'IPv6', first: '2001:db8::5', last: '2001:db8::5', size: 1n },
    {
      text: '2001:db8::/64',
      family: 'IPv6',
      first: '2001:db8::1',
      last: '2001:db8::ffff:ffff:ffff:ffff',
      size: (1n << 64n) - 1n,
    },
    { text: '2001:db8::10-2001:db8::1f', family: 'IPv6', first: '2001:db8::10', last: '2001:db8::1f', size: 16n },
    { text: '2001:db8::ffff-2001:db8::1:0', family: 'IPv6', first: '2001:db8::ffff', last: '2001:db8::1:0', size: 2n },
  ];
  for (const { text, family, first, last, size } of valid) {
    it(`reads ${text}: ${first} to ${last}`, () => {
      const parsed = block(text);
      assert.equal(parsed.family, family);
      assert.equal(formatIp({ family: parsed.family, value: parsed.usableFirst }), first);
      assert.equal(formatIp({ family: parsed.family, value: parsed.usableLast }), last);
      assert.equal(blockSize(parsed), size);
    });
  }

  it('keeps the whole written extent for overlap checks (network and broadcast included)', () => {
    const parsed = block('192.0.2.0/24');
    assert.equal(formatIp({ family: 'IPv4', value: parsed.first }), '192.0.2.0');
    assert.equal(formatIp({ family: 'IPv4', value: parsed.last }), '192.0.2.255');
    assert.equal(blockContains(parsed, ip('192.0.2.0')), false);
    assert.equal(blockContains(parsed, ip('192.0.2.255')), false);
    assert.equal(blockContains(parsed, ip('192.0.2.1')), true);
    assert.equal(blockContains(parsed, ip('2001:db8::1')), false);
  });

  const invalid: [string, RegExp][] = [
    ['192.0.2.5/28', /^has bits set after its \/28 prefix; the network is 192\.0\.2\.0\/28$/],
    ['2001:db8::1/120', /^has bits set after its \/120 prefix; the network is 2001:db8::\/120$/],
    ['192.0.2.0/33', /^has the prefix length \/33; an IPv4 prefix length is 0 to 32$/],
    ['2001:db8::/129', /^has the prefix length \/129; an IPv6 prefix length is 0 to 128$/],
    ['192.0.2.0/', /^has the prefix length \/; an IPv4 prefix length is 0 to 32$/],
    ['192.0.2.0/024', /prefix length \/024/],
    [
      '192.0.2.0/28/2',
      /^is not a CIDR \(like 192\.0\.2\.0\/28\), a range \(like 192\.0\.2\.10-192\.0\.2\.20\) or a single address$/,
    ],
    ['1-2-3', /^is not a CIDR/],
    ['192.0.2.300/24', /^holds "192\.0\.2\.300", which is not an IPv4 or IPv6 address; write a CIDR/],
    ['192.0.2.1-192.0.2.300', /^holds "192\.0\.2\.300", which is not/],
    ['192.0.2.1-', /^holds "", which is not/],
    ['', /^holds "", which is not/],
    ['example.com', /^holds "example\.com", which is not/],
    ['192.0.2.20-192.0.2.10', /^ends \(192\.0\.2\.10\) before it starts \(192\.0\.2\.20\)$/],
    ['192.0.2.1-2001:db8::1', /^starts with an IPv4 address and ends with an IPv6 address$/],
    ['fe80::1%eth0', /an address with a zone/],
    ['::ffff:192.0.2.1', /an IPv6 address with an embedded IPv4 part; write IPv4 addresses as such$/],
    [
      '127.0.0.1',
      /^holds 127\.0\.0\.1, which is in 127\.0\.0\.0\/8 \(loopback addresses\): no load balancer can have such an address$/,
    ],
    ['126.255.255.250-127.0.0.5', /^holds 127\.0\.0\.0, which is in 127\.0\.0\.0\/8/],
    ['0.0.0.0/0', /^holds 0\.0\.0\.0, which is in 0\.0\.0\.0\/8/],
    ['224.0.0.0/24', /multicast addresses/],
    ['255.255.255.255', /the limited broadcast address/],
    ['::', /the unspecified address/],
    ['::1', /the loopback address/],
    ['::ffff:0:0/96', /IPv4-mapped addresses/],
    ['ff02::1', /multicast addresses/],
  ];
  for (const [text, problem] of invalid) {
    it(`rejects ${JSON.stringify(text)}`, () => {
      const parsed = parseBlock(text);
      if (typeof parsed !== 'string') assert.fail(`${text} parses`);
      assert.match(parsed, problem);
    });
  }
});

describe('firstCommon (overlap)', () => {
  const cases: [string, string, string | undefined][] = [
    ['192.0.2.0/28', '192.0.2.16/28', undefined],
    ['192.0.2.0/28', '192.0.2.8/29', '192.0.2.8'],
    ['192.0.2.8/29', '192.0.2.0/28', '192.0.2.8'],
    ['192.0.2.0/24', '192.0.2.0', '192.0.2.0'], // the written extent counts, network address included
    ['192.0.2.10-192.0.2.20', '192.0.2.20-192.0.2.30', '192.0.2.20'],
    ['192.0.2.10-192.0.2.19', '192.0.2.20-192.0.2.30', undefined],
    ['192.0.2.0/24', '2001:db8::/120', undefined],
    ['2001:db8::/64', '2001:db8::ff00-2001:db8:1::1', '2001:db8::ff00'],
    ['2001:db8::/120', '2001:db8::100/120', undefined],
  ];
  for (const [a, b, expected] of cases) {
    it(`${a} and ${b}: ${expected ?? 'no overlap'}`, () => {
      const shared = firstCommon(block(a), block(b));
      assert.equal(shared === undefined ? undefined : formatIp({ family: block(a).family, value: shared }), expected);
    });
  }
});

describe('lowestFree', () => {
  const values = (...texts: string[]) => texts.map((text) => ip(text).value).sort((x, y) => (x < y ? -1 : 1));
  const cases: { name: string; block: string; taken: bigint[]; expected: string | undefined }[] = [
    { name: 'an empty block', block: '192.0.2.0/29', taken: [], expected: '192.0.2.1' },
    {
      name: 'after the taken ones',
      block: '192.0.2.0/29',
      taken: values('192.0.2.1', '192.0.2.2', '192.0.2.3'),
      expected: '192.0.2.4',
    },
    { name: 'a hole first', block: '192.0.2.0/29', taken: values('192.0.2.2', '192.0.2.3'), expected: '192.0.2.1' },
    {
      name: 'a hole in the middle',
      block: '192.0.2.0/29',
      taken: values('192.0.2.1', '192.0.2.3'),
      expected: '192.0.2.2',
    },
    {
      name: 'taken values outside the block',
      block: '192.0.2.0/29',
      taken: values('10.0.0.1', '192.0.2.0', '192.0.2.1', '192.0.3.1'),
      expected: '192.0.2.2',
    },
    {
      name: 'a full block',
      block: '192.0.2.0/29',
      taken: values('192.0.2.1', '192.0.2.2', '192.0.2.3', '192.0.2.4', '192.0.2.5', '192.0.2.6'),
      expected: undefined,
    },
    {
      name: 'a full range',
      block: '192.0.2.5-192.0.2.6',
      taken: values('192.0.2.5', '192.0.2.6'),
      expected: undefined,
    },
    {
      name: 'IPv6 across a group boundary',
      block: '2001:db8::fffe-2001:db8::1:1',
      taken: values('2001:db8::fffe', '2001:db8::ffff'),
      expected: '2001:db8::1:0',
    },
    { name: 'a huge IPv6 block', block: '2001:db8::/64', taken: values('2001:db8::1'), expected: '2001:db8::2' },
  ];
  for (const { name, block: text, taken, expected } of cases) {
    it(name, () => {
      const parsed = block(text);
      const value = lowestFree(parsed, taken);
      assert.equal(value === undefined ? undefined : formatIp({ family: parsed.family, value }), expected);
    });
  }
});

const INSTANCES = 'instances: []\n';

describe('parseInventory: invalid loadBalancers', () => {
  const lb = (yaml: string): string => `${INSTANCES}loadBalancers:\n${yaml}`;
  const pool = (fields: string): string => lb(`  pools:\n    - ${fields}\n`);
  const cases: { name: string; yaml: string; field: string; problem: RegExp }[] = [
    {
      name: 'a list for the section',
      yaml: `${INSTANCES}loadBalancers: []\n`,
      field: 'loadBalancers',
      problem: /^must be a mapping, not a list$/,
    },
    { name: 'no pools', yaml: lb('  allocations: {}\n'), field: 'loadBalancers.pools', problem: /^is required$/ },
    {
      name: 'an empty list of pools',
      yaml: lb('  pools: []\n'),
      field: 'loadBalancers.pools',
      problem: /^must list at least one pool$/,
    },
    {
      name: 'an unknown field in the section',
      yaml: lb('  pools: [{ name: a, addresses: [192.0.2.0/28] }]\n  ranges: []\n'),
      field: 'loadBalancers.ranges',
      problem: /^is not a known field; the fields here are pools, allocations$/,
    },
    {
      name: 'an unknown pool field',
      yaml: pool('{ name: a, addresses: [192.0.2.0/28], cidr: 192.0.2.0/28 }'),
      field: 'loadBalancers.pools[0].cidr',
      problem: /^is not a known field; the fields here are name, addresses, namespaces, default$/,
    },
    {
      name: 'an unknown allocations field',
      yaml: lb('  pools: [{ name: a, addresses: [192.0.2.0/28] }]\n  allocations: { name: x }\n'),
      field: 'loadBalancers.allocations.name',
      problem: /^is not a known field; the fields here are namespace, configMap$/,
    },
    {
      name: 'a pool without name',
      yaml: pool('{ addresses: [192.0.2.0/28] }'),
      field: 'loadBalancers.pools[0].name',
      problem: /^is required$/,
    },
    {
      name: 'a pool without addresses',
      yaml: pool('{ name: a }'),
      field: 'loadBalancers.pools[0].addresses',
      problem: /^is required$/,
    },
    {
      name: 'a pool with no address',
      yaml: pool('{ name: a, addresses: [] }'),
      field: 'loadBalancers.pools[0].addresses',
      problem: /^must list at least one CIDR, range or address$/,
    },
    {
      name: 'a pool name that is no DNS label',
      yaml: pool('{ name: Gold_1, addresses: [192.0.2.0/28] }'),
      field: 'loadBalancers.pools[0].name',
      problem: /^must be a DNS label/,
    },
    {
      name: 'a CIDR with host bits',
      yaml: pool('{ name: a, addresses: [192.0.2.0/28, 192.0.2.17/28] }'),
      field: 'loadBalancers.pools[0].addresses[1]',
      problem: /^has bits set after its \/28 prefix; the network is 192\.0\.2\.16\/28$/,
    },
    {
      name: 'an address that YAML reads as a number',
      yaml: pool('{ name: a, addresses: [10] }'),
      field: 'loadBalancers.pools[0].addresses[0]',
      problem: /^must be a string, not the number 10 \(quote it: "10"\)$/,
    },
    {
      name: 'a reversed range',
      yaml: pool('{ name: a, addresses: ["2001:db8::20-2001:db8::10"] }'),
      field: 'loadBalancers.pools[0].addresses[0]',
      problem: /^ends \(2001:db8::10\) before it starts \(2001:db8::20\)$/,
    },
    {
      name: 'a namespace that is no DNS label',
      yaml: pool('{ name: a, addresses: [192.0.2.0/28], namespaces: [Team_A] }'),
      field: 'loadBalancers.pools[0].namespaces[0]',
      problem: /^must be a DNS label/,
    },
    {
      name: 'default that is no boolean',
      yaml: pool('{ name: a, addresses: [192.0.2.0/28], default: "yes" }'),
      field: 'loadBalancers.pools[0].default',
      problem: /^must be true or false, not "yes"$/,
    },
    {
      name: 'an allocations namespace that is no DNS label',
      yaml: lb('  pools: [{ name: a, addresses: [192.0.2.0/28] }]\n  allocations: { namespace: kube.system }\n'),
      field: 'loadBalancers.allocations.namespace',
      problem: /^must be a DNS label/,
    },
    {
      name: 'an allocations ConfigMap name that is no DNS subdomain',
      yaml: lb('  pools: [{ name: a, addresses: [192.0.2.0/28] }]\n  allocations: { configMap: LB_IPAM }\n'),
      field: 'loadBalancers.allocations.configMap',
      problem: /^must be a DNS subdomain/,
    },
    {
      name: 'two pools of the same name',
      yaml: lb(
        '  pools:\n    - { name: a, addresses: [192.0.2.0/28] }\n    - { name: b, addresses: [192.0.2.16/28] }\n    - { name: a, addresses: [192.0.2.32/28] }\n',
      ),
      field: 'loadBalancers.pools[2].name',
      problem: /^"a" is also the name of loadBalancers\.pools\[0\]$/,
    },
    {
      name: 'overlapping entries of one pool',
      yaml: pool('{ name: a, addresses: [192.0.2.0/28, 192.0.2.10-192.0.2.20] }'),
      field: 'loadBalancers.pools[0].addresses[1]',
      problem:
        /^192\.0\.2\.10-192\.0\.2\.20 overlaps 192\.0\.2\.0\/28 \(loadBalancers\.pools\[0\]\.addresses\[0\]\): 192\.0\.2\.10 is in both$/,
    },
    {
      name: 'the same address twice',
      yaml: pool('{ name: a, addresses: [192.0.2.7, 192.0.2.7/32] }'),
      field: 'loadBalancers.pools[0].addresses[1]',
      problem:
        /^192\.0\.2\.7\/32 overlaps 192\.0\.2\.7 \(loadBalancers\.pools\[0\]\.addresses\[0\]\): 192\.0\.2\.7 is in both$/,
    },
    {
      name: 'overlapping IPv6 pools',
      yaml: lb(
        '  pools:\n    - { name: a, addresses: [192.0.2.0/28, "2001:db8::/120"] }\n    - { name: b, addresses: ["2001:db8::80-2001:db8::1:0"] }\n',
      ),
      field: 'loadBalancers.pools[1].addresses[0]',
      problem:
        /^2001:db8::80-2001:db8::1:0 overlaps 2001:db8::\/120 \(loadBalancers\.pools\[0\]\.addresses\[1\]\): 2001:db8::80 is in both$/,
    },
    {
      name: 'a pool that takes in the network address of another',
      yaml: lb('  pools:\n    - { name: a, addresses: [192.0.2.0/24] }\n    - { name: b, addresses: [192.0.2.255] }\n'),
      field: 'loadBalancers.pools[1].addresses[0]',
      problem: /^192\.0\.2\.255 overlaps 192\.0\.2\.0\/24 .*: 192\.0\.2\.255 is in both$/,
    },
    {
      name: 'a namespace listed twice by a pool',
      yaml: pool('{ name: a, addresses: [192.0.2.0/28], namespaces: [x, y, x] }'),
      field: 'loadBalancers.pools[0].namespaces[2]',
      problem: /^"x" is also listed earlier in the same list; a namespace has one pool$/,
    },
    {
      name: 'a namespace in two pools',
      yaml: lb(
        '  pools:\n    - { name: a, addresses: [192.0.2.0/28], namespaces: [x] }\n    - { name: b, addresses: [192.0.2.16/28], namespaces: [y, x] }\n',
      ),
      field: 'loadBalancers.pools[1].namespaces[1]',
      problem: /^"x" is also listed by pool "a" \(loadBalancers\.pools\[0\]\); a namespace has one pool$/,
    },
    {
      name: 'two default pools',
      yaml: lb(
        '  pools:\n    - { name: a, addresses: [192.0.2.0/28], default: true }\n    - { name: b, addresses: [192.0.2.16/28], default: false }\n    - { name: c, addresses: ["2001:db8::/120"], default: true }\n',
      ),
      field: 'loadBalancers.pools[2].default',
      problem: /^pool "c" and pool "a" \(loadBalancers\.pools\[0\]\) are both the default; at most one pool may be$/,
    },
  ];
  for (const { name, yaml, field, problem } of cases) {
    it(`rejects ${name}`, () => {
      assert.throws(
        () => parseInventory(yaml, 'inventory.yaml'),
        (error) => {
          const invalid = findCause(error, CloudConfigError);
          assert.ok(invalid, `a CloudConfigError, not ${String(error)}`);
          assert.equal(invalid.file, 'inventory.yaml');
          assert.equal(invalid.field, field);
          assert.match(invalid.problem, problem);
          return true;
        },
      );
    });
  }
});

const POOLS = `${INSTANCES}loadBalancers:
  pools:
    - name: default
      default: true
      addresses: [192.0.2.0/29, "2001:db8::/125"]
    - name: team-a
      namespaces: [team-a, team-a2]
      addresses: [198.51.100.10-198.51.100.12]
    - name: v6
      addresses: ["2001:db8:1::10-2001:db8:1::1f"]
`;

function pools(yaml = POOLS): LoadBalancerConfig {
  const config = parseInventory(yaml, 'inventory.yaml').loadBalancers;
  assert.ok(config, 'the file has loadBalancers');
  return config;
}

describe('parseInventory: valid loadBalancers', () => {
  it('has none without the section', () => {
    assert.equal(parseInventory(INSTANCES, undefined).loadBalancers, undefined);
  });

  it('indexes pools by name and namespace, finds the default, and records allocations in cirrus-lb-ipam, namespace unset, by default', () => {
    const config = pools();
    assert.deepEqual(
      config.pools.map((pool) => pool.name),
      ['default', 'team-a', 'v6'],
    );
    assert.equal(config.defaultPool?.name, 'default');
    assert.equal(config.byNamespace.get('team-a2')?.name, 'team-a');
    assert.equal(config.byName.get('v6')?.blocks.length, 1);
    assert.deepEqual(config.allocations, { namespace: undefined, configMap: 'cirrus-lb-ipam' });
    assert.ok(
      Object.isFrozen(config) &&
        Object.isFrozen(config.pools) &&
        config.pools.every((pool) => Object.isFrozen(pool) && Object.isFrozen(pool.blocks)),
    );
  });

  it('takes the allocations location from the file, and allows no default', () => {
    const config = pools(
      `${INSTANCES}loadBalancers:\n  pools: [{ name: a, addresses: [192.0.2.1] }]\n  allocations: { namespace: cirrus, configMap: lb.addresses }\n`,
    );
    assert.deepEqual(config.allocations, { namespace: 'cirrus', configMap: 'lb.addresses' });
    assert.equal(config.defaultPool, undefined);
  });

  it('accepts adjacent entries and the same namespace name as a pool name', () => {
    const config = pools(
      `${INSTANCES}loadBalancers:\n  pools:\n    - { name: a, addresses: [192.0.2.0/28, 192.0.2.16-192.0.2.31], namespaces: [b] }\n    - { name: b, addresses: [192.0.2.32/31] }\n`,
    );
    assert.equal(config.pools.length, 2);
  });
});

interface ServiceSpec {
  readonly namespace?: string;
  readonly uid?: string;
  readonly families?: string[];
  readonly annotations?: Record<string, string>;
  readonly loadBalancerIP?: string;
}

function service({
  namespace = 'default',
  uid = 'uid-1',
  families,
  annotations,
  loadBalancerIP,
}: ServiceSpec = {}): V1Service {
  return {
    metadata: { name: 'web', namespace, uid, ...(annotations === undefined ? {} : { annotations }) },
    spec: {
      type: 'LoadBalancer',
      ...(families === undefined ? {} : { ipFamilies: families }),
      ...(loadBalancerIP === undefined ? {} : { loadBalancerIP }),
    },
  };
}

function allocationError(message: RegExp) {
  return (error: unknown): boolean => {
    assert.ok(error instanceof AllocationError, `an AllocationError, not ${String(error)}`);
    assert.match(error.message, message);
    return true;
  };
}

describe('readRequest: pool choice', () => {
  const cases: { name: string; spec: ServiceSpec; pool: string; reason: RegExp }[] = [
    { name: 'the default pool', spec: {}, pool: 'default', reason: /^the default pool$/ },
    {
      name: 'the pool listing the namespace',
      spec: { namespace: 'team-a2' },
      pool: 'team-a',
      reason: /^the pool for namespace team-a2$/,
    },
    {
      name: 'the pool its annotation names',
      spec: { families: ['IPv6'], annotations: { [POOL_ANNOTATION]: 'v6' } },
      pool: 'v6',
      reason: /annotation static\.cirrus-ccm\.dev\/pool/,
    },
    {
      name: 'the annotation before the namespace',
      spec: { namespace: 'team-a', annotations: { [POOL_ANNOTATION]: ' default ' } },
      pool: 'default',
      reason: /annotation/,
    },
    {
      name: 'an empty annotation as none',
      spec: { namespace: 'team-a', annotations: { [POOL_ANNOTATION]: '' } },
      pool: 'team-a',
      reason: /namespace/,
    },
  ];
  for (const { name, spec, pool, reason } of cases) {
    it(`picks ${name}`, () => {
      const request = readRequest(pools(), service(spec));
      assert.equal(request.pool.name, pool);
      assert.match(request.poolReason, reason);
    });
  }

  it('fails for a pool that does not exist, listing the pools', () => {
    assert.throws(
      () => readRequest(pools(), service({ annotations: { [POOL_ANNOTATION]: 'gold' } })),
      allocationError(
        /^service default\/web names pool "gold" in its annotation static\.cirrus-ccm\.dev\/pool, but there is no such pool; the pools for namespace default are default, v6$/,
      ),
    );
  });

  it('fails when no pool applies, naming only the pools the namespace may use', () => {
    const config = pools(
      `${INSTANCES}loadBalancers:\n  pools: [{ name: a, addresses: [192.0.2.0/28], namespaces: [x] }, { name: b, addresses: [192.0.2.16/28] }]\n`,
    );
    assert.throws(
      () => readRequest(config, service({ namespace: 'y' })),
      allocationError(
        /^no address pool applies to service y\/web: no pool lists namespace y and no pool is the default; name one with the annotation static\.cirrus-ccm\.dev\/pool \(the pools for namespace y are b\)$/,
      ),
    );
    const fenced = pools(
      `${INSTANCES}loadBalancers:\n  pools: [{ name: a, addresses: [192.0.2.0/28], namespaces: [x] }]\n`,
    );
    assert.throws(
      () => readRequest(fenced, service({ namespace: 'y' })),
      allocationError(
        /^no address pool applies to service y\/web: no pool lists namespace y and no pool is the default; no pool serves namespace y: every pool lists other namespaces$/,
      ),
    );
  });

  // A pool that lists namespaces serves only them, however it is chosen (docs/providers/static.md, "Sharing a pool").
  const fences: { name: string; yaml?: string; spec: ServiceSpec; message: RegExp }[] = [
    {
      name: 'the default pool',
      yaml: `${INSTANCES}loadBalancers:\n  pools: [{ name: a, default: true, addresses: [192.0.2.0/28], namespaces: [x, z] }]\n`,
      spec: { namespace: 'y' },
      message:
        /^pool "a" \(the default pool of service y\/web\) serves only namespaces x, z, not namespace y; no address is handed out from it/,
    },
    {
      name: 'a pool named by annotation',
      spec: { annotations: { [POOL_ANNOTATION]: 'team-a' } },
      message:
        /^pool "team-a" \(named by its annotation static\.cirrus-ccm\.dev\/pool of service default\/web\) serves only namespaces team-a, team-a2, not namespace default;/,
    },
    {
      name: 'an address requested by spec.loadBalancerIP, with the annotation',
      spec: { loadBalancerIP: '198.51.100.10', annotations: { [POOL_ANNOTATION]: 'team-a' } },
      message:
        /^pool "team-a" \(named by its annotation .*\) serves only namespaces team-a, team-a2, not namespace default;/,
    },
  ];
  for (const { name, yaml, spec, message } of fences) {
    it(`refuses ${name} to a namespace it does not list, naming the pool`, () => {
      assert.throws(() => readRequest(pools(yaml), service(spec)), allocationError(message));
    });
  }

  it('fails for a Service without UID', () => {
    assert.throws(
      () => readRequest(pools(), service({ uid: '' })),
      allocationError(/^service default\/web has no UID/),
    );
  });
});

describe('readRequest: families and requested addresses', () => {
  it('asks for IPv4 when spec.ipFamilies is empty, and keeps the order of spec.ipFamilies', () => {
    assert.deepEqual(readRequest(pools(), service()).families, ['IPv4']);
    assert.deepEqual(readRequest(pools(), service({ families: ['IPv6', 'IPv4'] })).families, ['IPv6', 'IPv4']);
  });

  it('reads the annotation (canonical, by family) and spec.loadBalancerIP', () => {
    const both = readRequest(
      pools(),
      service({ families: ['IPv4', 'IPv6'], annotations: { [ADDRESSES_ANNOTATION]: ' 192.0.2.3 , 2001:DB8::5,' } }),
    );
    assert.deepEqual(
      [...both.requested].map(([family, value]) => [family, formatIp(value)]),
      [
        ['IPv4', '192.0.2.3'],
        ['IPv6', '2001:db8::5'],
      ],
    );
    const legacy = readRequest(pools(), service({ loadBalancerIP: '192.0.2.4' }));
    assert.equal(formatIp(legacy.requested.get('IPv4') ?? ip('0.0.0.1')), '192.0.2.4');
  });

  const errors: { name: string; spec: ServiceSpec; message: RegExp }[] = [
    {
      name: 'a pool without addresses of a needed family',
      spec: { namespace: 'team-a', families: ['IPv4', 'IPv6'] },
      message:
        /^pool "team-a" \(the pool for namespace team-a of service team-a\/web\) has no IPv6 addresses, and the Service's spec\.ipFamilies are IPv4, IPv6$/,
    },
    {
      name: 'both the annotation and spec.loadBalancerIP',
      spec: { annotations: { [ADDRESSES_ANNOTATION]: '192.0.2.3' }, loadBalancerIP: '192.0.2.3' },
      message:
        /^service default\/web sets both spec\.loadBalancerIP and the annotation static\.cirrus-ccm\.dev\/load-balancer-ips; use only the annotation$/,
    },
    {
      name: 'a malformed address',
      spec: { annotations: { [ADDRESSES_ANNOTATION]: '192.0.2.300' } },
      message:
        /^service default\/web requests "192\.0\.2\.300" in the annotation static\.cirrus-ccm\.dev\/load-balancer-ips, which is not an IPv4 or IPv6 address$/,
    },
    {
      name: 'a malformed spec.loadBalancerIP',
      spec: { loadBalancerIP: 'lb.example.com' },
      message: /^service default\/web requests "lb\.example\.com" in spec\.loadBalancerIP, which is not/,
    },
    {
      name: 'two addresses of one family',
      spec: { annotations: { [ADDRESSES_ANNOTATION]: '192.0.2.3,192.0.2.4' } },
      message:
        /^service default\/web requests two IPv4 addresses \(192\.0\.2\.3 and 192\.0\.2\.4\); a Service gets one address per IP family$/,
    },
    {
      name: 'an address of a family the Service does not have',
      spec: { annotations: { [ADDRESSES_ANNOTATION]: '2001:db8::3' } },
      message: /^service default\/web requests 2001:db8::3, an IPv6 address, but its spec\.ipFamilies are IPv4$/,
    },
    {
      name: 'an address in another pool',
      spec: { annotations: { [ADDRESSES_ANNOTATION]: '2001:db8:1::10' }, families: ['IPv6'] },
      message:
        /^service default\/web requests 2001:db8:1::10, which is not in its pool "default" \(the default pool\); it is in pool "v6": name that pool with the annotation static\.cirrus-ccm\.dev\/pool to use it$/,
    },
    {
      name: 'an address in a pool fenced to other namespaces, without offering it',
      spec: { annotations: { [ADDRESSES_ANNOTATION]: '198.51.100.10' } },
      message:
        /^service default\/web requests 198\.51\.100\.10, which is not in its pool "default" \(the default pool\); it is in pool "team-a", which serves only namespaces team-a, team-a2, not namespace default$/,
    },
    {
      name: 'an address in no pool',
      spec: { namespace: 'team-a', loadBalancerIP: '203.0.113.9' },
      message:
        /^service team-a\/web requests 203\.0\.113\.9, which is not in its pool "team-a" \(the pool for namespace team-a\); nor in any other pool$/,
    },
    {
      name: 'the network address of a CIDR',
      spec: { loadBalancerIP: '192.0.2.0' },
      message: /requests 192\.0\.2\.0, which is not in its pool "default".*nor in any other pool$/,
    },
  ];
  for (const { name, spec, message } of errors) {
    it(`fails for ${name}`, () => {
      assert.throws(() => readRequest(pools(), service(spec)), allocationError(message));
    });
  }
});

describe('allocate', () => {
  const config = pools();
  const held = (uid: string, pool: string, ...addresses: string[]): [string, Allocation] => [
    uid,
    { namespace: 'other', name: uid, pool, addresses },
  ];
  // What the Service of service() holds: its UID, namespace and name.
  const mine = (pool: string, ...addresses: string[]): [string, Allocation] => [
    'uid-1',
    { namespace: 'default', name: 'web', pool, addresses },
  ];

  it('hands out the lowest free address of each family, in the order of spec.ipFamilies', () => {
    const allocations = new Map([held('x', 'default', '192.0.2.1', '2001:db8::2')]);
    const result = allocate(readRequest(config, service({ families: ['IPv6', 'IPv4'] })), allocations);
    assert.deepEqual(result, {
      namespace: 'default',
      name: 'web',
      pool: 'default',
      addresses: ['2001:db8::1', '192.0.2.2'],
    });
  });

  it('moves on to the next entry of the pool when one is full', () => {
    const two = pools(
      `${INSTANCES}loadBalancers:\n  pools: [{ name: a, default: true, addresses: [192.0.2.0/31, 192.0.2.9] }]\n`,
    );
    const allocations = new Map([held('x', 'a', '192.0.2.0'), held('y', 'a', '192.0.2.1')]);
    assert.deepEqual(allocate(readRequest(two, service()), allocations).addresses, ['192.0.2.9']);
  });

  it('gives the requested address when it is free', () => {
    const request = readRequest(config, service({ annotations: { [ADDRESSES_ANNOTATION]: '192.0.2.5' } }));
    assert.deepEqual(allocate(request, new Map([held('x', 'default', '192.0.2.1')])).addresses, ['192.0.2.5']);
  });

  it('refuses a requested address another Service holds, naming it', () => {
    const request = readRequest(config, service({ loadBalancerIP: '192.0.2.5' }));
    assert.throws(
      () => allocate(request, new Map([held('x', 'default', '192.0.2.5')])),
      (error) => {
        assert.ok(error instanceof AllocationError);
        assert.equal(
          error.message,
          'service default/web requests 192.0.2.5, which is already allocated to service other/x',
        );
        assert.deepEqual(error.holders, ['x']);
        return true;
      },
    );
  });

  it('reports an exhausted pool with its size and the allocations in it', () => {
    const request = readRequest(config, service({ namespace: 'team-a' }));
    const allocations = new Map([
      held('x', 'team-a', '198.51.100.10', '2001:db8::1'),
      held('y', 'team-a', '198.51.100.11'),
      held('z', 'elsewhere', '198.51.100.12'),
      held('w', 'default', '192.0.2.1'),
      held('v', 'default', '2001:db8::2'),
    ]);
    assert.throws(
      () => allocate(request, allocations),
      (error) => {
        assert.ok(error instanceof AllocationError);
        assert.equal(
          error.message,
          'pool "team-a" is exhausted (3 IPv4 addresses, all allocated): no IPv4 address for service team-a/web (the pool for namespace team-a)',
        );
        assert.deepEqual([...error.holders].sort(), ['x', 'y', 'z']);
        return true;
      },
    );
  });

  it('names as holders only the allocations of the exhausted family in a dual-stack pool, and counts one address right', () => {
    const full = [1, 2, 3, 4, 5, 6].map((n) => held(`h${n}`, 'default', `192.0.2.${n}`));
    const allocations = new Map([...full, held('v6only', 'default', '2001:db8::1')]);
    assert.throws(
      () => allocate(readRequest(config, service()), allocations),
      (error) => {
        assert.ok(error instanceof AllocationError);
        assert.match(error.message, /^pool "default" is exhausted \(6 IPv4 addresses, all allocated\)/);
        assert.deepEqual([...error.holders].sort(), ['h1', 'h2', 'h3', 'h4', 'h5', 'h6']);
        return true;
      },
    );
    const one = pools(`${INSTANCES}loadBalancers:\n  pools: [{ name: one, default: true, addresses: [192.0.2.9] }]\n`);
    assert.throws(
      () => allocate(readRequest(one, service()), new Map([held('x', 'one', '192.0.2.9')])),
      allocationError(/^pool "one" is exhausted \(1 IPv4 address, all allocated\)/),
    );
  });

  it('keeps what the Service holds (idempotent), even when its pool no longer has the address', () => {
    const request = readRequest(config, service({ families: ['IPv4', 'IPv6'] }));
    const own = mine('default', '192.0.2.6', '2001:db8::7');
    assert.deepEqual(allocate(request, new Map([own])).addresses, ['192.0.2.6', '2001:db8::7']);
    const shrunk = mine('default', '203.0.113.1', '2001:db8::7');
    assert.deepEqual(allocate(request, new Map([shrunk])).addresses, ['203.0.113.1', '2001:db8::7']);
  });

  it('keeps an address that is in the new pool, and replaces one from another pool', () => {
    const inPool = mine('', '192.0.2.3'); // written without a pool
    assert.deepEqual(allocate(readRequest(config, service()), new Map([inPool])).addresses, ['192.0.2.3']);
    const elsewhere = mine('team-a', '198.51.100.10');
    assert.deepEqual(allocate(readRequest(config, service()), new Map([elsewhere])).addresses, ['192.0.2.1']);
  });

  it('follows a changed request and drops a family the Service no longer has', () => {
    const own = mine('default', '192.0.2.6', '2001:db8::7');
    const request = readRequest(config, service({ families: ['IPv4'], loadBalancerIP: '192.0.2.2' }));
    assert.deepEqual(allocate(request, new Map([own])).addresses, ['192.0.2.2']);
  });

  it('counts a requested address the Service itself holds as free', () => {
    const request = readRequest(config, service({ loadBalancerIP: '192.0.2.6' }));
    assert.deepEqual(allocate(request, new Map([mine('default', '192.0.2.6')])).addresses, ['192.0.2.6']);
  });

  it("refuses a UID recorded for another Service (another namespace or name), naming that record's key as the holder", () => {
    const request = readRequest(config, service({ loadBalancerIP: '192.0.2.6' }));
    for (const [namespace, name] of [
      ['other', 'web'],
      ['default', 'api'],
    ] as const) {
      const record: Allocation = { namespace, name, pool: 'default', addresses: ['192.0.2.6'] };
      assert.throws(
        () => allocate(request, new Map([['uid-1', record]])),
        (error) => {
          assert.ok(error instanceof AllocationError);
          assert.equal(
            error.message,
            `service default/web has UID uid-1, which the allocations record for service ${namespace}/${name} (192.0.2.6); ` +
              'a Service holds addresses only under its own namespace, name and UID',
          );
          assert.deepEqual(error.holders, ['uid-1']);
          return true;
        },
      );
    }
  });
});

describe('heldBy', () => {
  const record: Allocation = { namespace: 'default', name: 'web', pool: 'default', addresses: ['192.0.2.1'] };
  const allocations = new Map([['uid-1', record]]);

  it("finds a Service's record by namespace, name and UID together", () => {
    assert.deepEqual(heldBy(service(), allocations), { uid: 'uid-1', allocation: record });
  });

  it('finds nothing for a Service object that differs in any of them', () => {
    const ghost = service();
    ghost.metadata = { ...ghost.metadata, name: 'ghost' };
    assert.equal(heldBy(ghost, allocations), undefined, 'another name, the same UID');
    assert.equal(heldBy(service({ namespace: 'other' }), allocations), undefined, 'another namespace');
    assert.equal(heldBy(service({ uid: 'uid-2' }), allocations), undefined, 'another UID (a new incarnation)');
    assert.equal(heldBy(service({ uid: '' }), allocations), undefined, 'no UID');
  });
});

describe('reloadProblem', () => {
  const deployment = { namespace: 'cirrus-system', from: 'the default' };
  const base = pools();
  const allocations = (setting: string) => pools(POOLS.replace('  pools:', `  allocations: ${setting}\n  pools:`));
  const moved = allocations('{ configMap: other }');
  it('allows a change of pools', () => {
    assert.equal(reloadProblem(base, pools(POOLS.replace('192.0.2.0/29', '192.0.2.0/28')), deployment), undefined);
    assert.equal(reloadProblem(undefined, undefined, undefined), undefined);
  });
  it('refuses to add or remove the section, or to move the allocations', () => {
    assert.deepEqual(reloadProblem(undefined, base, undefined)?.field, 'loadBalancers');
    assert.match(
      reloadProblem(undefined, base, undefined)?.problem ?? '',
      /^was added, but load balancers are only turned on at start-up/,
    );
    assert.match(
      reloadProblem(base, undefined, deployment)?.problem ?? '',
      /^was removed, but load balancers are only turned off at start-up/,
    );
    assert.equal(reloadProblem(base, moved, deployment)?.field, 'loadBalancers.allocations');
    assert.match(
      reloadProblem(base, moved, deployment)?.problem ?? '',
      /^moves the allocations from ConfigMap cirrus-system\/cirrus-lb-ipam to cirrus-system\/other, which only takes effect at start-up/,
    );
  });
  it('compares where the allocations are: the namespace cirrus runs in when the file names none', () => {
    assert.match(
      reloadProblem(base, allocations('{ namespace: kube-system }'), deployment)?.problem ?? '',
      /^moves the allocations from ConfigMap cirrus-system\/cirrus-lb-ipam to kube-system\/cirrus-lb-ipam,/,
    );
    const written = allocations('{ namespace: cirrus-system, configMap: cirrus-lb-ipam }');
    assert.equal(reloadProblem(base, written, deployment), undefined);
    assert.equal(reloadProblem(written, base, deployment), undefined);
    assert.ok(reloadProblem(base, written, { namespace: 'cirrus', from: 'the pod' }), 'elsewhere, it is a move');
  });
});
