// The least IAM policy of the aws provider (deploy/aws/iam/<function>.json, one per function, as
// each function has a role of its own on Lambda and a ServiceAccount of its own under IRSA):
//   - every SDK command the provider's code can send is allowed by some function's policy, and
//     the policies allow nothing else (but the two permissions AWS checks without a command of
//     their own: AddTags for tags given to a Create call, and the service-linked role the first
//     load balancer of an account needs);
//   - each function's policy allows every command the function's calls send, against the
//     emulator, and nothing its calls never send.

import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import pino from 'pino';
import { createAwsProvider } from '../../providers/aws/index.ts';
import type { CloudProvider, Route } from '../../shared/cloud/provider.ts';
import { awsEmulatorSkip, awsTestEnv, awsWorld, type AwsWorld } from '../harness/aws.ts';

const root = new URL('../../', import.meta.url);
const A = 'service.beta.kubernetes.io/aws-load-balancer-';
const functions = ['node-init', 'node-lifecycle', 'service-lb', 'routes'] as const;
type FunctionName = (typeof functions)[number];
/** Checked by AWS on a call whose command has another name (tags given to a create, the service-linked role). */
const implicit = new Set(['elasticloadbalancing:AddTags', 'ec2:CreateTags', 'iam:CreateServiceLinkedRole']);

interface Statement {
  readonly Effect: string;
  readonly Action: string | string[];
}

function allowed(name: FunctionName): Set<string> {
  const policy = JSON.parse(readFileSync(new URL(`deploy/aws/iam/${name}.json`, root), 'utf8')) as {
    Statement: Statement[];
  };
  return new Set(policy.Statement.filter((s) => s.Effect === 'Allow').flatMap((s) => [s.Action].flat()));
}

/** The IAM actions of the commands the provider's source (providers/aws/**) imports from the SDK clients. */
function commandsInSource(): Set<string> {
  const actions = new Set<string>();
  const dir = new URL('providers/aws/', root);
  const files = readdirSync(dir, { recursive: true }).filter((f): f is string => String(f).endsWith('.ts'));
  for (const file of files) {
    const source = readFileSync(new URL(file, dir), 'utf8');
    for (const match of source.matchAll(
      /import \{([^}]*)\} from '@aws-sdk\/client-(ec2|elastic-load-balancing-v2|elastic-load-balancing)'/g,
    )) {
      const prefix = match[2] === 'ec2' ? 'ec2' : 'elasticloadbalancing';
      // `X as Y` imports X: the alias is not a command.
      for (const name of (match[1] ?? '').replace(/\s+as\s+\w+/g, '').matchAll(/\b([A-Z]\w+)Command\b/g))
        actions.add(`${prefix}:${name[1] ?? ''}`);
    }
  }
  return actions;
}

function required<T>(capability: T | undefined): T {
  assert.ok(capability, 'the aws provider offers it');
  return capability;
}

