// The relay of a split hybrid deployment against the real API server (ADR 0026, relay/owners.ts):
// node-init and service-lb each have one destination per provider (`--to <function>@<provider>`),
// and each receives only its provider's Nodes and Services, and the Nodes nobody owns. A sink fed
// everything shows that the relay saw every object, so that "never received" can be checked.
//
// Other test files create Nodes and Services in the same cluster: assertions look only at the
// objects this test created. The classes are this test's own, so other tests' Services (no class,
// and no default provider here) are nobody's.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { CoreV1Api } from '@kubernetes/client-node';
import type { Ownership } from '../../shared/cloud/ownership.ts';
import { providerLabel } from '../../shared/cloud/ownership.ts';
import { createNode, newNode, uninitialized, withLabels, withProviderId } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';
import { functionServer, ready, testRelay, waitFor, type FunctionServer } from './harness.ts';

describe('relay routing by owner, split deployment', { skip: controlPlaneSkip }, () => {
  it("sends each provider's destinations only its Nodes and Services, and the Nodes nobody owns to each node-init", async (t) => {
    const cluster = await testCluster();
    const core = cluster.admin.makeApiClient(CoreV1Api);
    const suffix = uniqueName('h').slice(2);
    const metalClass = `example.com/metal-${suffix}`;
    const cloudClass = `example.com/cloud-${suffix}`;
    const ownership: Ownership = {
      providers: ['static', 'aws'],
      classes: new Map([
        [metalClass, 'static'],
        [cloudClass, 'aws'],
      ]),
    };
    const at: Record<string, FunctionServer> = {};
    const to: string[] = [];
    for (const fn of ['node-init', 'service-lb'])
      for (const provider of ['static', 'aws']) {
        const server = await functionServer(t);
        at[`${fn}-${provider}`] = server;
        to.push(`${fn}@${provider}=${server.url}`);
      }
    const sink = await functionServer(t);
    const relay = testRelay(t, cluster.admin, { to: [...to, `all=${sink.url}`], ownership });
    await ready(relay);

    const nodes = { metal: uniqueName('metal'), cloud: uniqueName('cloud'), orphan: uniqueName('orphan') };
    const services = { metal: uniqueName('lb-metal'), cloud: uniqueName('lb-cloud'), other: uniqueName('lb-other') };
    t.after(async () => {
      for (const name of Object.values(nodes)) await core.deleteNode({ name }).catch(() => undefined);
      for (const name of Object.values(services))
        await core.deleteNamespacedService({ name, namespace: 'default' }).catch(() => undefined);
    });
    const classes = { metal: metalClass, cloud: cloudClass, other: `example.com/other-${suffix}` };
    for (const [which, name] of Object.entries(services))
      await core.createNamespacedService({
        namespace: 'default',
        body: {
          metadata: { name },
          spec: {
            type: 'LoadBalancer',
            loadBalancerClass: classes[which as keyof typeof classes],
            ports: [{ port: 80 }],
          },
        },
      });
    await createNode(core, newNode(nodes.metal, uninitialized, withLabels({ [providerLabel]: 'static' })));
    await createNode(core, newNode(nodes.cloud, uninitialized, withProviderId(`aws:///us-east-1a/${nodes.cloud}`)));
    await createNode(core, newNode(nodes.orphan, uninitialized));

    const all = [...Object.values(nodes), ...Object.values(services)];
    await waitFor('the sink to receive every object', () => all.every((name) => sink.about(name).length > 0));
    const expected: Record<string, string[]> = {
      'node-init-static': [nodes.metal, nodes.orphan],
      'node-init-aws': [nodes.cloud, nodes.orphan],
      'service-lb-static': [services.metal],
      'service-lb-aws': [services.cloud],
    };
    const receivedOf = (destination: string): string[] =>
      all.filter((name) => (at[destination]?.about(name).length ?? 0) > 0);
    await waitFor('each destination to receive its objects', () =>
      Object.entries(expected).every(([destination, names]) => names.every((n) => receivedOf(destination).includes(n))),
    );
    await sleep(300);
    for (const [destination, names] of Object.entries(expected))
      assert.deepEqual(receivedOf(destination), names, `${destination} receives only its provider's objects`);
    // The node-set fan-out of a metal Node's add reached only static's service-lb, with its Service.
    assert.equal(at['service-lb-aws']?.about(services.metal).length, 0);
  });
});
