import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import {
  finalizer,
  inLoadBalancers,
  loadBalancerStatusEqual,
  needsCleanup,
  nodeNamesForMessage,
  nodesFingerprint,
  specFingerprint,
  syncedAnnotation,
  syncRecord,
  wantsLoadBalancer,
} from '../../functions/service-lb/predicates.ts';

const service = (
  spec: V1Service['spec'] = { type: 'LoadBalancer' },
  metadata: V1Service['metadata'] = {},
): V1Service => ({ metadata: { name: 's', uid: 'u1', ...metadata }, spec });

const record = JSON.stringify({ spec: 'a', nodes: 'b' });

describe('wantsLoadBalancer and needsCleanup', () => {
  const now = new Date();
  const cases: { name: string; svc: V1Service; wants: boolean; cleanup: boolean }[] = [
    { name: 'a LoadBalancer', svc: service(), wants: true, cleanup: false },
    {
      name: 'a LoadBalancer of another class',
      svc: service({ type: 'LoadBalancer', loadBalancerClass: 'x/y' }),
      wants: false,
      cleanup: false,
    },
    { name: 'a ClusterIP', svc: service({ type: 'ClusterIP' }), wants: false, cleanup: false },
    {
      name: 'a former LoadBalancer with our finalizer',
      svc: service({ type: 'ClusterIP' }, { finalizers: [finalizer] }),
      wants: false,
      cleanup: true,
    },
    {
      name: 'a former LoadBalancer with our record only',
      svc: service({ type: 'NodePort' }, { annotations: { [syncedAnnotation]: '{}' } }),
      wants: false,
      cleanup: true,
    },
    {
      name: 'a LoadBalancer being deleted',
      svc: service(undefined, { finalizers: [finalizer], deletionTimestamp: now }),
      wants: true,
      cleanup: true,
    },
    {
      name: 'a LoadBalancer being deleted that was never ours',
      svc: service(undefined, { deletionTimestamp: now }),
      wants: true,
      cleanup: false,
    },
    {
      name: 'a LoadBalancer whose class was set after we made it (our record)',
      svc: service(
        { type: 'LoadBalancer', loadBalancerClass: 'x/y' },
        { finalizers: [finalizer], annotations: { [syncedAnnotation]: record } },
      ),
      wants: false,
      cleanup: true,
    },
    {
      name: "a LoadBalancer of another class with upstream's finalizer but no record of ours (another controller's)",
      svc: service(
        { type: 'LoadBalancer', loadBalancerClass: 'x/y' },
        { finalizers: [finalizer], deletionTimestamp: now },
      ),
      wants: false,
      cleanup: false,
    },
  ];
  for (const { name, svc, wants, cleanup } of cases) {
    it(name, () => {
      assert.equal(wantsLoadBalancer(svc), wants);
      assert.equal(needsCleanup(svc), cleanup);
    });
  }
});