describe('the aws provider’s IAM policies', () => {
  it('allow exactly the commands the provider can send', () => {
    const sent = commandsInSource();
    assert.ok(sent.size > 10, `found the provider's commands: ${[...sent].join(', ')}`);
    const union = new Set(functions.flatMap((f) => [...allowed(f)]));
    assert.deepEqual([...union].filter((a) => !sent.has(a) && !implicit.has(a)).sort(), [], 'allowed but never sent');
    assert.deepEqual([...sent].filter((a) => !union.has(a)).sort(), [], 'sent but not allowed');
  });

  describe('per function, against the emulator', { skip: awsEmulatorSkip }, () => {
    let world: AwsWorld;
    let current: Set<string>;
    const used = new Map<FunctionName, Set<string>>(functions.map((f) => [f, new Set()]));
    // Each function with a provider of its own, as in its own process (no answer remembered from another's calls).
    const as = async (
      fn: FunctionName,
      work: (cloud: CloudProvider) => Promise<unknown>,
      config: Record<string, string> = {},
    ): Promise<void> => {
      current = used.get(fn) ?? new Set();
      await work(provider(config));
    };
    const provider = (config: Record<string, string>): CloudProvider =>
      createAwsProvider(
        {
          config: world.cloudConfig(config),
          configPath: 'cloud.conf',
          signal: new AbortController().signal,
          log: pino({ level: 'silent' }),
          kubeConfig: undefined,
        },
        {
          observe: (service, operation) => {
            current.add(`${service === 'ec2' ? 'ec2' : 'elasticloadbalancing'}:${operation}`);
          },
        },
      );

    before(async () => {
      world = await awsWorld('aws-iam');
      Object.assign(process.env, awsTestEnv(world));
    });
    after(() => {
      // Unset when `before` failed before the world was made.
      (world as AwsWorld | undefined)?.close();
    });

    it('each function’s calls send only what its policy allows, and its policy allows only what they send', async () => {
      const [a, b] = [await world.runInstance(), await world.runInstance()];
      const node = (i: typeof a, providerId: boolean): V1Node => ({
        metadata: { name: i.privateDnsName },
        spec: providerId ? { providerID: i.providerId } : {},
      });
      await as('node-init', async (cloud) => {
        const instances = required(cloud.instancesV2());
        await instances.instanceMetadata(node(a, false));
        await instances.instanceMetadata(node(b, true));
      });
      await as('node-lifecycle', async (cloud) => {
        const instances = required(cloud.instancesV2());
        await instances.instanceExists(node(a, true));
        await instances.instanceShutdown(node(b, true));
      });
      // A Service through every kind of change, so every call service-lb can make is made.
      const service = (ports: [number, number][], annotations: Record<string, string> = {}): V1Service => ({
        metadata: { name: 'iam', namespace: 'default', uid: '0b8e1f2a-1111-2222-3333-444455556666', annotations },
        spec: { type: 'LoadBalancer', ports: ports.map(([port, nodePort]) => ({ port, nodePort, protocol: 'TCP' })) },
      });
      await as('service-lb', async (cloud) => {
        const lb = required(cloud.loadBalancer());
        await lb.getLoadBalancer('kubernetes', service([[80, 30080]]));
        await lb.ensureLoadBalancer('kubernetes', service([[80, 30080]]), [node(a, true)]);
        await lb.updateLoadBalancer('kubernetes', service([[80, 30080]]), [node(b, true)]);
        const threshold = { 'service.beta.kubernetes.io/aws-load-balancer-healthcheck-healthy-threshold': '5' };
        await lb.ensureLoadBalancer('kubernetes', service([[80, 30080]], threshold), [node(b, true)]);
        await lb.ensureLoadBalancer(
          'kubernetes',
          service([
            [80, 30090],
            [81, 30091],
          ]),
          [node(b, true)],
        );
        const crossZone = {
          'service.beta.kubernetes.io/aws-load-balancer-cross-zone-load-balancing-enabled': 'true',
          'service.beta.kubernetes.io/aws-load-balancer-target-group-attributes': 'proxy_protocol_v2.enabled=true',
        };
        await lb.ensureLoadBalancer('kubernetes', service([[81, 30091]], crossZone), [node(b, true)]);
        await lb.ensureLoadBalancerDeleted('kubernetes', service([[81, 30091]], crossZone));
      });
      // A Classic ELB through every kind of change, its security groups included.
      const classic = { DisableSecurityGroupIngress: 'false', DefaultLoadBalancerType: 'classic' };
      const tls = {
        [`${A}ssl-cert`]: 'arn:aws:iam::123456789012:server-certificate/iam',
        [`${A}ssl-negotiation-policy`]: 'ELBSecurityPolicy-2016-08',
        [`${A}proxy-protocol`]: '*',
        [`${A}connection-idle-timeout`]: '90',
      };
      const moved = {
        [`${A}subnets`]: world.publicSubnets[0]?.id ?? '',
        [`${A}additional-resource-tags`]: 'team=iam',
        'service.beta.kubernetes.io/load-balancer-source-ranges': '10.0.0.0/8',
      };
      await as(
        'service-lb',
        async (cloud) => {
          const lb = required(cloud.loadBalancer());
          await lb.ensureLoadBalancer('kubernetes', classicService([[443, 30443]], tls), [node(a, true)]);
          await lb.updateLoadBalancer('kubernetes', classicService([[443, 30443]], tls), [node(b, true)]);
          await lb.ensureLoadBalancer('kubernetes', classicService([[80, 30080]], moved), [node(b, true)]);
        },
        classic,
      );
      await as(
        'service-lb',
        async (cloud) => {
          const lb = required(cloud.loadBalancer());
          const back = { ...moved, [`${A}subnets`]: world.publicSubnets.map((s) => s.id).join(',') };
          await lb.ensureLoadBalancer('kubernetes', classicService([[80, 30080]], back), [node(b, true)]);
          await lb.ensureLoadBalancerDeleted('kubernetes', classicService([[80, 30080]], back));
        },
        { ...classic, ElbSecurityGroup: world.securityGroupId },
      );
      function classicService(ports: [number, number][], annotations: Record<string, string>): V1Service {
        const svc = service(ports, annotations);
        return { ...svc, metadata: { ...svc.metadata, name: 'classic', uid: '0b8e1f2a-1111-2222-3333-c1a551c00001' } };
      }
      const route: Route = {
        name: '',
        targetNode: a.privateDnsName,
        enableNodeAddresses: false,
        targetNodeAddresses: [],
        destinationCidr: '10.244.3.0/24',
        blackhole: false,
      };
      await as('routes', async (cloud) => {
        const routes = required(cloud.routes());
        await routes.createRoute('kubernetes', 'uid', route);
        await routes.listRoutes('kubernetes');
        await routes.deleteRoute('kubernetes', route);
      });
      for (const fn of functions) {
        const policy = allowed(fn);
        const sent = used.get(fn) ?? new Set();
        assert.deepEqual(
          [...sent].filter((x) => !policy.has(x)).sort(),
          [],
          `${fn} sent what its policy does not allow`,
        );
        assert.deepEqual(
          [...policy].filter((x) => !sent.has(x) && !implicit.has(x)).sort(),
          [],
          `${fn}'s policy allows what its calls never sent`,
        );
      }
    });
  });
});
