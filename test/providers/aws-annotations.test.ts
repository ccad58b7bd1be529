// Every service.beta.kubernetes.io/aws-load-balancer-* annotation cloud-provider-aws knows is, for
// each kind of load balancer, honoured, refused by name, or answered with a Warning Event naming it
// (providers/aws/annotations.ts). docs/providers/aws.md's annotation table is read here and held to
// the provider's list, row by row, with the test each row names; the refusals and Warnings are
// walked for every row against the emulator and the run's API server (the Events are real), and
// the honoured NLB and Classic annotations no other test shows are shown here.

import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { after, before, describe, it } from 'node:test';
import { DescribeLoadBalancersCommand as DescribeClassicCommand } from '@aws-sdk/client-elastic-load-balancing';
import {
  DescribeLoadBalancerAttributesCommand,
  DescribeLoadBalancersCommand,
  DescribeTagsCommand,
  DescribeTargetGroupsCommand,
  DescribeTargetHealthCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { ElasticLoadBalancingClient } from '@aws-sdk/client-elastic-load-balancing';
import { CoreV1Api, type KubeConfig, type V1Node, type V1Service } from '@kubernetes/client-node';
import pino from 'pino';
import { ANNOTATION_PREFIX as A, ANNOTATIONS, type Kind, type Treatment } from '../../providers/aws/annotations.ts';
import { createAwsProvider } from '../../providers/aws/index.ts';
import type { LoadBalancer } from '../../shared/cloud/provider.ts';
import { emulatorCredentials } from '../../tools/aws-emulator/world.ts';
import { awsEmulatorSkip, awsTestEnv, awsWorld, type AwsWorld, type WorldInstance } from '../harness/aws.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';

const root = new URL('../../', import.meta.url);

interface Row {
  readonly name: string;
  readonly classic: string;
  readonly nlb: string;
  readonly tests: readonly string[];
}

/** The rows of the annotation table in docs/providers/aws.md (the one whose first header is `annotation`). */
function docRows(): Row[] {
  const text = readFileSync(new URL('docs/providers/aws.md', root), 'utf8');
  const lines = text.split('\n');
  const start = lines.findIndex((l) => /^\|\s*annotation\s*\|/.test(l));
  assert.ok(start >= 0, 'docs/providers/aws.md has a table whose first header is "annotation"');
  const rows: Row[] = [];
  for (const line of lines.slice(start + 2)) {
    if (!line.startsWith('|')) break;
    const cells = line
      .split('|')
      .slice(1, -1)
      .map((c) => c.trim());
    const [name = '', , classic = '', nlb = '', tests = ''] = cells;
    rows.push({
      name: name.replace(/^`|`$/g, ''),
      classic,
      nlb,
      tests: [...tests.matchAll(/`([^`]+)`/g)].map((m) => m[1] ?? ''),
    });
  }
  return rows;
}

/** The word a table cell starts with for a treatment. */
function word(treatment: Treatment): string {
  if (treatment.does === 'honoured') return 'honoured';
  return treatment.does === 'refused' ? 'refused' : 'Warning';
}

/** Whether `aws-x › title` names an `it(…)` of test/providers/aws-x.test.ts. */
function testExists(reference: string): boolean {
  const [file = '', title = ''] = reference.split(' › ');
  const source = readFileSync(new URL(`test/providers/${file}.test.ts`, root), 'utf8');
  return source.includes(`it('${title}'`);
}

describe('the aws provider’s annotation table', () => {
  it('is the provider’s list: every annotation, what each kind does with it, and a test that exists', () => {
    const rows = docRows();
    assert.deepEqual(
      rows.map((r) => r.name),
      ANNOTATIONS.map((a) => `${A}${a.name}`),
      'the same annotations, in the same order',
    );
    for (const [i, rule] of ANNOTATIONS.entries()) {
      const row = rows[i] as Row;
      assert.ok(row.classic.startsWith(word(rule.classic)), `${row.name}: Classic says "${row.classic}"`);
      assert.ok(row.nlb.startsWith(word(rule.nlb)), `${row.name}: NLB says "${row.nlb}"`);
      assert.ok(row.tests.length > 0, `${row.name}: names a test`);
      for (const test of row.tests) assert.ok(testExists(test), `${row.name}: no test "${test}"`);
    }
  });
});

describe('aws provider: annotations, for each kind', { skip: awsEmulatorSkip || controlPlaneSkip }, () => {
  let world: AwsWorld;
  let admin: KubeConfig;
  let core: CoreV1Api;
  let elb: ElasticLoadBalancingClient;
  const instances: WorldInstance[] = [];

  before(async () => {
    world = await awsWorld('aws-annotations');
    Object.assign(process.env, awsTestEnv(world));
    admin = (await testCluster()).admin;
    core = admin.makeApiClient(CoreV1Api);
    elb = new ElasticLoadBalancingClient({
      endpoint: world.endpoint,
      region: world.region,
      credentials: emulatorCredentials,
      maxAttempts: 1,
    });
    instances.push(await world.runInstance(), await world.runInstance({ az: world.publicSubnets[1]?.az ?? '' }));
  });
  after(() => {
    (elb as ElasticLoadBalancingClient | undefined)?.destroy();
    (world as AwsWorld | undefined)?.close();
  });

  const provider = (kind: Kind): LoadBalancer => {
    const lb = createAwsProvider({
      config: world.cloudConfig({ DefaultLoadBalancerType: kind }),
      configPath: 'cloud.conf',
      signal: new AbortController().signal,
      log: pino({ level: 'silent' }),
      kubeConfig: admin,
    }).loadBalancer();
    assert.ok(lb, 'the aws provider has a LoadBalancer');
    return lb;
  };
  const nodes = (): V1Node[] =>
    instances.map((i, n) => ({
      metadata: { name: i.privateDnsName, labels: n === 0 ? { role: 'edge' } : {} },
      spec: { providerID: i.providerId },
    }));
  /** A Service of the API server (its Events are real), with `annotations`. */
  const created = async (annotations: Record<string, string>): Promise<V1Service> =>
    core.createNamespacedService({
      namespace: 'default',
      body: {
        metadata: { name: uniqueName('annotated'), annotations },
        spec: { type: 'LoadBalancer', ports: [{ name: 'web', port: 80, protocol: 'TCP' }] },
      },
    });
  const lbName = (svc: V1Service): string => `a${(svc.metadata?.uid ?? '').replaceAll('-', '')}`.slice(0, 32);
  const warnings = async (svc: V1Service, reason = 'AnnotationNotApplied'): Promise<string[]> => {
    const events = await core.listNamespacedEvent({
      namespace: 'default',
      fieldSelector: `involvedObject.name=${svc.metadata?.name ?? ''}`,
    });
    return events.items.filter((e) => e.type === 'Warning' && e.reason === reason).map((e) => e.message ?? '');
  };

  /** An NLB as the emulator has it: subnets, cross-zone, tags, and its one target group's health check and targets. */
  async function nlbState(name: string) {
    const nlb = (await world.elbv2.send(new DescribeLoadBalancersCommand({ Names: [name] }))).LoadBalancers?.[0];
    const arn = nlb?.LoadBalancerArn ?? '';
    const attributes = await world.elbv2.send(new DescribeLoadBalancerAttributesCommand({ LoadBalancerArn: arn }));
    const tags = await world.elbv2.send(new DescribeTagsCommand({ ResourceArns: [arn] }));
    return {
      subnets: (nlb?.AvailabilityZones ?? []).map((z) => z.SubnetId),
      crossZone: crossZoneOf(attributes.Attributes ?? []),
      tags: tagLines(tags.TagDescriptions?.[0]?.Tags ?? []),
      ...(await groupState(arn)),
    };
  }
  async function groupState(arn: string) {
    const groups = await world.elbv2.send(new DescribeTargetGroupsCommand({ LoadBalancerArn: arn }));
    const g = groups.TargetGroups?.[0] ?? {};
    const health = await world.elbv2.send(new DescribeTargetHealthCommand({ TargetGroupArn: g.TargetGroupArn }));
    return {
      health: [
        g.HealthCheckProtocol,
        g.HealthCheckPort,
        g.HealthCheckPath,
        g.HealthCheckIntervalSeconds,
        g.HealthyThresholdCount,
        g.UnhealthyThresholdCount,
      ],
      targets: (health.TargetHealthDescriptions ?? []).map((t) => t.Target?.Id),
    };
  }
  const crossZoneOf = (
    attributes: readonly { Key?: string | undefined; Value?: string | undefined }[],
  ): string | undefined => attributes.find((x) => x.Key === 'load_balancing.cross_zone.enabled')?.Value;
  const tagLines = (tags: readonly { Key?: string | undefined; Value?: string | undefined }[]): string[] =>
    tags.map((t) => `${t.Key ?? ''}=${t.Value ?? ''}`);

  it('refuses, naming it, every annotation a kind does not take', async () => {
    for (const kind of ['classic', 'nlb'] as const) {
      const lb = provider(kind);
      for (const rule of ANNOTATIONS.filter((r) => r[kind].does === 'refused')) {
        const annotation = `${A}${rule.name}`;
        const svc: V1Service = {
          metadata: {
            name: 'refused',
            namespace: 'default',
            uid: `0ef05ed0-0000-1111-2222-${kind.padEnd(12, '0')}`,
            annotations: { [annotation]: 'true' },
          },
          spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP', nodePort: 30481 }] },
        };
        await assert.rejects(
          lb.ensureLoadBalancer('kubernetes', svc, nodes()),
          { name: 'ServiceSettingError', setting: annotation },
          `${kind}: ${annotation}`,
        );
      }
    }
  });

  it('answers every annotation that does nothing on a kind, and an unknown one, with a Warning naming it', async () => {
    const values: Record<string, string> = {
      'proxy-protocol': '*',
      'backend-protocol': 'http',
      'connection-idle-timeout': '120',
      'connection-draining-enabled': 'true',
      'connection-draining-timeout': '30',
      'access-log-emit-interval': '5',
      'eip-allocations': 'eipalloc-0123456789abcdef0',
      'private-ipv4-addresses': '10.0.0.10',
    };
    for (const kind of ['classic', 'nlb'] as const) {
      const idle = ANNOTATIONS.filter((r) => r[kind].does === 'not-applicable').map((r) => r.name);
      assert.ok(idle.length > 0);
      const annotations = Object.fromEntries(idle.map((name) => [`${A}${name}`, values[name] ?? '']));
      const unknown = `${A}no-such-setting`;
      const svc = await created({ ...annotations, [unknown]: 'x', [`${A}internal`]: 'false' });
      const lb = provider(kind);
      await lb.ensureLoadBalancer('kubernetes', svc, nodes());
      const said = await warnings(svc);
      for (const annotation of [...Object.keys(annotations), unknown])
        assert.ok(
          said.some((m) => m.startsWith(`${annotation}: `)),
          `${kind}: a Warning for ${annotation} (${said.join(' | ')})`,
        );
      assert.equal(said.length, idle.length + 1, `${kind}: no Warning for an honoured annotation`);
      await lb.ensureLoadBalancerDeleted('kubernetes', svc);
      await core.deleteNamespacedService({ namespace: 'default', name: svc.metadata?.name ?? '' });
    }
  });

  it('answers a port without a nodePort and a Service without IPv4 with a Warning naming the field, on each kind', async () => {
    for (const kind of ['classic', 'nlb'] as const) {
      // allocateLoadBalancerNodePorts: false, one port given a nodePort and one without: the latter gets no listener.
      const svc = await withFreeNodePort((nodePort) =>
        core.createNamespacedService({
          namespace: 'default',
          body: {
            metadata: { name: uniqueName(`fields-${kind}`) },
            spec: {
              type: 'LoadBalancer',
              allocateLoadBalancerNodePorts: false,
              ports: [
                { name: 'web', port: 80, protocol: 'TCP', nodePort },
                { name: 'admin', port: 8080, protocol: 'TCP' },
              ],
            },
          },
        }),
      );
      const lb = provider(kind);
      await lb.ensureLoadBalancer('kubernetes', svc, nodes());
      const portSaid = await warnings(svc, 'FieldNotApplied');
      assert.equal(portSaid.length, 1, `${kind}: one Warning (${portSaid.join(' | ')})`);
      assert.match(portSaid[0] ?? '', /^spec\.ports\[admin\]: port 8080 has no nodePort/);
      // The run's cluster is IPv4 only: the IPv6-only Service is this one as a dual-stack cluster would hold it.
      const ipv6 = { ...svc, spec: { ...svc.spec, ipFamilies: ['IPv6'], ports: (svc.spec?.ports ?? []).slice(0, 1) } };
      await lb.ensureLoadBalancer('kubernetes', ipv6, nodes());
      const familySaid = (await warnings(svc, 'FieldNotApplied')).filter((m) => !portSaid.includes(m));
      assert.equal(familySaid.length, 1, `${kind}: one more Warning (${familySaid.join(' | ')})`);
      assert.match(familySaid[0] ?? '', /^spec\.ipFamilies: IPv6: the load balancer reaches the nodes over IPv4/);
      assert.deepEqual(await warnings(svc), [], `${kind}: no annotation Warning`);
      await lb.ensureLoadBalancerDeleted('kubernetes', svc);
      await core.deleteNamespacedService({ namespace: 'default', name: svc.metadata?.name ?? '' });
    }
  });

  it('honours the NLB annotations: cross-zone, health check, target node labels, tags, subnets', async () => {
    const lb = provider('nlb');
    const subnet = world.publicSubnets[1]?.id ?? '';
    const svc = await created({
      [`${A}type`]: 'nlb',
      [`${A}cross-zone-load-balancing-enabled`]: 'true',
      [`${A}healthcheck-protocol`]: 'http',
      [`${A}healthcheck-port`]: '10256',
      [`${A}healthcheck-path`]: '/ready',
      [`${A}healthcheck-interval`]: '10',
      [`${A}healthcheck-timeout`]: '5',
      [`${A}healthcheck-healthy-threshold`]: '4',
      [`${A}healthcheck-unhealthy-threshold`]: '4',
      [`${A}target-node-labels`]: 'role=edge',
      [`${A}additional-resource-tags`]: 'team=edge',
      [`${A}subnets`]: subnet,
    });
    await lb.ensureLoadBalancer('kubernetes', svc, nodes());
    const made = await nlbState(lbName(svc));
    assert.deepEqual(made.subnets, [subnet]);
    assert.equal(made.crossZone, 'true');
    assert.deepEqual(made.health, ['HTTP', '10256', '/ready', 10, 4, 4]);
    assert.deepEqual(made.targets, [instances[0]?.instanceId], 'only the node labelled role=edge');
    assert.ok(made.tags.includes('team=edge'), made.tags.join());
    assert.deepEqual(await warnings(svc), [], 'nothing unapplied');
    await lb.ensureLoadBalancerDeleted('kubernetes', svc);
    await core.deleteNamespacedService({ namespace: 'default', name: svc.metadata?.name ?? '' });
  });

  it('honours the Classic health check protocol, port and path, target node labels and subnets', async () => {
    const lb = provider('classic');
    const subnet = world.publicSubnets[1]?.id ?? '';
    const svc = await created({
      [`${A}healthcheck-protocol`]: 'http',
      [`${A}healthcheck-port`]: '10256',
      [`${A}healthcheck-path`]: '/ready',
      [`${A}target-node-labels`]: 'role=edge',
      [`${A}subnets`]: subnet,
    });
    await lb.ensureLoadBalancer('kubernetes', svc, nodes());
    const made = (await elb.send(new DescribeClassicCommand({ LoadBalancerNames: [lbName(svc)] })))
      .LoadBalancerDescriptions?.[0];
    assert.equal(made?.HealthCheck?.Target, 'HTTP:10256/ready');
    assert.deepEqual(made.Subnets, [subnet]);
    assert.deepEqual(
      made.Instances?.map((i) => i.InstanceId),
      [instances[0]?.instanceId],
      'only the node labelled role=edge',
    );
    assert.deepEqual(await warnings(svc), [], 'nothing unapplied');
    await lb.ensureLoadBalancerDeleted('kubernetes', svc);
    await core.deleteNamespacedService({ namespace: 'default', name: svc.metadata?.name ?? '' });
  });
});

// `create` with a node port of the default range that no other Service of the shared API server
// holds: a random one, another when the API server answers that it is allocated.
async function withFreeNodePort<T>(create: (nodePort: number) => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt += 1) {
    const nodePort = 30000 + Math.floor(Math.random() * 2768);
    try {
      return await create(nodePort);
    } catch (error) {
      const taken = /provided port is already allocated/.test((error as Error).message);
      if (!taken || attempt >= 10) throw error;
    }
  }
}
