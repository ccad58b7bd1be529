// The route controller's pure decisions (k8s.io/cloud-provider app/core.go startRouteController,
// controllers/route) and the CIDR helper.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Node, V1NodeAddress } from '@kubernetes/client-node';
import {
  conditionCurrent,
  conditionPatch,
  deleteReason,
  isResponsibleForRoute,
  networkCondition,
  nodeResult,
  parseClusterCidrs,
  planRoutes,
  podCidrs,
  routeAction,
  routesCreated,
  sameAddresses,
  type CidrAction,
  type NodePlan,
} from '../../functions/routes/plan.ts';
import { canonicalCidr, cidrContains, formatCidr, lastAddress, parseCidr, parseIp } from '../../shared/net/ip.ts';
import type { Route } from '../../shared/cloud/provider.ts';

const a = (type: string, address: string): V1NodeAddress => ({ type, address });

function route(destinationCidr: string, targetNode: string, extra: Partial<Route> = {}): Route {
  return {
    name: `r-${destinationCidr}`,
    targetNode,
    enableNodeAddresses: false,
    targetNodeAddresses: [],
    destinationCidr,
    blackhole: false,
    ...extra,
  };
}

function node(name: string, spec: V1Node['spec'] = {}, addresses: V1NodeAddress[] = []): V1Node {
  return { metadata: { name, uid: `uid-${name}` }, spec, status: { addresses } };
}

const cluster = parseClusterCidrs(['10.244.0.0/16', 'fd00:10:244::/56']);

describe('parseCidr and formatCidr', () => {
  const cases: [string, string | undefined][] = [
    ['10.244.1.0/24', '10.244.1.0/24'],
    ['10.244.1.7/24', '10.244.1.0/24'], // host bits cleared, as Go's ParseCIDR
    ['010.244.001.0/24', '10.244.1.0/24'], // leading zeros are decimal (ParseCIDRSloppy)
    ['0.0.0.0/0', '0.0.0.0/0'],
    ['10.0.0.1/32', '10.0.0.1/32'],
    ['FD00:10:244:0001:0:0:0:0/64', 'fd00:10:244:1::/64'],
    ['fd00::/8', 'fd00::/8'],
    ['::/0', '::/0'],
    ['::ffff:10.1.0.0/112', '::ffff:a01:0/112'],
    ['2001:db8:0:0:1:0:0:1/128', '2001:db8::1:0:0:1/128'],
    ['10.244.1.0', undefined],
    ['10.244.1.0/33', undefined],
    ['10.244.1.0/-1', undefined],
    ['10.244.1.0/', undefined],
    ['10.244.256.0/24', undefined],
    ['10.244.1/24', undefined],
    ['fd00::1::/64', undefined],
    ['fd00:1:2:3:4:5:6:7:8/64', undefined],
    ['1:2:3:4:5:6:7::8/64', undefined], // `::` must stand for at least one group
    ['fd00::/129', undefined],
    ['fd00::g/64', undefined],
    ['fe80::1%eth0/64', undefined],
    ['', undefined],
  ];
  for (const [input, want] of cases) {
    it(`${JSON.stringify(input)} → ${String(want)}`, () => {
      const cidr = parseCidr(input);
      assert.equal(cidr === undefined ? undefined : formatCidr(cidr), want);
    });
  }

  it('canonicalCidr keeps text that is not a CIDR', () => {
    assert.equal(canonicalCidr('not-a-cidr'), 'not-a-cidr');
    assert.equal(canonicalCidr('fd00:0:0::/64'), 'fd00::/64');
  });
});

describe('cidrContains and lastAddress', () => {
  const cases: [string, string, boolean][] = [
    ['10.244.0.0/16', '10.244.255.255', true],
    ['10.244.0.0/16', '10.245.0.0', false],
    ['10.244.0.0/16', '::ffff:10.244.3.4', true], // IPv4-mapped counts as IPv4, as Go's IPNet.Contains
    ['fd00:10:244::/56', 'fd00:10:244:ff:ffff:ffff:ffff:ffff', true],
    ['fd00:10:244::/56', 'fd00:10:244:100::', false],
    ['::/0', '10.0.0.1', false], // families never mix otherwise
    ['0.0.0.0/0', 'fd00::1', false],
  ];
  for (const [net, ip, want] of cases) {
    it(`${net} ∋ ${ip}: ${String(want)}`, () => {
      const cidr = parseCidr(net);
      const address = parseIp(ip);
      assert.ok(cidr && address);
      assert.equal(cidrContains(cidr, address), want);
    });
  }

  it('lastAddress sets every host bit', () => {
    const v4 = parseCidr('10.244.1.0/24');
    const v6 = parseCidr('fd00:10:244:1::/64');
    assert.ok(v4 && v6);
    assert.equal(lastAddress(v4).value, parseIp('10.244.1.255')?.value);
    assert.equal(lastAddress(v6).value, parseIp('fd00:10:244:1:ffff:ffff:ffff:ffff')?.value);
  });
});