describe('wantsLoadBalancer and needsCleanup with --load-balancer-class', () => {
  const now = new Date();
  const served = 'example.com/vip';
  const madeHere = JSON.stringify({ spec: 'a', nodes: 'b', class: served });
  const cases: { name: string; svc: V1Service; wants: boolean; cleanup: boolean }[] = [
    {
      name: 'a LoadBalancer of the class served',
      svc: service({ type: 'LoadBalancer', loadBalancerClass: served }),
      wants: true,
      cleanup: false,
    },
    { name: 'a LoadBalancer without a class', svc: service(), wants: false, cleanup: false },
    {
      name: 'a LoadBalancer without a class, with finalizer and a record made without a class, being deleted',
      svc: service(undefined, {
        finalizers: [finalizer],
        annotations: { [syncedAnnotation]: record },
        deletionTimestamp: now,
      }),
      wants: false,
      cleanup: false,
    },
    {
      name: 'a LoadBalancer of the class served, being deleted',
      svc: service(
        { type: 'LoadBalancer', loadBalancerClass: served },
        { finalizers: [finalizer], deletionTimestamp: now },
      ),
      wants: true,
      cleanup: true,
    },
    {
      name: 'a former LoadBalancer of the class served (the class cleared with the type), by its record',
      svc: service({ type: 'ClusterIP' }, { finalizers: [finalizer], annotations: { [syncedAnnotation]: madeHere } }),
      wants: false,
      cleanup: true,
    },
    {
      name: "a former LoadBalancer with upstream's finalizer only: not provably ours",
      svc: service({ type: 'ClusterIP' }, { finalizers: [finalizer] }),
      wants: false,
      cleanup: false,
    },
  ];
  for (const { name, svc, wants, cleanup } of cases) {
    it(name, () => {
      assert.equal(wantsLoadBalancer(svc, served), wants);
      assert.equal(needsCleanup(svc, served), cleanup);
    });
  }

  it('reads the class a record was made under, and refuses a record whose class is not a string', () => {
    assert.deepEqual(syncRecord(service(undefined, { annotations: { [syncedAnnotation]: madeHere } })), {
      spec: 'a',
      nodes: 'b',
      class: served,
    });
    const bad = JSON.stringify({ spec: 'a', nodes: 'b', class: 7 });
    assert.equal(syncRecord(service(undefined, { annotations: { [syncedAnnotation]: bad } })), undefined);
  });

  it('fingerprints a Service without a class as before, and its class when it has one', () => {
    const plain = specFingerprint(service());
    const nullClass = { type: 'LoadBalancer', loadBalancerClass: null } as unknown as V1Service['spec'];
    assert.equal(specFingerprint(service(nullClass)), plain);
    assert.notEqual(specFingerprint(service({ type: 'LoadBalancer', loadBalancerClass: served })), plain);
  });
});

describe('inLoadBalancers', () => {
  const node = (labels: Record<string, string> = {}, extra: Partial<V1Node> = {}): V1Node => ({
    metadata: { name: 'n', labels },
    ...extra,
  });
  const label = 'node.kubernetes.io/exclude-from-external-load-balancers';
  const cases: { name: string; node: V1Node; want: boolean }[] = [
    { name: 'a plain node', node: node(), want: true },
    { name: 'excluded: true', node: node({ [label]: 'true' }), want: false },
    { name: 'excluded: T', node: node({ [label]: 'T' }), want: false },
    { name: 'excluded: false', node: node({ [label]: 'false' }), want: true },
    { name: 'excluded: 0', node: node({ [label]: '0' }), want: true },
    { name: 'excluded: empty (unparsable)', node: node({ [label]: '' }), want: false },
    { name: 'excluded: yes (unparsable)', node: node({ [label]: 'yes' }), want: false },
    { name: 'being deleted', node: node({}, { metadata: { name: 'n', deletionTimestamp: new Date() } }), want: false },
    {
      name: 'tainted by the cluster autoscaler',
      node: node({}, { spec: { taints: [{ key: 'ToBeDeletedByClusterAutoscaler', effect: 'NoSchedule' }] } }),
      want: false,
    },
    {
      name: 'not Ready (readiness does not matter)',
      node: node({}, { status: { conditions: [{ type: 'Ready', status: 'False' }] } }),
      want: true,
    },
  ];
  for (const { name, node: n, want } of cases) {
    it(name, () => {
      assert.equal(inLoadBalancers(n), want);
    });
  }
});

