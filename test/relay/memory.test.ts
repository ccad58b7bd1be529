// What the relay keeps of an object between its changes (ADR 0024, issue 30 item 4): not the whole
// object, but every field its readers need — the feeds' change detection, the fan-out and its
// claims, the node-set digest, the cursor and the deletes a LIST finds. The sizes are measured by
// bench/scenarios/relay-memory.ts; these tests pin the mechanism.

import { routesNodeSet } from '../../functions/routes/feed.ts';
import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig, type V1Service } from '@kubernetes/client-node';
import { catalogue } from '../../functions/catalogue.ts';
import { needsCleanup, wantsLoadBalancer } from '../../functions/service-lb/predicates.ts';
import { entryOf } from '../../relay/cursor-format.ts';
import { diffListed } from '../../relay/list.ts';
import { createRelayMetrics } from '../../relay/metrics.ts';
import { normalize, nodes, services, type KubeObject, type ResourceType } from '../../relay/resources.ts';
import { route, buildRoutingTable } from '../../relay/routing.ts';
import { defaultWatchSettings, ResourceWatch, type ResourceChange } from '../../relay/watch.ts';
import type { ChangeType } from '../../shared/catalogue.ts';
import { taintShutdown } from '../../shared/kube/well-known.ts';
import { silentLogger } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';
import { realisticImages, realisticNode, realisticService } from '../harness/realistic.ts';
import { waitFor } from './harness.ts';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

// The fields the variants below edit, as the raw JSON has them.
interface Editable {
  metadata: {
    name?: string;
    uid?: string;
    resourceVersion?: string;
    labels: Record<string, string>;
    annotations: Record<string, string>;
    finalizers?: string[];
    deletionTimestamp?: string;
  };
  spec: {
    taints?: { key: string; effect: string }[];
    providerID?: string;
    podCIDR?: string;
    podCIDRs?: string[];
    type?: string;
    loadBalancerClass?: string;
    ports?: { port: number }[];
  };
  status?: {
    conditions?: { type: string; status: string; lastHeartbeatTime?: string }[];
    images?: unknown[];
    loadBalancer?: { ingress: unknown[] };
  };
}

let version = 100;
// A normalized object as the API server sends it, with a uid and a fresh resourceVersion.
function served(type: ResourceType, object: KubeObject, edit: (o: Editable) => void = () => undefined): KubeObject {
  const copy = structuredClone(object) as unknown as Editable;
  copy.metadata.uid = `uid-${copy.metadata.name ?? ''}`;
  edit(copy);
  copy.metadata.resourceVersion = String((version += 1));
  return normalize(type, copy as unknown as KubeObject);
}

const node = (edit?: (o: Editable) => void): KubeObject => served(nodes, realisticNode('mem', 1), edit);
const service = (edit?: (o: Editable) => void): KubeObject =>
  served(services, realisticService('default', 'mem', 1), edit);
const taint = (key: string) => (o: Editable) => {
  o.spec.taints = [...(o.spec.taints ?? []), { key, effect: 'NoSchedule' }];
};
const ready = (o: Editable) => {
  const condition = o.status?.conditions?.find((c) => c.type === 'Ready');
  if (condition === undefined) throw new Error('no Ready condition');
  return condition;
};

// What the relay keeps of a Ready, routed Node's status (relay/resources.ts retained): whether it is
// Ready, the NetworkUnavailable condition's status and reason (routes' digest, ADR 0030), and its
// addresses (node-init's periodic refresh compares them with the cloud's, ADR 0031).
const addressesOf = (node: KubeObject): unknown => (node['status'] as { addresses?: unknown }).addresses;
const routedCondition = { type: 'NetworkUnavailable', status: 'False', reason: 'RouteCreated' };
const readyOnly = (node: KubeObject): Record<string, unknown> => ({
  conditions: [{ type: 'Ready', status: 'True' }, routedCondition],
  addresses: addressesOf(node),
});