describe('parseClusterCidrs', () => {
  const valid: string[][] = [
    ['10.244.0.0/16'],
    ['fd00:10:244::/56'],
    ['10.244.0.0/16', 'fd00:10:244::/56'],
    ['fd00::/8', '10.0.0.0/8'],
  ];
  for (const input of valid) {
    it(`accepts ${input.join(',')}`, () => {
      assert.equal(parseClusterCidrs(input).length, input.length);
    });
  }
  const invalid: [string[], RegExp][] = [
    [[], /no cluster CIDR is set/],
    [[''], /no cluster CIDR is set/],
    [['10.244.0.0'], /cluster CIDR "10\.244\.0\.0" is not a valid CIDR/],
    [['10.244.0.0/16', 'bogus'], /cluster CIDR "bogus" is not a valid CIDR/],
    [['10.244.0.0/16', '10.245.0.0/16'], /"10\.244\.0\.0\/16" and "10\.245\.0\.0\/16" are both IPv4: .*dual stack/],
    [['fd00::/8', 'fd01::/16'], /are both IPv6/],
    [['10.244.0.0/16', 'fd00::/8', '10.1.0.0/16'], /3 cluster CIDRs are set .*at most 2/],
  ];
  for (const [input, message] of invalid) {
    it(`refuses ${JSON.stringify(input)}`, () => {
      assert.throws(() => parseClusterCidrs(input), message);
    });
  }
});

describe('podCidrs', () => {
  const cases: [string, V1Node['spec'], string[]][] = [
    ['none', {}, []],
    [
      'podCIDRs',
      { podCIDR: '10.244.1.0/24', podCIDRs: ['10.244.1.0/24', 'fd00:10:244:1::/64'] },
      ['10.244.1.0/24', 'fd00:10:244:1::/64'],
    ],
    ['only the singular podCIDR', { podCIDR: '10.244.2.0/24' }, ['10.244.2.0/24']],
    ['an empty podCIDRs list and no podCIDR', { podCIDRs: [] }, []],
  ];
  for (const [title, spec, want] of cases) {
    it(title, () => {
      assert.deepEqual(podCidrs(node('n', spec)), want);
    });
  }
});

describe('sameAddresses', () => {
  const cases: [string, V1NodeAddress[], V1NodeAddress[], boolean][] = [
    ['equal', [a('InternalIP', '10.0.0.1')], [a('InternalIP', '10.0.0.1')], true],
    [
      'reordered',
      [a('InternalIP', '10.0.0.1'), a('Hostname', 'w')],
      [a('Hostname', 'w'), a('InternalIP', '10.0.0.1')],
      true,
    ],
    ['both empty', [], [], true],
    ['other address', [a('InternalIP', '10.0.0.1')], [a('InternalIP', '10.0.0.2')], false],
    ['other type', [a('InternalIP', '10.0.0.1')], [a('ExternalIP', '10.0.0.1')], false],
    ['different length', [a('InternalIP', '10.0.0.1')], [a('InternalIP', '10.0.0.1'), a('Hostname', 'w')], false],
  ];
  for (const [title, x, y, want] of cases) {
    it(title, () => {
      assert.equal(sameAddresses(x, y), want);
    });
  }
});

describe('routeAction', () => {
  const addresses = [a('InternalIP', '10.0.0.1')];
  const cases: [string, Route[], string, string][] = [
    ['no route', [], '10.244.1.0/24', 'add'],
    ['a route to another CIDR', [route('10.244.9.0/24', 'n')], '10.244.1.0/24', 'add'],
    ['a route with the CIDR', [route('10.244.1.0/24', 'n')], '10.244.1.0/24', 'keep'],
    ['another spelling of the CIDR', [route('fd00:10:244:1:0::/64', 'n')], 'fd00:10:244:1::/64', 'keep'],
    [
      'stale addresses, provider does not compare them',
      [route('10.244.1.0/24', 'n', { targetNodeAddresses: [a('InternalIP', '10.9.9.9')] })],
      '10.244.1.0/24',
      'keep',
    ],
    [
      'same addresses, provider compares them',
      [route('10.244.1.0/24', 'n', { enableNodeAddresses: true, targetNodeAddresses: addresses })],
      '10.244.1.0/24',
      'keep',
    ],
    [
      'stale addresses, provider compares them',
      [route('10.244.1.0/24', 'n', { enableNodeAddresses: true, targetNodeAddresses: [a('InternalIP', '10.9.9.9')] })],
      '10.244.1.0/24',
      'update',
    ],
  ];
  for (const [title, routes, cidr, want] of cases) {
    it(`${title} → ${want}`, () => {
      assert.equal(routeAction(routes, cidr, addresses), want);
    });
  }
});