describe('specFingerprint', () => {
  const base = service(
    { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP', nodePort: 30001 }] },
    { annotations: { a: '1' } },
  );
  const changed: [string, V1Service][] = [
    ['ports', service({ ...base.spec, ports: [{ port: 81, protocol: 'TCP', nodePort: 30001 }] }, base.metadata)],
    ['source ranges', service({ ...base.spec, loadBalancerSourceRanges: [] }, base.metadata)],
    ['the requested IP', service({ ...base.spec, loadBalancerIP: '1.2.3.4' }, base.metadata)],
    ['external IPs', service({ ...base.spec, externalIPs: ['1.2.3.4'] }, base.metadata)],
    ['annotations', service(base.spec, { ...base.metadata, annotations: { a: '2' } })],
    ['the UID', service(base.spec, { ...base.metadata, uid: 'u2' })],
    ['the traffic policy', service({ ...base.spec, externalTrafficPolicy: 'Local' }, base.metadata)],
    ['the health check port', service({ ...base.spec, healthCheckNodePort: 32000 }, base.metadata)],
    ['the number of IP families', service({ ...base.spec, ipFamilies: ['IPv4', 'IPv6'] }, base.metadata)],
    ['session affinity', service({ ...base.spec, sessionAffinity: 'ClientIP' }, base.metadata)],
  ];
  for (const [what, other] of changed) {
    it(`changes with ${what}`, () => {
      assert.notEqual(specFingerprint(other), specFingerprint(base));
    });
  }
  const same: [string, V1Service][] = [
    ['labels', service(base.spec, { ...base.metadata, labels: { x: 'y' } })],
    [
      "cirrus's own record",
      service(base.spec, { ...base.metadata, annotations: { a: '1', [syncedAnnotation]: '{}' } }),
    ],
    ['finalizers', service(base.spec, { ...base.metadata, finalizers: [finalizer] })],
    ['internal traffic policy', service({ ...base.spec, internalTrafficPolicy: 'Local' }, base.metadata)],
  ];
  for (const [what, other] of same) {
    it(`ignores ${what}`, () => {
      assert.equal(specFingerprint(other), specFingerprint(base));
    });
  }
});

describe('node sets, records and statuses', () => {
  const n = (name: string, providerID?: string): V1Node => ({
    metadata: { name },
    spec: providerID === undefined ? {} : { providerID },
  });

  it('fingerprints node sets by name and provider ID, in any order', () => {
    assert.equal(nodesFingerprint([n('a', 'p://1'), n('b')]), nodesFingerprint([n('b'), n('a', 'p://1')]));
    assert.notEqual(nodesFingerprint([n('a', 'p://1')]), nodesFingerprint([n('a', 'p://2')]));
    assert.notEqual(nodesFingerprint([n('a')]), nodesFingerprint([n('a'), n('b')]));
  });

  it('reads a record, and treats a damaged one as none', () => {
    assert.deepEqual(
      syncRecord(service(undefined, { annotations: { [syncedAnnotation]: '{"spec":"a","nodes":"b"}' } })),
      { spec: 'a', nodes: 'b' },
    );
    assert.equal(syncRecord(service(undefined, { annotations: { [syncedAnnotation]: 'not json' } })), undefined);
    assert.equal(syncRecord(service(undefined, { annotations: { [syncedAnnotation]: '{"spec":1}' } })), undefined);
  });

  it("compares statuses by ingress, with the API server's default ipMode", () => {
    assert.ok(loadBalancerStatusEqual({}, { ingress: [] }));
    assert.ok(
      loadBalancerStatusEqual({ ingress: [{ ip: '1.1.1.1' }] }, { ingress: [{ ip: '1.1.1.1', ipMode: 'VIP' }] }),
    );
    assert.ok(
      !loadBalancerStatusEqual({ ingress: [{ ip: '1.1.1.1' }] }, { ingress: [{ ip: '1.1.1.1', ipMode: 'Proxy' }] }),
    );
    assert.ok(
      !loadBalancerStatusEqual({ ingress: [{ ip: '1.1.1.1' }] }, { ingress: [{ hostname: 'lb.example.com' }] }),
    );
  });

  it('names at most 20 nodes in an event message', () => {
    const nodes = Array.from({ length: 22 }, (_, i) => n(`n${i}`));
    assert.match(nodeNamesForMessage(nodes), /^\[n0 n1 .* n19 <2 more>\]$/);
  });
});