// Node changes after which some function's decision may or may not differ.
const nodeVariants: Record<string, KubeObject> = {
  heartbeat: node((o) => {
    ready(o).lastHeartbeatTime = '2026-11-26T20:00:10Z';
  }),
  notReady: node((o) => {
    ready(o).status = 'False';
  }),
  excluded: node((o) => {
    o.metadata.labels['node.kubernetes.io/exclude-from-external-load-balancers'] = 'true';
  }),
  autoscalerTaint: node(taint('ToBeDeletedByClusterAutoscaler')),
  shutdownTaint: node(taint(taintShutdown)),
  uninitialized: node(taint('node.cloudprovider.kubernetes.io/uninitialized')),
  providerId: node((o) => {
    o.spec.providerID = 'aws:///us-east-1a/i-0000000000000000f';
  }),
  podCidr: node((o) => {
    o.spec.podCIDR = '10.200.0.0/24';
    o.spec.podCIDRs = ['10.200.0.0/24'];
  }),
  deleting: node((o) => {
    o.metadata.deletionTimestamp = '2026-11-26T20:01:00Z';
  }),
  noRoute: node((o) => {
    const network = o.status?.conditions?.find((c) => c.type === 'NetworkUnavailable');
    if (network !== undefined) Object.assign(network, { status: 'True', reason: 'NoRouteCreated' });
  }),
  imagesPulled: node((o) => {
    if (o.status !== undefined) o.status.images = o.status.images?.slice(1) ?? [];
  }),
};

const serviceVariants: Record<string, KubeObject> = {
  ingressChanged: service((o) => {
    o.status = { loadBalancer: { ingress: [{ ip: '203.0.113.9' }] } };
  }),
  portChanged: service((o) => {
    o.spec.ports = [{ port: 81 }];
  }),
  annotated: service((o) => {
    o.metadata.annotations['service.beta.kubernetes.io/aws-load-balancer-scheme'] = 'internal';
  }),
  synced: service((o) => {
    o.metadata.annotations['service-lb.cirrus-ccm.dev/synced'] = '{"spec":"x","nodes":"y"}';
  }),
  clusterIp: service((o) => {
    o.spec.type = 'ClusterIP';
  }),
  classed: service((o) => {
    o.spec.loadBalancerClass = 'example.com/other';
  }),
  noFinalizer: service((o) => {
    o.metadata.finalizers = [];
  }),
  deleting: service((o) => {
    o.metadata.deletionTimestamp = '2026-11-26T20:01:00Z';
  }),
  plainClusterIp: service((o) => {
    o.spec.type = 'ClusterIP';
    o.metadata.finalizers = [];
    delete o.status;
  }),
  labelled: service((o) => {
    o.metadata.labels['team'] = 'b';
  }),
};

function serviceLbEntry(): (typeof catalogue)[number] {
  const entry = catalogue.find((fn) => fn.name === 'service-lb');
  if (entry === undefined) throw new Error('no service-lb in the catalogue');
  return entry;
}

function change(type: ResourceType, kind: ChangeType, object: KubeObject, previous?: KubeObject): ResourceChange {
  return { resource: type, type: kind, key: 'k', object, previous, observedAt: 0 };
}

