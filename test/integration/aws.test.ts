// The four functions with the aws provider, end to end: cirrus wired as `cirrus start` wires it
// (test/harness/cirrus.ts), on a control plane of this file's own (the shared one's Nodes and Services
// belong to other files), against the run's AWS emulator in a world of this file's own. What the
// tests look at is the real outcome on both sides: the Node and Service objects in the API server,
// and the instances, load balancers and routes in the emulator.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DescribeListenersCommand, DescribeLoadBalancersCommand } from '@aws-sdk/client-elastic-load-balancing-v2';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import pino from 'pino';
import { startCirrus, type Cirrus } from '../harness/cirrus.ts';
import { createAwsProvider } from '../../providers/aws/index.ts';
import {
  awsEmulatorSkip,
  awsTestEnv,
  awsWorld,
  instanceRoutes,
  registeredTargets,
  type AwsWorld,
  type WorldInstance,
} from '../harness/aws.ts';
import { createNode, newNode, ownTaints, setReady, uninitialized, withProviderId } from '../harness/builders.ts';
import { controlPlaneSkip, ownControlPlane } from '../harness/cluster.ts';
import { waitFor } from '../relay/harness.ts';

const SHUTDOWN_TAINT = 'node.cloudprovider.kubernetes.io/shutdown';
const skip = controlPlaneSkip || awsEmulatorSkip;

