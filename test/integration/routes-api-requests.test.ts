// routes' API requests at rest and on a Node change, counted by the API server itself
// (apiserver_request_total), on a control plane of this file's own: the relay and the functions run
// as `cirrus start` runs them, and only routes is there (a cloud with routes alone). Its drift check
// lists the cloud's routes every period and a Node change starts a pass, but neither lists the
// Nodes while the relay's digest vouches for the function's copy (KEP-5237, ADR 0030).

import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import type { V1Node } from '@kubernetes/client-node';
import { FakeCloud } from '../../providers/fake/index.ts';
import { startCirrus } from '../harness/cirrus.ts';
import { countRequests, type Counts } from '../harness/kube.ts';
import { createNode, newNode, type NodeTweak } from '../harness/builders.ts';
import { controlPlaneSkip, ownControlPlane, uniqueName } from '../harness/cluster.ts';
import { waitFor } from '../relay/harness.ts';

const withPodCidr =
  (cidr: string): NodeTweak =>
  (node) => {
    node.spec = { ...node.spec, podCIDR: cidr, podCIDRs: [cidr] };
  };

describe('routes: API requests at rest and on a Node change', { skip: controlPlaneSkip }, () => {
  const cluster = ownControlPlane();

  // The requests the API server counted while `during` ran, by "VERB resource[/subresource]".
  const counted = (t: TestContext, during: () => Promise<void>): Promise<Counts> =>
    countRequests(cluster.admin, t, during);

  const routed = async (node: V1Node): Promise<boolean> => {
    const name = node.metadata?.name ?? '';
    const read = await cluster.core.readNode({ name });
    return read.status?.conditions?.some((c) => c.type === 'NetworkUnavailable' && c.status === 'False') === true;
  };

  it('a drift check at rest and a pass on a Node change list the cloud routes but read no Node list', async (t) => {
    const cloud = new FakeCloud();
    for (const capability of ['instances', 'instancesV2', 'zones', 'clusters', 'loadBalancer'] as const)
      cloud.disabled.add(capability);
    const period = 3_000;
    const cirrus = await startCirrus(cluster.admin, cloud, 'silent', { periods: { routes: period } });
    t.after(() => cirrus.stop());
    const listRoutes = (): number => cloud.calls.filter((c) => c.method === 'listRoutes').length;

    const first = await createNode(cluster.core, newNode(uniqueName('routed'), withPodCidr('10.244.1.0/24')));
    await waitFor('the first Node routed, its condition set', () => routed(first), 30_000);

    const atRest = await counted(t, async () => {
      const before = listRoutes();
      await waitFor('three drift checks', () => listRoutes() >= before + 3, 5 * period);
    });
    assert.equal(atRest['LIST nodes'] ?? 0, 0, 'a drift check at rest reads no Node list');
    assert.equal(atRest['PATCH nodes/status'] ?? 0, 0, 'nor writes a condition again');

    const onChange = await counted(t, async () => {
      // Right after a drift check, so that the next is a period away.
      const before = listRoutes();
      await waitFor('a drift check', () => listRoutes() > before, 2 * period);
      const second = await createNode(cluster.core, newNode(uniqueName('joining'), withPodCidr('10.244.2.0/24')));
      await waitFor('the new Node routed, its condition set', () => routed(second), 30_000);
    });
    assert.equal(onChange['LIST nodes'] ?? 0, 0, 'a pass on a Node change reads no Node list');
    assert.equal(onChange['PATCH nodes/status'], 1, 'the new Node’s condition, written once');
    assert.equal(cloud.routeTable.length, 2);

    // The passes, by trigger and outcome (route_controller_route_sync_total).
    const metrics = await (await fetch(`${cirrus.url}/metrics`)).text();
    const periodic = /route_controller_route_sync_total\{[^}]*trigger="periodic"[^}]*outcome="noop"[^}]*\} (\d+)/.exec(
      metrics,
    );
    assert.ok(Number(periodic?.[1] ?? 0) >= 3, 'drift checks that changed nothing');
    assert.match(metrics, /route_controller_route_sync_total\{[^}]*trigger="node_change"[^}]*outcome="changed"/);
  });
});