describe('what the relay keeps of an object', () => {
  it("keeps metadata and spec; of the status, only a Service's load balancer and a Node's Ready and addresses", () => {
    const n = node();
    const kept = nodes.retain(n);
    assert.equal((addressesOf(n) as unknown[]).length, 4);
    assert.deepEqual(
      kept['status'],
      readyOnly(n),
      "of a Node's status its Ready condition's status, NetworkUnavailable's status and reason, and its addresses alone: no other condition, capacity or images",
    );
    assert.deepEqual(nodes.retain(node((o) => (ready(o).status = 'False')))['status'], {
      conditions: [{ type: 'Ready', status: 'False' }, routedCondition],
      addresses: addressesOf(n),
    });
    assert.deepEqual(
      nodes.retain(node((o) => (o.status = { conditions: [] })))['status'],
      undefined,
      'no Ready condition and no addresses, no status',
    );
    assert.equal(nodes.retain(node((o) => (o.status = {})))['status'], undefined, 'no Ready condition, no status');
    assert.deepEqual(kept['spec'], n['spec']);
    assert.deepEqual(kept.metadata, n.metadata);
    assert.equal(kept.kind, 'Node');
    assert.ok(Buffer.byteLength(JSON.stringify(kept)) < Buffer.byteLength(JSON.stringify(n)) / 3);

    const s = service((o) => {
      o.status = { ...o.status, conditions: [{ type: 'LoadBalancerPortsError', status: 'False' }] };
    });
    assert.deepEqual(services.retain(s)['status'], {
      loadBalancer: (s['status'] as { loadBalancer: unknown }).loadBalancer,
    });
    assert.equal(services.retain(serviceVariants['plainClusterIp'] as KubeObject)['status'], undefined);
  });

  it("gives routes' node-set digest over what it keeps the value it has over the whole Nodes (ADR 0030)", () => {
    const all = [node(), ...Object.values(nodeVariants)];
    for (const n of all)
      assert.equal(routesNodeSet([nodes.retain(n)]), routesNodeSet([n]), JSON.stringify(n.metadata?.name));
    assert.notEqual(
      routesNodeSet([nodes.retain(nodeVariants['noRoute'] as KubeObject)]),
      routesNodeSet([nodes.retain(node())]),
      'the NetworkUnavailable condition is in it',
    );
  });

  it("gives every feed the decision the whole previous state gives, for every function's kinds", () => {
    const pairs: [ResourceType, KubeObject, Record<string, KubeObject>][] = [
      [nodes, node(), nodeVariants],
      [services, service(), serviceVariants],
    ];
    let compared = 0;
    for (const [type, base, variants] of pairs) {
      const all = [base, ...Object.values(variants)];
      for (const before of all)
        for (const after of all) {
          for (const fn of catalogue) {
            const whole = fn.feed(change(type, 'update', after, before));
            const kept = fn.feed(change(type, 'update', after, type.retain(before)));
            assert.equal(kept, whole, `${fn.name}: ${type.kind} update, ${JSON.stringify(before.metadata?.name)}`);
            compared += 1;
          }
        }
    }
    // Not vacuous: the variants do move the decisions.
    const serviceLb = serviceLbEntry();
    assert.equal(serviceLb.feed(change(nodes, 'update', nodeVariants['excluded'] as KubeObject, node())), 'all');
    assert.equal(serviceLb.feed(change(nodes, 'update', nodeVariants['heartbeat'] as KubeObject, node())), undefined);
    assert.equal(
      serviceLb.feed(change(services, 'update', serviceVariants['portChanged'] as KubeObject, service())),
      'object',
    );
    assert.equal(
      serviceLb.feed(change(services, 'update', serviceVariants['ingressChanged'] as KubeObject, service())),
      undefined,
    );
    assert.ok(compared > 400);
  });

  it('fans out to the Services, and claims about them, as the whole objects would', () => {
    const table = buildRoutingTable(catalogue, { to: ['service-lb=http://127.0.0.1:1'] });
    const all = [service(), ...Object.values(serviceVariants)];
    const known =
      (objects: KubeObject[]) =>
      (kind: string): ReturnType<Parameters<typeof route>[2] & {}> =>
        kind === 'Service'
          ? { resource: services, objects: objects.map((o, i): [string, KubeObject] => [`Service/default/s${i}`, o]) }
          : undefined;
    const joined = change(nodes, 'add', node());
    const fanned = (objects: KubeObject[]) => route(table, joined, known(objects)).map((r) => r.key);
    assert.deepEqual(fanned(all.map((o) => services.retain(o))), fanned(all));
    assert.ok(fanned(all).length >= 5 && fanned(all).length < all.length, 'some Services, not all');
    for (const object of all) {
      const claim = services.retain(object) as unknown as V1Service;
      const whole = object as unknown as V1Service;
      assert.equal(wantsLoadBalancer(claim), wantsLoadBalancer(whole));
      assert.equal(needsCleanup(claim), needsCleanup(whole));
    }
  });

  it("computes service-lb's node-set digest over the kept Nodes as over the whole ones", () => {
    const digest = serviceLbEntry().nodeSetDigest;
    assert.ok(digest);
    const whole = [node(), ...Object.values(nodeVariants)].map((n, i) =>
      normalize(nodes, { ...n, metadata: { ...n.metadata, name: `n${i}` } }),
    );
    const kept = whole.map((n) => nodes.retain(n));
    assert.equal(digest(kept), digest(whole));
    // …and it still moves with what it is about: an eligible node's version, a node leaving the set.
    const bumped = kept.map((n, i) => (i === 0 ? { ...n, metadata: { ...n.metadata, resourceVersion: '1' } } : n));
    assert.notEqual(digest(bumped), digest(kept));
    assert.notEqual(digest(kept.slice(1)), digest(kept));
  });

  it('keeps what the cursor records and what a delete after a LIST must carry', () => {
    for (const [type, objects] of [
      [nodes, [node(), ...Object.values(nodeVariants)]],
      [services, [service(), ...Object.values(serviceVariants)]],
    ] as const) {
      for (const object of objects) {
        const kept = type.retain(object);
        assert.deepEqual(entryOf(type, kept), entryOf(type, object));
        assert.equal(type.needsTombstone(kept), type.needsTombstone(object));
      }
    }
  });

  it('carries the kept state in a delete a LIST finds, and keeps only that of what a LIST brings', () => {
    // A LIST that lacks a known Service: its delete carries the kept state (uid, type, annotations).
    const known = service();
    const key = 'Service/default/mem-1';
    const { next, changes } = diffListed(
      services,
      { items: [], resourceVersion: '1' },
      { known: new Map([[key, services.retain(known)]]), seed: undefined, observedAt: 0 },
    );
    assert.equal(next.size, 0);
    const [deleted] = changes;
    assert.equal(deleted?.type, 'delete');
    assert.equal(deleted.object.metadata?.uid, known.metadata?.uid);
    assert.equal((deleted.object['spec'] as { type?: string }).type, 'LoadBalancer');
    assert.deepEqual(deleted.object.metadata?.annotations, known.metadata?.annotations);
    assert.ok(wantsLoadBalancer(deleted.object as unknown as V1Service));

    // A LIST keeps the kept state, and its adds carry the whole object.
    const listed = diffListed(
      nodes,
      { items: [node()], resourceVersion: '2' },
      {
        known: new Map(),
        seed: undefined,
        observedAt: 0,
      },
    );
    assert.deepEqual([...listed.next.values()][0]?.['status'], readyOnly(node()));
    assert.equal(
      (listed.changes[0]?.object['status'] as { images?: unknown[] } | undefined)?.images?.length,
      realisticImages,
    );
  });
});