describe('isResponsibleForRoute', () => {
  const cases: [string, boolean][] = [
    ['10.244.3.0/24', true],
    ['10.244.0.0/16', true],
    ['10.0.0.0/8', false], // wider than the cluster CIDR: neither end is inside
    ['10.244.255.0/23', true], // masked to 10.244.254.0/23: inside
    ['10.245.0.0/24', false],
    ['192.168.0.0/24', false],
    ['fd00:10:244:5::/64', true],
    ['fd00:10:245::/64', false],
    ['not-a-cidr', false],
    ['', false],
  ];
  for (const [cidr, want] of cases) {
    it(`${JSON.stringify(cidr)}: ${String(want)}`, () => {
      assert.equal(isResponsibleForRoute(route(cidr, 'n'), cluster), want);
    });
  }

  it('takes a route whose first address is outside and last inside', () => {
    const narrow = parseClusterCidrs(['10.244.128.0/17']);
    assert.equal(isResponsibleForRoute(route('10.244.0.0/16', 'n'), narrow), true);
  });
});

describe('deleteReason', () => {
  const plans = new Map<string, NodePlan>([
    [
      'w1',
      {
        node: node('w1'),
        cidrs: [
          { cidr: '10.244.1.0/24', action: 'keep' },
          { cidr: 'fd00:10:244:1::/64', action: 'update' },
        ],
      },
    ],
    ['bare', { node: node('bare'), cidrs: [] }],
  ]);
  const cases: [string, Route, string | undefined][] = [
    ['a wanted route', route('10.244.1.0/24', 'w1'), undefined],
    ['a wanted route, spelled differently', route('10.244.001.0/24', 'w1'), undefined],
    ['a blackhole route, even a wanted one', route('10.244.1.0/24', 'w1', { blackhole: true }), 'blackhole'],
    ['a route to a node that is gone', route('10.244.7.0/24', 'gone'), 'unknown-node'],
    ['a route without a target node', route('10.244.7.0/24', ''), 'unknown-node'],
    ['a route to a CIDR the node no longer has', route('10.244.8.0/24', 'w1'), 'cidr-not-assigned'],
    ['a route to a node without pod CIDRs', route('10.244.8.0/24', 'bare'), 'cidr-not-assigned'],
    ['a route whose node addresses changed', route('fd00:10:244:1::/64', 'w1'), 'addresses-changed'],
  ];
  for (const [title, input, want] of cases) {
    it(`${title} → ${String(want)}`, () => {
      assert.equal(deleteReason(input, plans), want);
    });
  }
});

describe('planRoutes', () => {
  const addresses = [a('InternalIP', '10.0.0.1')];
  const nodes = [
    node('dual', { podCIDRs: ['10.244.1.0/24', 'fd00:10:244:1::/64'] }, addresses),
    node('moved', { podCIDRs: ['10.244.2.0/24'] }),
    node('none'),
    node('orphaned'),
  ];
  const routes = [
    route('10.244.1.0/24', 'dual'),
    route('10.244.9.0/24', 'moved'),
    route('10.244.3.0/24', 'orphaned'),
    route('10.244.4.0/24', 'gone'),
    route('192.168.1.0/24', 'gone'),
    route('10.244.5.0/24', '', { blackhole: true }),
    route('192.168.2.0/24', '', { blackhole: true }),
  ];
  const plan = planRoutes(nodes, routes, cluster);

  it('plans every pod CIDR of the nodes that have them, and the nodes that only have routes', () => {
    const summary = plan.nodes.map((p) => [p.node.metadata?.name, p.cidrs.map((c) => `${c.cidr}:${c.action}`)]);
    assert.deepEqual(summary, [
      ['dual', ['10.244.1.0/24:keep', 'fd00:10:244:1::/64:add']],
      ['moved', ['10.244.2.0/24:add']],
      ['orphaned', []],
    ]);
    assert.deepEqual(
      plan.skipped.map((n) => n.metadata?.name),
      ['none'],
    );
  });

  it('deletes the unwanted routes inside the cluster CIDRs only, blackholes included', () => {
    assert.deepEqual(
      plan.deletions.map((d) => [d.route.destinationCidr, d.reason]),
      [
        ['10.244.9.0/24', 'cidr-not-assigned'],
        ['10.244.3.0/24', 'cidr-not-assigned'],
        ['10.244.4.0/24', 'unknown-node'],
        ['10.244.5.0/24', 'blackhole'],
      ],
    );
  });

  it('runs deletions first only when the provider compares node addresses (as the first route says)', () => {
    assert.equal(plan.deleteFirst, false);
    assert.equal(
      planRoutes(
        nodes,
        [route('10.244.1.0/24', 'dual', { enableNodeAddresses: true, targetNodeAddresses: addresses })],
        cluster,
      ).deleteFirst,
      true,
    );
    assert.equal(planRoutes(nodes, [], cluster).deleteFirst, false);
  });
});

