// Classic ELBs of the aws provider against the AWS emulator (moto): what cloud-provider-aws makes
// for a Service without the aws-load-balancer-type annotation, made the same way, adopted as it is,
// kept in step with the nodes and removed with everything cirrus added. Every AWS call passes
// through the emulator's call counter (tools/aws-emulator/counter.ts), which holds an ensure of an
// unchanged Service to no mutating call.

import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import {
  AuthorizeSecurityGroupIngressCommand,
  DescribeSecurityGroupsCommand,
  type IpPermission,
  type SecurityGroup,
} from '@aws-sdk/client-ec2';
import {
  CreateLoadBalancerCommand,
  DescribeLoadBalancerAttributesCommand,
  DescribeLoadBalancersCommand,
  DescribeTagsCommand,
  ElasticLoadBalancingClient,
  type LoadBalancerAttributes,
  type LoadBalancerDescription,
} from '@aws-sdk/client-elastic-load-balancing';
import { DescribeLoadBalancersCommand as DescribeNlbsCommand } from '@aws-sdk/client-elastic-load-balancing-v2';
import type { V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import pino from 'pino';
import { createAwsProvider } from '../../providers/aws/index.ts';
import type { LoadBalancer } from '../../shared/cloud/provider.ts';
import { callsBetween, isMutating, type CallCounter } from '../../tools/aws-emulator/counter.ts';
import {
  awsEmulatorSkip,
  makeUpstreamClassicElb,
  type AwsWorld,
  type WorldInstance,
  countedWorld,
  nodeOfInstance,
  upstreamLoadBalancerName,
} from '../harness/aws.ts';

const A = 'service.beta.kubernetes.io/aws-load-balancer-';
let uidCounter = 0;

function service(name: string, annotations: Record<string, string> = {}, ranges?: string[]): V1Service {
  uidCounter += 1;
  const uid = `c1a55${String(uidCounter).padStart(3, '0')}-0000-1111-2222-${name.padEnd(12, '0').slice(0, 12)}`;
  return serviceWithUid(uid, name, annotations, ranges);
}

/** The same Service (name, UID) with other annotations. */
function changed(svc: V1Service, annotations: Record<string, string>): V1Service {
  return serviceWithUid(svc.metadata?.uid ?? '', svc.metadata?.name ?? '', annotations);
}

function serviceWithUid(uid: string, name: string, annotations: Record<string, string>, ranges?: string[]): V1Service {
  return {
    metadata: { name, namespace: 'default', uid, annotations },
    spec: {
      type: 'LoadBalancer',
      ports: [
        { name: 'http', port: 80, protocol: 'TCP', nodePort: 30080 },
        { name: 'https', port: 443, protocol: 'TCP', nodePort: 30443 },
      ],
      ...(ranges === undefined ? {} : { loadBalancerSourceRanges: ranges }),
    },
  };
}

const nameOf = upstreamLoadBalancerName;
const nodeOf = nodeOfInstance;

describe('aws provider: Classic ELBs against the emulator', { skip: awsEmulatorSkip }, () => {
  const counted = countedWorld('aws-classic');
  const { instances } = counted;
  let world: AwsWorld;
  let counter: CallCounter;
  let elb: ElasticLoadBalancingClient;
  before(() => {
    ({ world, counter, elb } = counted);
  });

  const provider = (extra: Record<string, string> = {}): LoadBalancer => {
    const lb = createAwsProvider({
      config: world.cloudConfig({ DisableSecurityGroupIngress: 'false', DefaultLoadBalancerType: 'classic', ...extra }),
      configPath: 'cloud.conf',
      signal: new AbortController().signal,
      log: pino({ level: 'silent' }),
      kubeConfig: undefined,
    }).loadBalancer();
    assert.ok(lb, 'the aws provider has a LoadBalancer');
    return lb;
  };
  const nodes = (...which: number[]): V1Node[] => which.map((i) => nodeOf(instances[i] as WorldInstance));
  const instanceId = (i: number): string => (instances[i] as WorldInstance).instanceId;

  /** The mutating calls (by `service:Operation`) that `work` made. */
  async function mutations(work: () => Promise<unknown>): Promise<Record<string, number>> {
    const before = counter.counts();
    await work();
    const delta = callsBetween(counter.counts(), before);
    return Object.fromEntries(Object.entries(delta).filter(([key]) => isMutating(key.split(':')[1] ?? '')));
  }

  async function describeClassic(name: string): Promise<LoadBalancerDescription | undefined> {
    const out = await elb.send(new DescribeLoadBalancersCommand({ LoadBalancerNames: [name] })).catch(() => undefined);
    return out?.LoadBalancerDescriptions?.[0];
  }

  const listenersOf = (lb: LoadBalancerDescription) =>
    (lb.ListenerDescriptions ?? []).map((d) => ({
      protocol: d.Listener?.Protocol,
      port: d.Listener?.LoadBalancerPort,
      cert: d.Listener?.SSLCertificateId,
      policies: d.PolicyNames,
    }));

  async function tagsOf(name: string): Promise<string[]> {
    const out = await elb.send(new DescribeTagsCommand({ LoadBalancerNames: [name] }));
    return (out.TagDescriptions?.[0]?.Tags ?? []).map((t) => `${t.Key ?? ''}=${t.Value ?? ''}`).sort();
  }

  async function attributesOf(name: string): Promise<LoadBalancerAttributes> {
    const out = await elb.send(new DescribeLoadBalancerAttributesCommand({ LoadBalancerName: name }));
    return out.LoadBalancerAttributes ?? {};
  }

  async function group(name: string): Promise<SecurityGroup | undefined> {
    const out = await world.ec2.send(
      new DescribeSecurityGroupsCommand({
        Filters: [
          { Name: 'group-name', Values: [name] },
          { Name: 'vpc-id', Values: [world.vpcId] },
        ],
      }),
    );
    return out.SecurityGroups?.[0];
  }

  /** A group's ingress as sorted `protocol from-to source` lines. */
  const rulesOf = (g: SecurityGroup | undefined): string[] =>
    (g?.IpPermissions ?? [])
      .flatMap((p: IpPermission) => [
        ...(p.IpRanges ?? []).map((r) => `${p.IpProtocol} ${p.FromPort}-${p.ToPort} ${r.CidrIp}`),
        ...(p.UserIdGroupPairs ?? []).map((u) => `${p.IpProtocol} ${p.FromPort ?? ''}-${p.ToPort ?? ''} ${u.GroupId}`),
      ])
      .sort();

  async function nodeGroupRules(): Promise<string[]> {
    const out = await world.ec2.send(new DescribeSecurityGroupsCommand({ GroupIds: [world.securityGroupId] }));
    return rulesOf(out.SecurityGroups?.[0]);
  }

  it('makes a Classic ELB as upstream does for a Service without the type annotation, and an unchanged ensure costs no mutating call', async () => {
    const lb = provider();
    const svc = service('plain');
    const status = await lb.ensureLoadBalancer('kubernetes', svc, nodes(0, 1));
    const made = await describeClassic(nameOf(svc));
    assert.ok(made, `a Classic ELB named ${nameOf(svc)}`);
    assert.equal(status.ingress?.[0]?.hostname, made.DNSName);
    assert.deepEqual(
      (made.ListenerDescriptions ?? []).map((d) => [
        d.Listener?.Protocol,
        d.Listener?.LoadBalancerPort,
        d.Listener?.InstancePort,
      ]),
      [
        ['TCP', 80, 30080],
        ['TCP', 443, 30443],
      ],
    );
    assert.deepEqual(made.HealthCheck, {
      Target: 'TCP:30080',
      Interval: 10,
      Timeout: 5,
      HealthyThreshold: 2,
      UnhealthyThreshold: 6,
    });
    assert.deepEqual((made.Instances ?? []).map((i) => i.InstanceId).sort(), [instanceId(0), instanceId(1)].sort());
    assert.equal(made.Scheme, 'internet-facing');
    assert.deepEqual([...(made.Subnets ?? [])].sort(), world.publicSubnets.map((s) => s.id).sort());
    assert.deepEqual(await tagsOf(nameOf(svc)), [
      `${world.clusterTagKey}=owned`,
      'kubernetes.io/service-name=default/plain',
    ]);
    const own = await group(`k8s-elb-${nameOf(svc)}`);
    assert.ok(own?.GroupId, 'the load balancer has a security group of its own');
    assert.deepEqual(made.SecurityGroups, [own.GroupId]);
    assert.deepEqual(rulesOf(own), ['icmp 3-4 0.0.0.0/0', 'tcp 443-443 0.0.0.0/0', 'tcp 80-80 0.0.0.0/0']);
    assert.ok((await nodeGroupRules()).includes(`-1 - ${own.GroupId}`), 'the nodes admit the load balancer');

    assert.deepEqual(await mutations(() => lb.ensureLoadBalancer('kubernetes', svc, nodes(0, 1))), {});
    assert.deepEqual(await mutations(() => provider().ensureLoadBalancer('kubernetes', svc, nodes(0, 1))), {});
    assert.deepEqual(await lb.getLoadBalancer('kubernetes', svc), status);
  });

  it('applies the Classic annotations: PROXY protocol, SSL listeners, idle timeout, draining, cross-zone, access logs, health check, tags, internal', async () => {
    const lb = provider();
    const svc = service('annotated', {
      [`${A}proxy-protocol`]: '*',
      [`${A}ssl-cert`]: 'arn:aws:iam::123456789012:server-certificate/web',
      [`${A}ssl-ports`]: 'https',
      [`${A}backend-protocol`]: 'ssl',
      [`${A}ssl-negotiation-policy`]: 'ELBSecurityPolicy-TLS-1-2-2017-01',
      [`${A}connection-idle-timeout`]: '120',
      [`${A}connection-draining-enabled`]: 'true',
      [`${A}connection-draining-timeout`]: '30',
      [`${A}cross-zone-load-balancing-enabled`]: 'true',
      [`${A}access-log-enabled`]: 'true',
      [`${A}access-log-emit-interval`]: '5',
      [`${A}access-log-s3-bucket-name`]: 'logs',
      [`${A}access-log-s3-bucket-prefix`]: 'elb',
      [`${A}healthcheck-healthy-threshold`]: '3',
      [`${A}healthcheck-unhealthy-threshold`]: '4',
      [`${A}healthcheck-interval`]: '20',
      [`${A}healthcheck-timeout`]: '6',
      [`${A}additional-resource-tags`]: 'team=web,cost=1',
      [`${A}internal`]: 'true',
    });
    await lb.ensureLoadBalancer('kubernetes', svc, nodes(0));
    const made = await describeClassic(nameOf(svc));
    assert.ok(made);
    assert.equal(made.Scheme, 'internal');
    // The NLB path's choice for an internal load balancer: the internal-elb subnet where a zone has one.
    assert.ok(made.Subnets?.includes(world.privateSubnets[0]?.id ?? ''), String(made.Subnets));
    assert.deepEqual(listenersOf(made), [
      { protocol: 'TCP', port: 80, cert: undefined, policies: [] },
      {
        protocol: 'SSL',
        port: 443,
        cert: 'arn:aws:iam::123456789012:server-certificate/web',
        policies: ['k8s-SSLNegotiationPolicy-ELBSecurityPolicy-TLS-1-2-2017-01'],
      },
    ]);
    assert.deepEqual(
      (made.BackendServerDescriptions ?? []).map((b) => [b.InstancePort, b.PolicyNames]),
      [
        [30080, ['k8s-proxyprotocol-enabled']],
        [30443, ['k8s-proxyprotocol-enabled']],
      ],
    );
    assert.deepEqual(made.HealthCheck, {
      Target: 'SSL:30080',
      Interval: 20,
      Timeout: 6,
      HealthyThreshold: 3,
      UnhealthyThreshold: 4,
    });
    const attributes = await attributesOf(nameOf(svc));
    assert.deepEqual(attributes.CrossZoneLoadBalancing, { Enabled: true });
    assert.deepEqual(attributes.ConnectionSettings, { IdleTimeout: 120 });
    assert.deepEqual(attributes.ConnectionDraining, { Enabled: true, Timeout: 30 });
    assert.deepEqual(attributes.AccessLog, {
      Enabled: true,
      EmitInterval: 5,
      S3BucketName: 'logs',
      S3BucketPrefix: 'elb',
    });
    assert.ok((await tagsOf(nameOf(svc))).includes('team=web'));
    assert.deepEqual(await mutations(() => lb.ensureLoadBalancer('kubernetes', svc, nodes(0))), {});

    const rest = Object.entries(svc.metadata?.annotations ?? {}).filter(([key]) => key !== `${A}proxy-protocol`);
    const off = changed(svc, { ...Object.fromEntries(rest), [`${A}connection-idle-timeout`]: '300' });
    assert.deepEqual(await mutations(() => lb.ensureLoadBalancer('kubernetes', off, nodes(0))), {
      'elasticloadbalancing:SetLoadBalancerPoliciesForBackendServer': 2,
      'elasticloadbalancing:ModifyLoadBalancerAttributes': 1,
    });
    assert.deepEqual((await describeClassic(nameOf(svc)))?.BackendServerDescriptions, []);
  });

  it('admits the Service’s source ranges on its ports, and only them, in the load balancer’s group', async () => {
    const lb = provider();
    const svc = service('ranges', {}, ['10.1.2.3/16', '192.168.7.0/24']);
    await lb.ensureLoadBalancer('kubernetes', svc, nodes(0));
    const name = `k8s-elb-${nameOf(svc)}`;
    assert.deepEqual(rulesOf(await group(name)), [
      'icmp 3-4 10.1.0.0/16',
      'icmp 3-4 192.168.7.0/24',
      'tcp 443-443 10.1.0.0/16',
      'tcp 443-443 192.168.7.0/24',
      'tcp 80-80 10.1.0.0/16',
      'tcp 80-80 192.168.7.0/24',
    ]);
    const narrowed = changed(svc, { 'service.beta.kubernetes.io/load-balancer-source-ranges': '172.16.0.0/12' });
    await lb.ensureLoadBalancer('kubernetes', narrowed, nodes(0));
    assert.deepEqual(rulesOf(await group(name)), [
      'icmp 3-4 172.16.0.0/12',
      'tcp 443-443 172.16.0.0/12',
      'tcp 80-80 172.16.0.0/12',
    ]);
    await assert.rejects(
      lb.ensureLoadBalancer('kubernetes', service('bad-range', {}, ['10.0.0.0/33']), nodes(0)),
      /spec\.loadBalancerSourceRanges: "10\.0\.0\.0\/33" is not a CIDR/,
    );
  });

  it('adopts a Classic ELB that cloud-provider-aws made: same DNS name, no mutating call', async () => {
    const svc = service('adopted');
    const name = nameOf(svc);
    const dnsName = await makeUpstreamClassicElb(world, elb, {
      name,
      serviceName: 'default/adopted',
      groupDescription: `Security group for Kubernetes ELB ${name} (default/adopted)`,
      ports: [
        { port: 80, nodePort: 30080 },
        { port: 443, nodePort: 30443 },
      ],
      instanceIds: [instanceId(0), instanceId(1)],
    });
    const lb = provider();
    let status: V1LoadBalancerStatus | undefined;
    const made = await mutations(async () => {
      status = await lb.ensureLoadBalancer('kubernetes', svc, nodes(0, 1));
    });
    assert.deepEqual(made, {}, 'adopted as it is');
    assert.equal(status?.ingress?.[0]?.hostname, dnsName);
    assert.deepEqual(await mutations(() => lb.updateLoadBalancer('kubernetes', svc, nodes(0, 1))), {});
  });

  it('registers and deregisters instances as the node set changes, and only that', async () => {
    const lb = provider();
    const svc = service('nodes');
    await lb.ensureLoadBalancer('kubernetes', svc, nodes(0));
    const registered = async (): Promise<string[]> =>
      ((await describeClassic(nameOf(svc)))?.Instances ?? []).map((i) => i.InstanceId ?? '').sort();
    assert.deepEqual(await mutations(() => lb.updateLoadBalancer('kubernetes', svc, nodes(0, 2))), {
      'elasticloadbalancing:RegisterInstancesWithLoadBalancer': 1,
    });
    assert.deepEqual(await registered(), [instanceId(0), instanceId(2)].sort());
    assert.deepEqual(await mutations(() => lb.updateLoadBalancer('kubernetes', svc, nodes(2))), {
      'elasticloadbalancing:DeregisterInstancesFromLoadBalancer': 1,
    });
    assert.deepEqual(await registered(), [instanceId(2)]);
  });

  it('deletes the load balancer, its group and the nodes’ rule, and nothing else', async () => {
    const lb = provider();
    const svc = service('deleted');
    await lb.ensureLoadBalancer('kubernetes', svc, nodes(0, 1));
    const own = await group(`k8s-elb-${nameOf(svc)}`);
    assert.ok(own?.GroupId);
    const foreign = { IpProtocol: 'tcp', FromPort: 22, ToPort: 22, IpRanges: [{ CidrIp: '10.9.9.0/24' }] };
    await world.ec2.send(
      new AuthorizeSecurityGroupIngressCommand({ GroupId: world.securityGroupId, IpPermissions: [foreign] }),
    );
    const rulesBefore = await nodeGroupRules();
    assert.ok(rulesBefore.includes(`-1 - ${own.GroupId}`));
    await lb.ensureLoadBalancerDeleted('kubernetes', svc);
    assert.equal(await describeClassic(nameOf(svc)), undefined, 'the load balancer is gone');
    assert.equal(await group(`k8s-elb-${nameOf(svc)}`), undefined, 'its group is gone');
    assert.deepEqual(
      await nodeGroupRules(),
      rulesBefore.filter((r) => r !== `-1 - ${own.GroupId}`),
      'only the rule naming the load balancer’s group left the nodes’ group',
    );
    assert.deepEqual(await mutations(() => lb.ensureLoadBalancerDeleted('kubernetes', svc)), {}, 'deleted is done');
  });

  it('leaves a Classic ELB of the Service’s name that is not the cluster’s alone', async () => {
    const svc = service('foreign');
    await elb.send(
      new CreateLoadBalancerCommand({
        LoadBalancerName: nameOf(svc),
        Listeners: [{ Protocol: 'tcp', LoadBalancerPort: 80, InstanceProtocol: 'tcp', InstancePort: 30080 }],
        Subnets: [world.publicSubnets[0]?.id ?? ''],
        Tags: [{ Key: 'owner', Value: 'someone-else' }],
      }),
    );
    const lb = provider();
    await assert.rejects(
      lb.ensureLoadBalancer('kubernetes', svc, nodes(0)),
      /is not tagged .*cirrus will not take it over/,
    );
    assert.equal(await lb.getLoadBalancer('kubernetes', svc), undefined);
    assert.deepEqual(await mutations(() => lb.ensureLoadBalancerDeleted('kubernetes', svc)), {});
    assert.ok(await describeClassic(nameOf(svc)), 'still there');
  });

  it('keeps each Service’s kind: an NLB stays an NLB, a Classic ELB is not turned into one, the default is the cloud-config’s', async () => {
    const ingressOff = { DisableSecurityGroupIngress: 'true' };
    const nlbDefault = provider({ ...ingressOff, DefaultLoadBalancerType: 'nlb' });
    const classicDefault = provider(ingressOff);
    const madeAsNlb = service('was-nlb');
    await nlbDefault.ensureLoadBalancer('kubernetes', madeAsNlb, nodes(0));
    const nlb = (await world.elbv2.send(new DescribeNlbsCommand({ Names: [nameOf(madeAsNlb)] }))).LoadBalancers?.[0];
    assert.equal(nlb?.Type, 'network');
    const status = await classicDefault.ensureLoadBalancer('kubernetes', madeAsNlb, nodes(0, 1));
    assert.equal(status.ingress?.[0]?.hostname, nlb.DNSName, 'still its NLB');
    assert.equal(await describeClassic(nameOf(madeAsNlb)), undefined, 'no Classic ELB made for it');

    const classic = service('stays-classic');
    await classicDefault.ensureLoadBalancer('kubernetes', classic, nodes(0));
    await assert.rejects(
      nlbDefault
        .ensureLoadBalancer('kubernetes', classic, nodes(0))
        .then(() => nlbDefault.ensureLoadBalancer('kubernetes', changed(classic, { [`${A}type`]: 'nlb' }), nodes(0))),
      /"nlb" on a Service whose load balancer .* is a Classic ELB/,
    );
    await nlbDefault.ensureLoadBalancerDeleted('kubernetes', madeAsNlb);
    await classicDefault.ensureLoadBalancerDeleted('kubernetes', classic);
  });
});
