// TLS listeners on a Network Load Balancer, against the emulator: made as cloud-provider-aws makes
// them (pkg/providers/v1/aws.go EnsureLoadBalancer, aws_loadbalancer.go ensureLoadBalancerv2 and
// createListenerV2), a changed certificate or policy modified in place, an unchanged Service left
// without a mutating call (counted at the emulator's door by tools/aws-emulator/counter.ts), and a
// TLS load balancer made the way upstream makes it adopted as it is. The emulator's ACM issues the
// certificates (it checks that a listener's certificate exists).

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { after, before, describe, it } from 'node:test';
import {
  CreateListenerCommand,
  CreateLoadBalancerCommand,
  CreateTargetGroupCommand,
  DescribeListenersCommand,
  DescribeLoadBalancersCommand,
  DescribeTargetGroupsCommand,
  RegisterTargetsCommand,
  type Listener,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { CoreV1Api, type KubeConfig, type V1Node, type V1Service } from '@kubernetes/client-node';
import pino from 'pino';
import { createAwsProvider } from '../../providers/aws/index.ts';
import type { LoadBalancer } from '../../shared/cloud/provider.ts';
import {
  callsBetween,
  isMutating,
  startCallCounter,
  type CallCounter,
  type CallCounts,
} from '../../tools/aws-emulator/counter.ts';
import { awsEmulatorSkip, awsTestEnv, awsWorld, type AwsWorld, type WorldInstance } from '../harness/aws.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';
import { requestCertificate } from '../migration/cluster.ts';

const A = 'service.beta.kubernetes.io/aws-load-balancer-';
const POLICY = 'ELBSecurityPolicy-TLS-1-2-2017-01';

/** The load balancing calls that change something, by operation (`ModifyListener: 1`). */
function elbMutations(calls: CallCounts): Record<string, number> {
  const out: Record<string, number> = {};
  for (const [key, n] of Object.entries(calls)) {
    const [service = '', operation = '', error] = key.split(':');
    if (service === 'elasticloadbalancing' && error === undefined && isMutating(operation)) out[operation] = n;
  }
  return out;
}

/** Upstream's target group name (aws_loadbalancer.go, buildTargetGroupName), written out here to hold the provider to it. */
function upstreamGroupName(
  clusterId: string,
  svc: V1Service,
  target: { readonly port: number; readonly nodePort: number; readonly protocol: string },
): string {
  const { namespace = '', name = '' } = svc.metadata ?? {};
  const { port, nodePort, protocol } = target;
  const hash = createHash('sha1');
  for (const part of [clusterId, namespace, name, port, nodePort, protocol, 'instance', 'TCP', 30])
    hash.update(String(part));
  const clean = (s: string): string => s.replace(/[^A-Za-z0-9]/g, '').slice(0, 8);
  return `k8s-${clean(namespace)}-${clean(name)}-${hash.digest('hex').slice(0, 10)}`;
}

describe(
  'aws provider: TLS listeners on a Network Load Balancer',
  { skip: awsEmulatorSkip || controlPlaneSkip },
  () => {
    let world: AwsWorld;
    let counter: CallCounter;
    let admin: KubeConfig;
    let core: CoreV1Api;
    let instances: WorldInstance[];
    let nodes: V1Node[];
    const certificates: string[] = [];

    before(async () => {
      world = await awsWorld('aws-nlb-tls');
      counter = await startCallCounter(world.endpoint);
      Object.assign(process.env, awsTestEnv({ endpoint: counter.endpoint, region: world.region }));
      admin = (await testCluster()).admin;
      core = admin.makeApiClient(CoreV1Api);
      instances = [await world.runInstance(), await world.runInstance({ az: world.publicSubnets[1]?.az ?? '' })];
      nodes = instances.map((i) => ({ metadata: { name: i.privateDnsName }, spec: { providerID: i.providerId } }));
      for (const domain of ['one.example.com', 'two.example.com'])
        certificates.push(await requestCertificate(world, domain));
    });
    after(async () => {
      await (counter as CallCounter | undefined)?.close();
      (world as AwsWorld | undefined)?.close();
    });

    const provider = (): LoadBalancer => {
      const lb = createAwsProvider({
        config: world.cloudConfig({ DefaultLoadBalancerType: 'nlb' }),
        configPath: 'cloud.conf',
        signal: new AbortController().signal,
        log: pino({ level: 'silent' }),
        kubeConfig: admin,
      }).loadBalancer();
      assert.ok(lb, 'the aws provider has a LoadBalancer');
      return lb;
    };
    const cert = (i: number): string => certificates[i] ?? assert.fail(`certificate ${i}`);
    /** An NLB Service with an `http` port 80 and an `https` port 443. */
    const service = (name: string, annotations: Record<string, string>, base = 31000): V1Service => ({
      metadata: {
        name,
        namespace: 'default',
        uid: `${name}-0000-1111-2222-333344445555`.slice(0, 36),
        annotations: { [`${A}type`]: 'nlb', ...annotations },
      },
      spec: {
        type: 'LoadBalancer',
        ports: [
          { name: 'http', port: 80, protocol: 'TCP', nodePort: base + 80 },
          { name: 'https', port: 443, protocol: 'TCP', nodePort: base + 443 },
        ],
      },
    });
    const lbName = (svc: V1Service): string => `a${(svc.metadata?.uid ?? '').replaceAll('-', '')}`.slice(0, 32);
    const listeners = async (svc: V1Service): Promise<Map<number, Listener>> => {
      const nlb = (await world.elbv2.send(new DescribeLoadBalancersCommand({ Names: [lbName(svc)] })))
        .LoadBalancers?.[0];
      const out = await world.elbv2.send(new DescribeListenersCommand({ LoadBalancerArn: nlb?.LoadBalancerArn }));
      return new Map((out.Listeners ?? []).map((l) => [l.Port ?? 0, l]));
    };
    const groups = async (svc: V1Service): Promise<string[]> => {
      const nlb = (await world.elbv2.send(new DescribeLoadBalancersCommand({ Names: [lbName(svc)] })))
        .LoadBalancers?.[0];
      const out = await world.elbv2.send(new DescribeTargetGroupsCommand({ LoadBalancerArn: nlb?.LoadBalancerArn }));
      return (out.TargetGroups ?? [])
        .map((g) => `${g.TargetGroupName ?? ''} ${g.Protocol ?? ''} ${g.Port ?? 0}`)
        .sort();
    };
    /** Ensures `svc`; the load balancing calls that changed something. */
    const ensure = async (svc: V1Service): Promise<Record<string, number>> => {
      const mark = counter.counts();
      await provider().ensureLoadBalancer('kubernetes', svc, nodes);
      return elbMutations(callsBetween(counter.counts(), mark));
    };

    it('makes TLS listeners on the ssl-ports with the certificate and policy, TCP on the others, TLS target groups for an ssl backend', async () => {
      const svc = service('tls-made', {
        [`${A}ssl-cert`]: cert(0),
        [`${A}ssl-ports`]: 'https',
        [`${A}ssl-negotiation-policy`]: POLICY,
        [`${A}backend-protocol`]: 'ssl',
      });
      await ensure(svc);
      const made = await listeners(svc);
      assert.equal(made.get(80)?.Protocol, 'TCP');
      assert.equal(made.get(80)?.Certificates, undefined);
      assert.equal(made.get(443)?.Protocol, 'TLS');
      assert.deepEqual(made.get(443)?.Certificates, [{ CertificateArn: cert(0) }]);
      assert.equal(made.get(443)?.SslPolicy, POLICY);
      assert.deepEqual(
        await groups(svc),
        [
          `${upstreamGroupName(world.clusterId, svc, { port: 80, nodePort: 31080, protocol: 'TCP' })} TCP 31080`,
          `${upstreamGroupName(world.clusterId, svc, { port: 443, nodePort: 31443, protocol: 'TLS' })} TLS 31443`,
        ].sort(),
        'upstream’s names, the protocol in the hash',
      );
      assert.deepEqual(await ensure(svc), {}, 'an unchanged Service costs no mutating call');
    });

    it('modifies a listener whose certificate or policy changed, and nothing else; unchanged, no mutating call', async () => {
      const first = service('tls-changed', { [`${A}ssl-cert`]: cert(0), [`${A}ssl-ports`]: '443' }, 32000);
      await ensure(first);
      const defaultPolicy = (await listeners(first)).get(443)?.SslPolicy;
      assert.ok(defaultPolicy, 'AWS gave the listener its default policy');
      assert.deepEqual(await ensure(first), {}, 'no policy named: the default one is kept, no call');

      const renewed = service('tls-changed', { [`${A}ssl-cert`]: cert(1), [`${A}ssl-ports`]: '443' }, 32000);
      assert.deepEqual(await ensure(renewed), { ModifyListener: 1 });
      let now = await listeners(renewed);
      assert.deepEqual(now.get(443)?.Certificates, [{ CertificateArn: cert(1) }]);
      assert.equal(now.get(443)?.SslPolicy, defaultPolicy, 'the policy is left as it was');
      assert.equal(now.get(80)?.Protocol, 'TCP');
      assert.deepEqual(await ensure(renewed), {});

      const annotations = { [`${A}ssl-cert`]: cert(1), [`${A}ssl-negotiation-policy`]: POLICY };
      const everyPort = service('tls-changed', annotations, 32000);
      assert.deepEqual(await ensure(everyPort), { ModifyListener: 2 }, 'port 80 becomes TLS, 443 gets the policy');
      now = await listeners(everyPort);
      for (const port of [80, 443]) {
        assert.equal(now.get(port)?.Protocol, 'TLS', `${port}`);
        assert.equal(now.get(port)?.SslPolicy, POLICY, `${port}`);
        assert.deepEqual(now.get(port)?.Certificates, [{ CertificateArn: cert(1) }], `${port}`);
      }
      assert.deepEqual(await ensure(everyPort), {});
    });

    it('adopts a TLS load balancer made as cloud-provider-aws makes it, with no mutating call', async () => {
      const svc = service('tls-adopted', { [`${A}ssl-cert`]: cert(0), [`${A}ssl-ports`]: '443,8443' }, 30000);
      const tags = [
        { Key: world.clusterTagKey, Value: 'owned' },
        { Key: 'kubernetes.io/service-name', Value: 'default/tls-adopted' },
      ];
      const made = await world.elbv2.send(
        new CreateLoadBalancerCommand({
          Name: lbName(svc),
          Type: 'network',
          Scheme: 'internet-facing',
          SubnetMappings: world.publicSubnets.map((s) => ({ SubnetId: s.id })),
          Tags: tags,
        }),
      );
      const arn = made.LoadBalancers?.[0]?.LoadBalancerArn;
      for (const [port, nodePort, protocol] of [
        [80, 30080, 'TCP'],
        [443, 30443, 'TLS'],
      ] as const) {
        const group = await world.elbv2.send(
          new CreateTargetGroupCommand({
            Name: upstreamGroupName(world.clusterId, svc, { port, nodePort, protocol: 'TCP' }),
            Protocol: 'TCP',
            Port: nodePort,
            VpcId: world.vpcId,
            TargetType: 'instance',
            HealthCheckProtocol: 'TCP',
            HealthCheckPort: 'traffic-port',
            HealthCheckIntervalSeconds: 30,
            HealthyThresholdCount: 3,
            UnhealthyThresholdCount: 3,
            Tags: tags,
          }),
        );
        const groupArn = group.TargetGroups?.[0]?.TargetGroupArn;
        await world.elbv2.send(
          new RegisterTargetsCommand({
            TargetGroupArn: groupArn,
            Targets: instances.map((i) => ({ Id: i.instanceId, Port: nodePort })),
          }),
        );
        // As createListenerV2: a TLS listener with the certificate and, without the annotation, no policy.
        await world.elbv2.send(
          new CreateListenerCommand({
            LoadBalancerArn: arn,
            Port: port,
            Protocol: protocol,
            ...(protocol === 'TLS' ? { Certificates: [{ CertificateArn: cert(0) }] } : {}),
            DefaultActions: [{ Type: 'forward', TargetGroupArn: groupArn }],
            Tags: tags,
          }),
        );
      }
      const before = await groups(svc);
      assert.deepEqual(await ensure(svc), {});
      assert.deepEqual(await groups(svc), before);
      assert.equal((await listeners(svc)).get(443)?.Protocol, 'TLS');
    });

    it('answers TLS annotations that have no effect with a Warning naming each, and refuses a certificate that is not an ARN', async () => {
      const body = service(uniqueName('tls-idle'), {
        [`${A}ssl-cert`]: cert(0),
        [`${A}ssl-ports`]: '443,admin',
        [`${A}backend-protocol`]: 'SSL',
      });
      delete body.metadata?.uid;
      for (const p of body.spec?.ports ?? []) delete p.nodePort;
      const svc = await core.createNamespacedService({ namespace: 'default', body });
      const lb = provider();
      await lb.ensureLoadBalancer('kubernetes', svc, nodes);
      const events = await core.listNamespacedEvent({
        namespace: 'default',
        fieldSelector: `involvedObject.name=${svc.metadata?.name ?? ''}`,
      });
      const said = events.items.filter((e) => e.reason === 'AnnotationNotApplied').map((e) => e.message ?? '');
      assert.deepEqual(
        said.map((m) => m.split(': ')[0]).sort(),
        [`${A}backend-protocol`, `${A}ssl-ports`],
        said.join(' | '),
      );
      assert.ok(
        said.some((m) => m.includes('"admin" names no TCP port')),
        said.join(' | '),
      );
      assert.equal((await listeners(svc)).get(443)?.Protocol, 'TLS');
      assert.equal((await groups(svc)).filter((g) => g.includes(' TLS ')).length, 0, '"SSL" is not upstream’s "ssl"');
      await lb.ensureLoadBalancerDeleted('kubernetes', svc);
      await core.deleteNamespacedService({ namespace: 'default', name: svc.metadata?.name ?? '' });

      const mark = counter.counts();
      await assert.rejects(
        provider().ensureLoadBalancer('kubernetes', service('tls-bad', { [`${A}ssl-cert`]: 'my-cert' }), nodes),
        {
          name: 'ServiceSettingError',
          setting: `${A}ssl-cert`,
          message: /"my-cert" is not an ACM or IAM certificate ARN/,
        },
      );
      assert.deepEqual(elbMutations(callsBetween(counter.counts(), mark)), {}, 'nothing made');
    });
  },
);