// The images a raw object's status lists, if any.
function images(object: KubeObject | undefined): unknown[] | undefined {
  return (object?.['status'] as { images?: unknown[] } | undefined)?.images;
}

// A watch of Nodes over the real code path, recording the changes of the Node `name`; stopped after the test.
function watchNodes(
  t: TestContext,
  kubeConfig: KubeConfig,
  name: string,
): { watch: ResourceWatch; changes: ResourceChange[] } {
  const changes: ResourceChange[] = [];
  const watch = new ResourceWatch(nodes, {
    kubeConfig,
    settings: defaultWatchSettings,
    onChange: (c) => {
      if (c.object.metadata?.name === name) changes.push(c);
    },
    metrics: createRelayMetrics({ processMetrics: false, gauges: () => undefined }),
    log: silentLogger(),
  });
  const abort = new AbortController();
  const running = watch.run(abort.signal);
  t.after(async () => {
    abort.abort();
    await running;
  });
  return { watch, changes };
}

// What the tests below look at in what the relay keeps of a Node.
function summary(kept: KubeObject | undefined): Record<string, unknown> {
  return {
    status: kept?.['status'],
    providerID: (kept?.['spec'] as { providerID?: string } | undefined)?.providerID,
    managedFields: kept?.metadata?.['managedFields'],
    moved: kept?.metadata?.labels?.['moved'],
  };
}

describe('what the relay keeps, through the API server', { skip: controlPlaneSkip }, () => {
  it('sends a Node whole, keeps it without its status (but whether it is Ready) once emitted, and compares the next change with that', async (t) => {
    const { admin } = await testCluster();
    const core = admin.makeApiClient(CoreV1Api);
    const created = realisticNode(uniqueName('mem'), 0);
    const name = created.metadata?.name ?? '';
    const providerId = (created['spec'] as { providerID: string }).providerID;
    await core.createNode({ body: created as never });
    t.after(() => core.deleteNode({ name }).catch(() => undefined));
    const { watch, changes } = watchNodes(t, admin, name);
    const stored = (): KubeObject | undefined => new Map(watch.objects()).get(`Node/${name}`);

    await waitFor('the add', () => changes.length === 1);
    assert.equal(images(changes[0]?.object)?.length, realisticImages, 'the add carries the whole Node');
    assert.deepEqual(
      summary(stored()),
      { status: readyOnly(created), providerID: providerId, managedFields: undefined, moved: undefined },
      'the relay keeps the spec and whether the Node is Ready',
    );

    await waitFor('the watch', () => watch.established);
    await core.patchNode({ name, body: { metadata: { labels: { moved: 'yes' } } } }, mergePatch);
    // The control plane's own controllers may change the Node too (a not-ready taint): the label's update is the one.
    const moved = (c: ResourceChange): boolean => c.object.metadata?.labels?.['moved'] === 'yes';
    await waitFor('the update', () => changes.some(moved));
    const update = changes.find(moved);
    assert.equal(update?.type, 'update');
    assert.equal(images(update.object)?.length, realisticImages, 'the update carries the whole Node');
    assert.deepEqual(
      summary(update.previous),
      { status: readyOnly(created), providerID: providerId, managedFields: undefined, moved: undefined },
      'its previous state is what was kept',
    );
    assert.deepEqual(summary(stored()), {
      status: readyOnly(created),
      providerID: providerId,
      managedFields: undefined,
      moved: 'yes',
    });
  });
});