describe('routesCreated', () => {
  const keep: CidrAction = { cidr: '10.244.1.0/24', action: 'keep' };
  const add: CidrAction = { cidr: 'fd00:10:244:1::/64', action: 'add' };
  const update: CidrAction = { cidr: '10.244.2.0/24', action: 'update' };
  const cases: [string, CidrAction[], string[], boolean][] = [
    ['all kept', [keep], [], true],
    ['the missing one created', [keep, add], [add.cidr], true],
    ['the missing one not created', [keep, add], [], false],
    ['an update not re-created', [update], [], false],
    ['an update re-created', [update], [update.cidr], true],
    ['no pod CIDR (routes only)', [], [], false],
  ];
  for (const [title, cidrs, created, want] of cases) {
    it(`${title}: ${String(want)}`, () => {
      assert.equal(routesCreated(cidrs, new Set(created)), want);
    });
  }
});

describe('the NetworkUnavailable condition', () => {
  const withCondition = (status: string, reason: string): V1Node => ({
    metadata: { name: 'n' },
    status: {
      conditions: [
        { type: 'Ready', status: 'True' },
        { type: 'NetworkUnavailable', status, reason },
      ],
    },
  });
  const cases: [string, V1Node, boolean, boolean][] = [
    ['no condition, routes created', node('n'), true, false],
    ['no condition, routes missing', node('n'), false, false],
    ['RouteCreated, routes created', withCondition('False', 'RouteCreated'), true, true],
    ['NoRouteCreated, routes missing', withCondition('True', 'NoRouteCreated'), false, true],
    ['NoRouteCreated, routes created', withCondition('True', 'NoRouteCreated'), true, false],
    ['RouteCreated, routes missing', withCondition('False', 'RouteCreated'), false, false],
    ["a CNI's False condition, routes created", withCondition('False', 'CalicoIsUp'), true, false],
    ["a CNI's True condition, routes missing", withCondition('True', 'CNIDown'), false, false],
  ];
  for (const [title, input, created, current] of cases) {
    it(`${title}: ${current ? 'left alone' : 'written'}`, () => {
      assert.equal(conditionCurrent(input, networkCondition(created)), current);
    });
  }

  it('says what upstream says', () => {
    assert.deepEqual(networkCondition(true), {
      status: 'False',
      reason: 'RouteCreated',
      message: 'RouteController created a route',
    });
    assert.deepEqual(networkCondition(false), {
      status: 'True',
      reason: 'NoRouteCreated',
      message: 'RouteController failed to create a route',
    });
  });

  it('is patched as one condition with both times now, in whole seconds', () => {
    assert.deepEqual(conditionPatch(networkCondition(true), new Date('2026-11-23T10:11:12.345Z')), {
      status: {
        conditions: [
          {
            type: 'NetworkUnavailable',
            status: 'False',
            reason: 'RouteCreated',
            message: 'RouteController created a route',
            lastTransitionTime: '2026-11-23T10:11:12Z',
            lastHeartbeatTime: '2026-11-23T10:11:12Z',
          },
        ],
      },
    });
  });
});

describe('nodeResult', () => {
  const base = { hasPodCidrs: true, routesCreated: 0, conditionSet: false, failed: false };
  const cases: [string, typeof base, string][] = [
    ['nothing done', base, 'unchanged'],
    ['condition only', { ...base, conditionSet: true }, 'condition-updated'],
    ['routes created', { ...base, routesCreated: 2, conditionSet: true }, 'routes-created'],
    ['a failure among creations', { ...base, routesCreated: 1, failed: true }, 'failed'],
    ['no pod CIDR', { ...base, hasPodCidrs: false, conditionSet: true }, 'no-pod-cidr'],
  ];
  for (const [title, input, want] of cases) {
    it(`${title} → ${want}`, () => {
      assert.equal(nodeResult(input), want);
    });
  }
});
