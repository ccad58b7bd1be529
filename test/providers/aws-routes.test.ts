// Routes of the aws provider for a Node whose name is not its instance's private DNS name (a
// custom hostname, or a name the operator chose): the route controller passes the Node's name, and
// the provider finds the instance by the Node's provider ID, as cloud-provider-aws does through its
// node informer. Against the AWS emulator and the run's API server (the Nodes are real objects).

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import { DescribeRouteTablesCommand } from '@aws-sdk/client-ec2';
import { CoreV1Api, type KubeConfig, type V1Node } from '@kubernetes/client-node';
import pino from 'pino';
import { parseClusterCidrs, planRoutes } from '../../functions/routes/plan.ts';
import { createAwsProvider } from '../../providers/aws/index.ts';
import type { Route, Routes } from '../../shared/cloud/provider.ts';
import { awsEmulatorSkip, awsTestEnv, awsWorld, type AwsWorld } from '../harness/aws.ts';
import { createNode, newNode, withProviderId } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';

const clusterCidrs = parseClusterCidrs(['10.244.0.0/16']);

describe(
  'aws provider: routes of a Node named otherwise than its instance',
  { skip: controlPlaneSkip || awsEmulatorSkip },
  () => {
    let world: AwsWorld;
    let admin: KubeConfig;
    let core: CoreV1Api;
    const made: string[] = [];

    before(async () => {
      world = await awsWorld('aws-routes');
      Object.assign(process.env, awsTestEnv(world));
      admin = (await testCluster()).admin;
      core = admin.makeApiClient(CoreV1Api);
    });
    after(async () => {
      for (const name of made) await core.deleteNode({ name }).catch(() => undefined);
      (world as AwsWorld | undefined)?.close();
    });

    const routesOf = (kubeConfig: KubeConfig | undefined): Routes => {
      const routes = createAwsProvider({
        config: world.cloudConfig(),
        configPath: 'cloud.conf',
        signal: new AbortController().signal,
        log: pino({ level: 'silent' }),
        kubeConfig,
      }).routes();
      assert.ok(routes, 'the aws provider has Routes');
      return routes;
    };
    const routeTo = (targetNode: string, destinationCidr: string): Route => ({
      name: '',
      targetNode,
      enableNodeAddresses: false,
      targetNodeAddresses: [],
      destinationCidr,
      blackhole: false,
    });
    const table = async (): Promise<string[]> => {
      const out = await world.ec2.send(new DescribeRouteTablesCommand({ RouteTableIds: [world.routeTableId] }));
      return (out.RouteTables?.[0]?.Routes ?? [])
        .filter((r) => r.InstanceId !== undefined)
        .map((r) => `${r.DestinationCidrBlock ?? ''}>${r.InstanceId ?? ''}`);
    };
    const node = async (providerId: string, podCIDR: string): Promise<V1Node> => {
      const name = uniqueName('custom-name');
      made.push(name);
      return createNode(
        core,
        newNode(name, withProviderId(providerId), (n) => {
          n.spec = { ...n.spec, podCIDR, podCIDRs: [podCIDR] };
        }),
      );
    };

    it('creates the route by the provider ID, lists it back as that Node, and the next pass keeps it', async () => {
      const instance = await world.runInstance();
      const n = await node(instance.providerId, '10.244.31.0/24');
      const name = n.metadata?.name ?? '';
      assert.notEqual(name, instance.privateDnsName);
      const routes = routesOf(admin);

      await routes.createRoute('kubernetes', n.metadata?.uid ?? '', routeTo(name, '10.244.31.0/24'));
      assert.deepEqual(await table(), [`10.244.31.0/24>${instance.instanceId}`]);

      const listed = await routes.listRoutes('kubernetes');
      assert.deepEqual(
        listed.map((r) => [r.destinationCidr, r.targetNode, r.blackhole]),
        [['10.244.31.0/24', name, false]],
      );
      // What the routes function decides on its next pass: nothing to delete, the route kept.
      const plan = planRoutes([n], listed, clusterCidrs);
      assert.deepEqual(plan.deletions, []);
      assert.deepEqual(plan.nodes[0]?.cidrs, [{ cidr: '10.244.31.0/24', action: 'keep' }]);
    });

    it('without the cluster’s Nodes to read, finds no instance for such a Node (the fallback is the private DNS name)', async () => {
      const instance = await world.runInstance();
      const n = await node(instance.providerId, '10.244.32.0/24');
      await assert.rejects(
        routesOf(undefined).createRoute('kubernetes', '', routeTo(n.metadata?.name ?? '', '10.244.32.0/24')),
        /no instance of cluster .* for Node custom-name-/,
      );
      await routesOf(undefined).createRoute('kubernetes', '', routeTo(instance.privateDnsName, '10.244.32.0/24'));
      const listed = await routesOf(undefined).listRoutes('kubernetes');
      assert.ok(listed.some((r) => r.destinationCidr === '10.244.32.0/24' && r.targetNode === instance.privateDnsName));
    });
  },
);
