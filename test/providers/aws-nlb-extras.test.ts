// The NLB features beyond listeners and targets, against the emulator (moto, with the patches of
// tools/aws-emulator/moto-server.py) and the run's API server (the Warning Events are real): target
// group attributes, Elastic IPs and private addresses, access logs. Each is shown applied at
// create, changed, left alone when the Service is unchanged (0 mutating calls, counted by the
// proxy of tools/aws-emulator/counter.ts in front of the emulator), and refused where it must be.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { AllocateAddressCommand } from '@aws-sdk/client-ec2';
import {
  DescribeLoadBalancerAttributesCommand,
  DescribeLoadBalancersCommand,
  DescribeTargetGroupAttributesCommand,
  DescribeTargetGroupsCommand,
  type LoadBalancer as Nlb,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { CoreV1Api, type KubeConfig, type V1Node, type V1Service, type V1ServicePort } from '@kubernetes/client-node';
import pino from 'pino';
import { ANNOTATION_PREFIX as A } from '../../providers/aws/annotations.ts';
import { createAwsProvider } from '../../providers/aws/index.ts';
import type { LoadBalancer } from '../../shared/cloud/provider.ts';
import { callsBetween, isMutating, startCallCounter, type CallCounter } from '../../tools/aws-emulator/counter.ts';
import { awsEmulatorSkip, awsTestEnv, awsWorld, type AwsWorld, type WorldInstance } from '../harness/aws.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';

describe(
  'aws provider: NLB target group attributes, addresses and access logs',
  {
    skip: awsEmulatorSkip || controlPlaneSkip,
  },
  () => {
    let world: AwsWorld;
    let counter: CallCounter;
    let admin: KubeConfig;
    let core: CoreV1Api;
    let lb: LoadBalancer;
    const instances: WorldInstance[] = [];

    before(async () => {
      world = await awsWorld('aws-nlb-extras');
      counter = await startCallCounter(world.endpoint);
      // The provider's calls go through the counter; the test reads the emulator directly.
      Object.assign(process.env, awsTestEnv({ endpoint: counter.endpoint, region: world.region }));
      admin = (await testCluster()).admin;
      core = admin.makeApiClient(CoreV1Api);
      const provider = createAwsProvider({
        config: world.cloudConfig({ DefaultLoadBalancerType: 'nlb' }),
        configPath: 'cloud.conf',
        signal: new AbortController().signal,
        log: pino({ level: 'silent' }),
        kubeConfig: admin,
      }).loadBalancer();
      assert.ok(provider, 'the aws provider has a LoadBalancer');
      lb = provider;
      instances.push(await world.runInstance(), await world.runInstance({ az: world.publicSubnets[1]?.az ?? '' }));
    });
    after(async () => {
      (world as AwsWorld | undefined)?.close();
      await (counter as CallCounter | undefined)?.close();
    });

    const nodes = (): V1Node[] =>
      instances.map((i) => ({ metadata: { name: i.privateDnsName }, spec: { providerID: i.providerId } }));
    const tcp = (port: number): V1ServicePort => ({ name: `p${port}`, port, protocol: 'TCP' });
    /** A Service of the API server (nodePorts assigned, Events real). */
    const created = async (annotations: Record<string, string>, ports = [tcp(80)]): Promise<V1Service> =>
      core.createNamespacedService({
        namespace: 'default',
        body: { metadata: { name: uniqueName('extras'), annotations }, spec: { type: 'LoadBalancer', ports } },
      });
    const annotated = (svc: V1Service, annotations: Record<string, string | undefined>): V1Service => {
      const merged: Record<string, string> = { ...svc.metadata?.annotations };
      for (const [k, v] of Object.entries(annotations)) {
        if (v === undefined) Reflect.deleteProperty(merged, k);
        else merged[k] = v;
      }
      return { ...svc, metadata: { ...svc.metadata, annotations: merged } };
    };
    const lbName = (svc: V1Service): string => `a${(svc.metadata?.uid ?? '').replaceAll('-', '')}`.slice(0, 32);
    const find = async (svc: V1Service): Promise<Nlb | undefined> => {
      try {
        return (await world.elbv2.send(new DescribeLoadBalancersCommand({ Names: [lbName(svc)] }))).LoadBalancers?.[0];
      } catch {
        return undefined;
      }
    };
    const arnOf = async (svc: V1Service): Promise<string> => {
      const nlb = await find(svc);
      assert.ok(nlb?.LoadBalancerArn, `load balancer ${lbName(svc)} exists`);
      return nlb.LoadBalancerArn;
    };
    /** Mutating calls `work` sends, by operation. */
    const mutations = async (work: () => Promise<unknown>): Promise<Record<string, number>> => {
      const mark = counter.counts();
      await work();
      const delta = callsBetween(counter.counts(), mark);
      return Object.fromEntries(
        Object.entries(delta)
          .filter(([key]) => key.split(':').length === 2 && isMutating(key.split(':')[1] ?? ''))
          .map(([key, n]) => [key.split(':')[1] ?? '', n]),
      );
    };
    const ensure = (svc: V1Service) => lb.ensureLoadBalancer('kubernetes', svc, nodes());
    const groupAttributes = async (svc: V1Service): Promise<Record<string, string>[]> => {
      const groups = await world.elbv2.send(new DescribeTargetGroupsCommand({ LoadBalancerArn: await arnOf(svc) }));
      const out: Record<string, string>[] = [];
      for (const g of groups.TargetGroups ?? []) {
        const attrs = await world.elbv2.send(
          new DescribeTargetGroupAttributesCommand({ TargetGroupArn: g.TargetGroupArn }),
        );
        const all = Object.fromEntries((attrs.Attributes ?? []).map((x) => [x.Key ?? '', x.Value ?? '']));
        out.push({
          'preserve_client_ip.enabled': all['preserve_client_ip.enabled'] ?? '',
          'proxy_protocol_v2.enabled': all['proxy_protocol_v2.enabled'] ?? '',
        });
      }
      return out;
    };
    const lbAttributes = async (svc: V1Service): Promise<Record<string, string>> => {
      const out = await world.elbv2.send(
        new DescribeLoadBalancerAttributesCommand({ LoadBalancerArn: await arnOf(svc) }),
      );
      return Object.fromEntries((out.Attributes ?? []).map((x) => [x.Key ?? '', x.Value ?? '']));
    };
    const warnings = async (svc: V1Service): Promise<string[]> => {
      const events = await core.listNamespacedEvent({
        namespace: 'default',
        fieldSelector: `involvedObject.name=${svc.metadata?.name ?? ''}`,
      });
      return events.items.filter((e) => e.type === 'Warning').map((e) => e.message ?? '');
    };
    const remove = async (svc: V1Service): Promise<void> => {
      await lb.ensureLoadBalancerDeleted('kubernetes', svc);
      await core.deleteNamespacedService({ namespace: 'default', name: svc.metadata?.name ?? '' });
    };
    const allocate = async (): Promise<string> => {
      const out = await world.ec2.send(new AllocateAddressCommand({ Domain: 'vpc' }));
      assert.ok(out.AllocationId, 'the emulator allocated an Elastic IP');
      return out.AllocationId;
    };
    const addressesOf = (nlb: Nlb | undefined): string[] =>
      (nlb?.AvailabilityZones ?? []).map((z) =>
        (z.LoadBalancerAddresses ?? [])
          .map((x) => `${z.SubnetId ?? ''}=${x.AllocationId ?? x.PrivateIPv4Address ?? ''}`)
          .join(),
      );

    const TGA = `${A}target-group-attributes`;

    it('sets target group attributes on every target group, changes only what differs, leaves them when unchanged', async () => {
      let svc = await created({ [TGA]: 'preserve_client_ip.enabled=false,proxy_protocol_v2.enabled=true' }, [
        tcp(80),
        tcp(443),
      ]);
      await ensure(svc);
      const wanted = { 'preserve_client_ip.enabled': 'false', 'proxy_protocol_v2.enabled': 'true' };
      assert.deepEqual(await groupAttributes(svc), [wanted, wanted]);
      assert.deepEqual(await mutations(() => ensure(svc)), {}, 'an unchanged Service: no mutating call');
      svc = annotated(svc, { [TGA]: 'preserve_client_ip.enabled=false, proxy_protocol_v2.enabled=false' });
      assert.deepEqual(await mutations(() => ensure(svc)), { ModifyTargetGroupAttributes: 2 });
      const changed = { 'preserve_client_ip.enabled': 'false', 'proxy_protocol_v2.enabled': 'false' };
      assert.deepEqual(await groupAttributes(svc), [changed, changed]);
      // Removed, as upstream: the target groups keep what they have.
      svc = annotated(svc, { [TGA]: undefined });
      assert.deepEqual(await mutations(() => ensure(svc)), {});
      assert.deepEqual(await groupAttributes(svc), [changed, changed]);
      await remove(svc);
    });

    it('refuses a target group attribute upstream refuses, before making anything', async () => {
      const cases: [string, RegExp, V1ServicePort[]][] = [
        [
          'deregistration_delay.timeout_seconds=120',
          /"deregistration_delay\.timeout_seconds" is not a target group attribute/,
          [tcp(80)],
        ],
        ['proxy_protocol_v2.enabled=yes', /"yes" is not true or false/, [tcp(80)]],
        ['preserve_client_ip.enabled', /"" is not true or false/, [tcp(80)]],
        [
          'preserve_client_ip.enabled=false',
          /cannot be disabled for UDP/,
          [{ name: 'dns', port: 53, protocol: 'UDP' }],
        ],
      ];
      for (const [value, message, ports] of cases) {
        const svc = await created({ [TGA]: value }, ports);
        const calls = await mutations(() =>
          assert.rejects(ensure(svc), (e: Error & { setting?: string }) => {
            assert.equal(e.setting, TGA);
            assert.match(e.message, message);
            return true;
          }),
        );
        assert.deepEqual(calls, {}, `${value}: nothing made`);
        await core.deleteNamespacedService({ namespace: 'default', name: svc.metadata?.name ?? '' });
      }
    });

    const EIPS = `${A}eip-allocations`;
    const PRIVATE = `${A}private-ipv4-addresses`;
    const SUBNETS = `${A}subnets`;

    it('gives a new internet-facing NLB the Elastic IPs, one per subnet, and refuses to change them in place', async () => {
      const subnets = world.publicSubnets.slice(0, 2).map((s) => s.id);
      const [first, second, third] = [await allocate(), await allocate(), await allocate()];
      let svc = await created({ [SUBNETS]: subnets.join(','), [EIPS]: `${first}, ${second}` });
      await ensure(svc);
      const made = await find(svc);
      assert.deepEqual(addressesOf(made), [`${subnets[0]}=${first}`, `${subnets[1]}=${second}`]);
      assert.deepEqual(await mutations(() => ensure(svc)), {}, 'an unchanged Service: no mutating call');
      svc = annotated(svc, { [EIPS]: `${first},${third}` });
      await assert.rejects(ensure(svc), (e: Error & { setting?: string }) => {
        assert.equal(e.setting, EIPS);
        assert.match(e.message, /cannot be changed in place/);
        return true;
      });
      const after = await find(svc);
      assert.equal(after?.LoadBalancerArn, made?.LoadBalancerArn, 'not re-created');
      assert.deepEqual(addressesOf(after), addressesOf(made));
      await remove(svc);
    });

    it('refuses Elastic IPs that do not fit: not one per subnet, or on an internal load balancer', async () => {
      const subnets = world.publicSubnets.slice(0, 2).map((s) => s.id);
      const eip = await allocate();
      const cases: [Record<string, string>, RegExp][] = [
        [{ [SUBNETS]: subnets.join(','), [EIPS]: eip }, /1 given for 2 subnet/],
        [{ [EIPS]: eip, [`${A}internal`]: 'true' }, /internet-facing/],
        [{ [PRIVATE]: '10.0.0.10' }, /for an internal load balancer/],
        [{ [PRIVATE]: '10.0.0', [`${A}internal`]: 'true' }, /not an IPv4 address/],
      ];
      for (const [annotations, message] of cases) {
        const svc = await created(annotations);
        const calls = await mutations(() => assert.rejects(ensure(svc), message));
        assert.deepEqual(calls, {}, `${JSON.stringify(annotations)}: nothing made`);
        assert.equal(await find(svc), undefined);
        await core.deleteNamespacedService({ namespace: 'default', name: svc.metadata?.name ?? '' });
      }
    });

    it('gives a new internal NLB the private addresses, and refuses to change them in place', async () => {
      const [subnet] = world.privateSubnets;
      assert.ok(subnet, 'the world has a private subnet');
      const address = subnet.cidr.replace(/\.0\/\d+$/, '.20');
      let svc = await created({ [SUBNETS]: subnet.id, [PRIVATE]: address, [`${A}internal`]: 'true' });
      await ensure(svc);
      assert.deepEqual(addressesOf(await find(svc)), [`${subnet.id}=${address}`]);
      assert.deepEqual(await mutations(() => ensure(svc)), {}, 'an unchanged Service: no mutating call');
      svc = annotated(svc, { [PRIVATE]: address.replace(/\.20$/, '.21') });
      await assert.rejects(ensure(svc), { setting: PRIVATE });
      assert.deepEqual(addressesOf(await find(svc)), [`${subnet.id}=${address}`]);
      await remove(svc);
    });

    const LOGS = `${A}access-log-enabled`;
    const BUCKET = `${A}access-log-s3-bucket-name`;
    const PREFIX = `${A}access-log-s3-bucket-prefix`;
    const logs = (attributes: Record<string, string>) => [
      attributes['access_logs.s3.enabled'],
      attributes['access_logs.s3.bucket'],
      attributes['access_logs.s3.prefix'],
      attributes['load_balancing.cross_zone.enabled'],
    ];

    it('turns NLB access logs on at create, syncs them with cross-zone in one call, and leaves them when unchanged', async () => {
      let svc = await created({ [LOGS]: 'true', [BUCKET]: 'logs', [PREFIX]: 'web' });
      const createCalls = await mutations(() => ensure(svc));
      assert.equal(createCalls['ModifyLoadBalancerAttributes'], 1);
      assert.deepEqual(logs(await lbAttributes(svc)), ['true', 'logs', 'web', 'false']);
      assert.deepEqual(await mutations(() => ensure(svc)), {}, 'an unchanged Service: no mutating call');
      svc = annotated(svc, { [PREFIX]: 'web2', [`${A}cross-zone-load-balancing-enabled`]: 'true' });
      assert.deepEqual(await mutations(() => ensure(svc)), { ModifyLoadBalancerAttributes: 1 });
      assert.deepEqual(logs(await lbAttributes(svc)), ['true', 'logs', 'web2', 'true']);
      svc = annotated(svc, { [LOGS]: 'false' });
      assert.deepEqual(await mutations(() => ensure(svc)), { ModifyLoadBalancerAttributes: 1 });
      assert.equal((await lbAttributes(svc))['access_logs.s3.enabled'], 'false');
      // The bucket without logs on does nothing (as upstream): a Warning says so.
      assert.ok(
        (await warnings(svc)).some((m) => m.startsWith(`${BUCKET}: has no effect while ${LOGS} is not true`)),
        (await warnings(svc)).join(' | '),
      );
      await remove(svc);
    });

    it('refuses access logs without a bucket or with a value that is not a boolean, and warns of the emit interval', async () => {
      for (const [annotations, message] of [
        [{ [LOGS]: 'true' }, /need a bucket/],
        [{ [LOGS]: 'yes', [BUCKET]: 'logs' }, /"yes" is not true or false/],
      ] as const) {
        const svc = await created(annotations);
        await assert.rejects(ensure(svc), message);
        assert.equal(await find(svc), undefined);
        await core.deleteNamespacedService({ namespace: 'default', name: svc.metadata?.name ?? '' });
      }
      const svc = await created({ [`${A}access-log-emit-interval`]: '5' });
      await ensure(svc);
      assert.ok(
        (await warnings(svc)).some((m) => m.startsWith(`${A}access-log-emit-interval: applies to a Classic ELB only`)),
      );
      await remove(svc);
    });
  },
);