describe('the functions with the aws provider, against the emulator', { skip }, () => {
  const cluster = ownControlPlane();
  let world: AwsWorld;
  let cirrus: Cirrus;
  const operations: string[] = [];
  /** Instances whose Nodes are Ready: every load balancer's targets. */
  const serving: string[] = [];

  before(async () => {
    world = await awsWorld('aws-e2e');
    Object.assign(process.env, awsTestEnv(world));
    const cloud = createAwsProvider(
      {
        config: world.cloudConfig(),
        configPath: 'cloud.conf',
        signal: new AbortController().signal,
        log: pino({ level: 'silent' }),
        kubeConfig: cluster.admin,
      },
      { observe: (service, operation) => operations.push(`${service}:${operation}`) },
    );
    cirrus = await startCirrus(cluster.admin, cloud, process.env['CIRRUS_TEST_LOG'] === undefined ? 'silent' : 'warn');
  });
  after(async () => {
    // Unset when `before` failed part-way.
    await (cirrus as Cirrus | undefined)?.stop();
    (world as AwsWorld | undefined)?.close();
  });

  const node = (name: string): Promise<V1Node> => cluster.core.readNode({ name });
  const ready = async (instance: WorldInstance, podCIDR?: string): Promise<V1Node> => {
    const created = await createNode(
      cluster.core,
      newNode(instance.privateDnsName, uninitialized, (n) => {
        if (podCIDR !== undefined) n.spec = { ...n.spec, podCIDR, podCIDRs: [podCIDR] };
      }),
    );
    await setReady(cluster.core, instance.privateDnsName, 'True');
    return created;
  };

  it('initializes a Node named by its instance’s private DNS name, without a provider ID', async () => {
    const instance = await world.runInstance({ publicIp: true });
    await ready(instance);
    serving.push(instance.instanceId);
    // As upstream's cloud node controller, node-init removes the taint with the Node's update, then
    // writes the addresses to its status (ADR 0004): wait for both.
    await waitFor(
      'the Node to be initialized and its addresses written',
      async () => {
        const current = await node(instance.privateDnsName);
        return ownTaints(current).length === 0 && (current.status?.addresses ?? []).length > 0;
      },
      20_000,
    );
    const n = await node(instance.privateDnsName);
    assert.equal(n.spec?.providerID, instance.providerId);
    const labels = n.metadata?.labels ?? {};
    assert.equal(labels['node.kubernetes.io/instance-type'], instance.instanceType);
    assert.equal(labels['topology.kubernetes.io/zone'], instance.az);
    assert.equal(labels['topology.kubernetes.io/region'], world.region);
    assert.match(labels['topology.k8s.aws/zone-id'] ?? '', /^use1-az\d$/);
    const addresses = Object.fromEntries((n.status?.addresses ?? []).map((a) => [a.type, a.address]));
    assert.equal(addresses['InternalIP'], instance.privateIp);
    assert.equal(addresses['ExternalIP'], instance.publicIp);
    assert.equal(addresses['InternalDNS'], instance.privateDnsName);
  });

  it('deletes the Node of a terminated instance, and taints the NotReady Node of a stopped one', async () => {
    const [gone, stopped] = [await world.runInstance(), await world.runInstance()];
    for (const i of [gone, stopped]) {
      await createNode(cluster.core, newNode(i.privateDnsName, withProviderId(i.providerId)));
      await setReady(cluster.core, i.privateDnsName, 'False');
    }
    await world.terminateInstance(gone.instanceId);
    await world.stopInstance(stopped.instanceId);
    await waitFor(
      'the terminated instance’s Node to be deleted',
      () =>
        node(gone.privateDnsName).then(
          () => false,
          () => true,
        ),
      30_000,
    );
    await waitFor(
      'the stopped instance’s Node to get the shutdown taint',
      async () => ownTaints(await node(stopped.privateDnsName)).some((t) => t.key === SHUTDOWN_TAINT),
      30_000,
    );
  });

  it('gives a LoadBalancer Service an NLB, follows the node set, programs routes, and deletes only what it made', async () => {
    const foreign = await world.createForeignLoadBalancer();
    const [a, b] = [await world.runInstance(), await world.runInstance()];
    await ready(a, '10.244.11.0/24');
    serving.push(a.instanceId);
    const service: V1Service = {
      metadata: { name: 'web', namespace: 'default' },
      spec: {
        type: 'LoadBalancer',
        ports: [
          { name: 'http', port: 80, protocol: 'TCP' },
          { name: 'https', port: 443, protocol: 'TCP' },
        ],
      },
    };
    await cluster.core.createNamespacedService({ namespace: 'default', body: service });
    const hostname = async (): Promise<string | undefined> =>
      (await cluster.core.readNamespacedService({ namespace: 'default', name: 'web' })).status?.loadBalancer
        ?.ingress?.[0]?.hostname;
    await waitFor('the Service to get its NLB’s hostname', async () => (await hostname()) !== undefined, 30_000);
    const { uid } = (await cluster.core.readNamespacedService({ namespace: 'default', name: 'web' })).metadata ?? {};
    const name = `a${(uid ?? '').replaceAll('-', '')}`.slice(0, 32);
    const nlb = (await world.elbv2.send(new DescribeLoadBalancersCommand({ Names: [name] }))).LoadBalancers?.[0];
    assert.equal(await hostname(), nlb?.DNSName);
    const listeners = (await world.elbv2.send(new DescribeListenersCommand({ LoadBalancerArn: nlb?.LoadBalancerArn })))
      .Listeners;
    assert.deepEqual(
      listeners?.map((l) => l.Port).sort((x, y) => (x ?? 0) - (y ?? 0)),
      [80, 443],
    );
    const targets = (): Promise<string[][]> => registeredTargets(world.elbv2, nlb?.LoadBalancerArn);
    const targeting = async (ids: readonly string[]): Promise<boolean> => {
      const t = await targets();
      return t.length === 2 && t.every((registered) => registered.join() === [...ids].sort().join());
    };
    // The stopped instance's Node is in the node set, but AWS does not take a stopped instance as a target.
    await waitFor('both target groups to target the serving nodes', () => targeting(serving), 30_000);

    await ready(b, '10.244.12.0/24');
    serving.push(b.instanceId);
    await waitFor('a joining node to become a target', () => targeting(serving), 30_000);

    const routes = (): Promise<string[]> => instanceRoutes(world);
    await waitFor(
      'a route per pod CIDR',
      async () =>
        (await routes()).join() === [`10.244.11.0/24>${a.instanceId}`, `10.244.12.0/24>${b.instanceId}`].join(),
      30_000,
    );

    await cluster.core.deleteNamespacedService({ namespace: 'default', name: 'web' });
    await waitFor(
      'the Service to be gone (its finalizer removed)',
      () =>
        cluster.core.readNamespacedService({ namespace: 'default', name: 'web' }).then(
          () => false,
          () => true,
        ),
      30_000,
    );
    await assert.rejects(
      world.elbv2.send(new DescribeLoadBalancersCommand({ Names: [name] })),
      /LoadBalancerNotFound|not found/i,
    );
    assert.equal(await foreign.exists(), true, 'the foreign NLB in the same account survives');
    assert.ok(operations.includes('elbv2:CreateLoadBalancer'));
  });
});
