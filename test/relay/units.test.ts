// The relay's pure parts, without a cluster: backoff, routing table and decisions, merging, the
// delivery queue (with a scripted send, on a manual clock), the request format and the reading of replies.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { pino } from 'pino';
import type { MetricValueWithName } from 'prom-client';
import { backoffDelay } from '../../relay/backoff.ts';
import {
  classify,
  eventRequest,
  headersFor,
  localOutcome,
  outgoingEvent,
  parseRetryAfter,
} from '../../relay/delivery.ts';
import { readCloudEvent, type CloudEvent } from '../../shared/wire/cloudevents.ts';
import { relayReadiness, type RelayStatus } from '../../relay/index.ts';
import { createRelayMetrics } from '../../relay/metrics.ts';
import { DeliveryQueue, type DeliveryOutcome } from '../../relay/queue.ts';
import { nodes, services, type KubeObject } from '../../relay/resources.ts';
import {
  buildRoutingTable,
  mergeOutgoing,
  readKnativeEnvironment,
  route,
  RoutingError,
  type Outgoing,
} from '../../relay/routing.ts';
import { needsInitialization } from '../../functions/node-init/feed.ts';
import { needsLifecycleCheck } from '../../functions/node-lifecycle/feed.ts';
import { routesFeed, routesMayChange } from '../../functions/routes/feed.ts';
import { involvesLoadBalancer, nodeSetMayChange, serviceLbFeed } from '../../functions/service-lb/feed.ts';
import { parseDuration } from '../../shared/duration.ts';
import type { ResourceChange, ChangeType } from '../../relay/watch.ts';
import { verifyRequest } from '../../shared/wire/signing.ts';
import { ManualClock } from '../../shared/clock.ts';
import { silentLogger } from '../harness/builders.ts';
import { metric } from './harness.ts';
import { catalogue } from '../../functions/catalogue.ts';

function node(
  fields: {
    name?: string;
    uid?: string;
    labels?: Record<string, string>;
    spec?: object;
    status?: object;
    deletionTimestamp?: string;
  } = {},
): KubeObject {
  return {
    metadata: {
      name: fields.name ?? 'n1',
      uid: fields.uid ?? 'uid-1',
      resourceVersion: '1',
      labels: fields.labels ?? {},
      ...(fields.deletionTimestamp ? { deletionTimestamp: fields.deletionTimestamp } : {}),
    },
    spec: fields.spec ?? {},
    status: fields.status ?? {},
  };
}

function change(type: ChangeType, object: KubeObject, previous?: KubeObject): ResourceChange {
  return {
    resource: object.metadata?.namespace ? services : nodes,
    type,
    key: `Node/${object.metadata?.name ?? ''}`,
    object,
    previous,
    observedAt: 1_700_000_000_000,
  };
}

const ready = { conditions: [{ type: 'Ready', status: 'True' }] };
const taint = (key: string): object => ({ taints: [{ key, effect: 'NoSchedule' }] });

describe('relay backoff', () => {
  it('doubles from the initial delay to the ceiling, jitter only adding', () => {
    const policy = { initialMs: 5_000, maxMs: 300_000, jitter: 0.25 };
    assert.deepEqual(
      [1, 2, 3, 4, 5, 6, 7, 8, 100].map((n) => backoffDelay(policy, n, () => 0)),
      [5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 300_000, 300_000, 300_000],
    );
    assert.equal(
      backoffDelay(policy, 1, () => 0.999),
      6_249,
    );
    assert.equal(
      backoffDelay(policy, 10_000, () => 0.5),
      337_500,
    );
  });
});

describe('relay routing table', () => {
  it('parses Go durations', () => {
    assert.deepEqual(['0', '300ms', '5s', '1m30s', '1h', '1.5s', '5', 'soon', ''].map(parseDuration), [
      0,
      300,
      5_000,
      90_000,
      3_600_000,
      1_500,
      undefined,
      undefined,
      undefined,
    ]);
  });

  it('builds from a file, --to flags, K_SINK and period overrides, later ones winning', () => {
    const table = buildRoutingTable(catalogue, {
      file: {
        destinations: { 'node-init': 'http://file/', broker: { url: 'http://broker/', feed: 'all' } },
        periods: { routes: '30s', 'node-init': 0 },
      },
      to: ['node-init=http://flag/', 'routes=https://routes.example/'],
      sink: 'http://sink/',
      periods: { 'node-lifecycle': 1_000 },
    });
    assert.deepEqual(table.destinations, [
      { name: 'node-init', url: 'http://flag/', feed: 'node-init' },
      { name: 'broker', url: 'http://broker/', feed: 'all' },
      { name: 'routes', url: 'https://routes.example/', feed: 'routes' },
      { name: 'sink', url: 'http://sink/', feed: 'all' },
    ]);
    assert.deepEqual(table.periods, { 'node-init': 0, 'node-lifecycle': 1_000, 'service-lb': 0, routes: 30_000 });
  });

  it('takes K_SINK alone as the one destination, with the upstream periods', () => {
    const table = buildRoutingTable(catalogue, readKnativeEnvironment({ K_SINK: 'http://broker-ingress/ns/default' }));
    assert.deepEqual(table.destinations, [{ name: 'sink', url: 'http://broker-ingress/ns/default', feed: 'all' }]);
    assert.deepEqual(table.periods, { 'node-init': 300_000, 'node-lifecycle': 5_000, 'service-lb': 0, routes: 10_000 });
  });

  it('reads K_CE_OVERRIDES, and refuses a bad one', () => {
    assert.deepEqual(readKnativeEnvironment({ K_CE_OVERRIDES: '{"extensions":{"cluster":"east","shard":3}}' }), {
      ceOverrides: { cluster: 'east', shard: '3' },
    });
    assert.throws(() => readKnativeEnvironment({ K_CE_OVERRIDES: '{"extensions":{"Bad-Name":"x"}}' }), RoutingError);
    assert.throws(() => readKnativeEnvironment({ K_CE_OVERRIDES: 'nope' }), /not JSON/);
  });

  it('lists every problem at once', () => {
    assert.throws(
      () =>
        buildRoutingTable(catalogue, {
          to: ['node-init', 'routes=ftp://x', 'other=http://x/'],
          periods: { routes: -1 },
        }),
      (error: unknown) => {
        assert.ok(error instanceof RoutingError);
        assert.equal(error.problems.length, 4, error.problems.join('\n'));
        assert.match(error.message, /period of routes: must be 0 or more ms, got -1/);
        assert.match(error.message, /--to node-init: expected <function>=<url>/);
        assert.match(error.message, /routes: "ftp:\/\/x" must be an http/);
        assert.match(error.message, /other: not a function/);
        return true;
      },
    );
    assert.throws(() => buildRoutingTable(catalogue, {}), /no destination/);
    assert.throws(
      () =>
        buildRoutingTable(catalogue, {
          file: { destinations: { routes: 'http://x/' }, periods: { routes: 'soon' }, extra: 1 },
        }),
      (error: unknown) => {
        assert.ok(error instanceof RoutingError);
        assert.deepEqual([...error.problems].sort(), [
          'routing file: Unrecognized key: "extra"',
          'routing file: periods.routes: "soon" is not a duration such as 300ms, 5s, 1m30s or 0',
        ]);
        return true;
      },
    );
  });
});

describe('relay routing decisions', () => {
  it('node-init: live nodes with the uninitialized taint', () => {
    const tainted = node({ spec: taint('node.cloudprovider.kubernetes.io/uninitialized') });
    assert.equal(needsInitialization(change('add', tainted)), true);
    assert.equal(needsInitialization(change('update', tainted, node())), true);
    assert.equal(needsInitialization(change('update', node(), tainted)), false);
    assert.equal(needsInitialization(change('delete', tainted)), false);
  });

  it('node-lifecycle: nodes not Ready (no condition counts), or Ready with the shutdown taint', () => {
    assert.equal(needsLifecycleCheck(change('add', node())), true);
    assert.equal(
      needsLifecycleCheck(change('update', node({ status: { conditions: [{ type: 'Ready', status: 'False' }] } }))),
      true,
    );
    assert.equal(needsLifecycleCheck(change('update', node({ status: ready }))), false);
    assert.equal(
      needsLifecycleCheck(
        change('update', node({ status: ready, spec: taint('node.cloudprovider.kubernetes.io/shutdown') })),
      ),
      true,
    );
    assert.equal(needsLifecycleCheck(change('delete', node())), false);
  });

  it('node-lifecycle: an update of a node still not Ready only when what the check reads changed', () => {
    const notReady = { conditions: [{ type: 'Ready', status: 'False' }] };
    const before = nodes.retain(node({ status: notReady, spec: { providerID: 'p://1' } }));
    const now = (fields: Parameters<typeof node>[0]): KubeObject => node({ status: notReady, ...fields });
    const cases: [string, KubeObject, boolean][] = [
      ['a label (node-init, a user)', now({ spec: { providerID: 'p://1' }, labels: { a: 'b' } }), false],
      ['its status reported again', now({ spec: { providerID: 'p://1' } }), false],
      ['Ready → Unknown', node({ spec: { providerID: 'p://1' }, status: { conditions: [] } }), true],
      [
        'the shutdown taint',
        now({ spec: { providerID: 'p://1', ...taint('node.cloudprovider.kubernetes.io/shutdown') } }),
        true,
      ],
      ['the provider ID', now({ spec: { providerID: 'p://2' } }), true],
      [
        'the provider label',
        now({ spec: { providerID: 'p://1' }, labels: { 'node.cirrus-ccm.dev/cloud-provider': 'x' } }),
        true,
      ],
    ];
    for (const [what, object, expected] of cases)
      assert.equal(needsLifecycleCheck(change('update', object, before)), expected, what);
    assert.equal(
      needsLifecycleCheck(
        change('update', now({ spec: { providerID: 'p://1' } }), nodes.retain(node({ status: ready }))),
      ),
      true,
      'Ready → not Ready, through what the relay keeps',
    );
  });

  it("service-lb's node set: adds, deletes, exclusion, providerID, provider label, deletion, the autoscaler's taint; not other changes", () => {
    const base = node({ spec: { providerID: 'p://1' } });
    const cases: [string, KubeObject, boolean][] = [
      [
        'excluded',
        node({
          spec: { providerID: 'p://1' },
          labels: { 'node.kubernetes.io/exclude-from-external-load-balancers': 'true' },
        }),
        true,
      ],
      [
        'excluded with false',
        node({
          spec: { providerID: 'p://1' },
          labels: { 'node.kubernetes.io/exclude-from-external-load-balancers': 'false' },
        }),
        false,
      ],
      ['providerID', node({ spec: { providerID: 'p://2' } }), true],
      ['being deleted', node({ spec: { providerID: 'p://1' }, deletionTimestamp: '2026-01-01T00:00:00Z' }), true],
      ['autoscaler taint', node({ spec: { providerID: 'p://1', ...taint('ToBeDeletedByClusterAutoscaler') } }), true],
      // In a hybrid cluster, the label moves a Node without a provider ID between providers' node sets.
      [
        'provider label',
        node({ spec: { providerID: 'p://1' }, labels: { 'node.cirrus-ccm.dev/cloud-provider': 's' } }),
        true,
      ],
      ['other label', node({ spec: { providerID: 'p://1' }, labels: { a: 'b' } }), false],
      ['readiness', node({ spec: { providerID: 'p://1' }, status: ready }), false],
    ];
    for (const [what, updated, expected] of cases)
      assert.equal(nodeSetMayChange(change('update', updated, base)), expected, what);
    assert.equal(nodeSetMayChange(change('add', base)), true);
    assert.equal(nodeSetMayChange(change('delete', base, base)), true);
  });

  it('routes: adds, deletes, podCIDR(s) and provider label changes', () => {
    const base = node({ spec: { podCIDR: '10.0.1.0/24', podCIDRs: ['10.0.1.0/24'] } });
    assert.equal(
      routesMayChange(
        change('update', node({ spec: { podCIDR: '10.0.1.0/24', podCIDRs: ['10.0.1.0/24', 'fd00::/64'] } }), base),
      ),
      true,
    );
    assert.equal(
      routesMayChange(
        change(
          'update',
          node({ spec: { podCIDR: '10.0.1.0/24', podCIDRs: ['10.0.1.0/24'] }, labels: { x: 'y' } }),
          base,
        ),
      ),
      false,
    );
    assert.equal(
      routesMayChange(
        change(
          'update',
          node({
            spec: { podCIDR: '10.0.1.0/24', podCIDRs: ['10.0.1.0/24'] },
            labels: { 'node.cirrus-ccm.dev/cloud-provider': 'static' },
          }),
          base,
        ),
      ),
      true,
      'a provider label moves the Node to another provider’s routes',
    );
    assert.equal(routesMayChange(change('add', base)), true);
    assert.equal(routesMayChange(change('delete', base)), true);
    const cidr = { podCIDR: '10.0.1.0/24', podCIDRs: ['10.0.1.0/24'] };
    assert.equal(
      routesMayChange(change('update', node({ spec: { ...cidr, providerID: 'aws:///a/i-1' } }), base)),
      true,
      'a provider ID decides the Node’s provider',
    );
    const network = (status: string, reason: string): KubeObject =>
      node({ spec: cidr, status: { conditions: [{ type: 'NetworkUnavailable', status, reason }] } });
    assert.equal(
      routesMayChange(change('update', network('True', 'NoRouteCreated'), network('False', 'RouteCreated'))),
      false,
      'the condition routes writes itself starts no pass (the digest covers it)',
    );
    assert.equal(routesFeed(change('add', base)), 'object', 'the Node’s own event, carrying it (ADR 0030)');
  });

  it('service-lb: Services of type LoadBalancer, or with its finalizer or sync record', () => {
    const svc = (spec: object, metadata: object = {}): KubeObject => ({
      metadata: { name: 's', namespace: 'ns', ...metadata },
      spec,
    });
    assert.equal(involvesLoadBalancer(svc({ type: 'LoadBalancer' })), true);
    assert.equal(involvesLoadBalancer(svc({ type: 'ClusterIP' })), false);
    assert.equal(
      involvesLoadBalancer(svc({ type: 'ClusterIP' }, { finalizers: ['service.kubernetes.io/load-balancer-cleanup'] })),
      true,
    );
    assert.equal(
      involvesLoadBalancer(svc({ type: 'NodePort' }, { annotations: { 'service-lb.cirrus-ccm.dev/synced': '{}' } })),
      true,
    );
  });

  it("service-lb: the echo of its own finalizer is no work; the finalizer's removal, or a cleanup, is", () => {
    const cleanup = 'service.kubernetes.io/load-balancer-cleanup';
    const svc = (type: string, finalizers: string[], extra: object = {}): KubeObject => ({
      metadata: { name: 's', namespace: 'ns', resourceVersion: String(finalizers.length), finalizers, ...extra },
      spec: { type, ports: [{ port: 80, protocol: 'TCP' }] },
    });
    const lb = svc('LoadBalancer', []);
    assert.equal(
      serviceLbFeed(change('update', svc('LoadBalancer', [cleanup]), lb)),
      undefined,
      'added before an ensure',
    );
    assert.equal(
      serviceLbFeed(change('update', svc('LoadBalancer', [cleanup, 'other/x']), svc('LoadBalancer', [cleanup]))),
      undefined,
      "another controller's finalizer",
    );
    assert.equal(serviceLbFeed(change('update', lb, svc('LoadBalancer', [cleanup]))), 'object', 'removed: put it back');
    assert.equal(
      serviceLbFeed(change('update', svc('ClusterIP', [cleanup]), svc('ClusterIP', []))),
      'object',
      'added where no load balancer is wanted: a cleanup',
    );
    assert.equal(
      serviceLbFeed(
        change('update', svc('LoadBalancer', [cleanup], { deletionTimestamp: 'now' }), svc('LoadBalancer', [cleanup])),
      ),
      'object',
      'deleted',
    );
    assert.equal(serviceLbFeed(change('update', svc('NodePort', [cleanup]), svc('LoadBalancer', [cleanup]))), 'object');
    assert.equal(serviceLbFeed(change('add', svc('LoadBalancer', [cleanup]))), 'object');
  });

  it('routes one node change to each feed that wants it, under the right keys', () => {
    const table = buildRoutingTable(catalogue, {
      to: [
        'node-init=http://a/',
        'service-lb=http://b/',
        'routes=http://c/',
        'all=http://d/',
        'node-lifecycle=http://e/',
      ],
    });
    const routed = route(
      table,
      change('add', node({ spec: taint('node.cloudprovider.kubernetes.io/uninitialized'), status: ready })),
    );
    assert.deepEqual(
      routed.map((r) => [r.destination.name, r.key, r.outgoing.kind]),
      [
        ['node-init', 'Node/n1', 'object'],
        ['service-lb', 'reconcile.all/service-lb', 'trigger'],
        ['routes', 'Node/n1', 'object'],
        ['all', 'Node/n1', 'object'],
        ['all', 'reconcile.all/service-lb', 'trigger'],
      ],
    );
  });

  it('merges waiting changes: add+update is an add, anything+delete a delete, another incarnation is kept apart', () => {
    const object = (type: ChangeType, uid = 'uid-1'): Outgoing => ({
      kind: 'object',
      change: change(type, node({ uid })),
    });
    const typeOf = (outgoing: Outgoing | undefined): string | undefined =>
      outgoing?.kind === 'object' ? outgoing.change.type : outgoing?.kind;
    assert.equal(typeOf(mergeOutgoing(object('add'), object('update'))), 'add');
    assert.equal(typeOf(mergeOutgoing(object('add'), object('delete'))), 'delete');
    assert.equal(typeOf(mergeOutgoing(object('update'), object('update'))), 'update');
    assert.equal(mergeOutgoing(object('delete', 'old'), object('add', 'new')), undefined);
    const trigger: Outgoing = { kind: 'trigger', target: 'routes', reason: 'nodes' };
    const periodic: Outgoing = { ...trigger, reason: 'periodic' };
    assert.equal(mergeOutgoing(trigger, periodic), periodic, 'triggers for one function merge');
  });
});

describe('relay delivery requests', () => {
  const source = 'https://10.96.0.1:443';
  const nodeChange = change('update', {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'worker-1', resourceVersion: '42', uid: 'u' },
  });

  it('are binary-mode CloudEvents in ApiServerSource format', () => {
    const request = eventRequest(
      { kind: 'object', change: nodeChange },
      { source, ceOverrides: { cluster: 'east side' } },
      'id-1',
    );
    assert.deepEqual(request.headers, {
      'ce-cluster': 'east%20side',
      'ce-specversion': '1.0',
      'ce-source': source,
      'ce-type': 'dev.knative.apiserver.resource.update',
      'ce-subject': '/apis/v1/namespaces//nodes/worker-1',
      'ce-time': '2023-11-14T22:13:20.000Z',
      'ce-kind': 'Node',
      'ce-apiversion': 'v1',
      'ce-name': 'worker-1',
      'ce-namespace': '',
      'ce-id': 'id-1',
      'content-type': 'application/json',
    });
    assert.deepEqual(JSON.parse(request.body), nodeChange.object);
  });

  it('are handed over in process as the very event a function reads from the request, the object by reference', () => {
    for (const outgoing of [
      { kind: 'object', change: nodeChange } as const,
      { kind: 'trigger', target: 'node-lifecycle', reason: 'periodic' } as const,
    ]) {
      const context = {
        source,
        ceOverrides: { cluster: 'east side', dataschema: 'https://example.com/s' },
        clock: new ManualClock(1_700_000_000_000),
      };
      const request = eventRequest(outgoing, context, 'id-3');
      const read = readCloudEvent(request.headers, request.body === '' ? undefined : JSON.parse(request.body));
      const handed = outgoingEvent(outgoing, context, 'id-3');
      const absentAsUndefined = (event: CloudEvent): CloudEvent => ({
        ...event,
        subject: event.subject,
        data: event.data,
      });
      assert.deepEqual(absentAsUndefined(handed), absentAsUndefined(read));
      if (outgoing.kind === 'object') assert.equal(handed.data, nodeChange.object, 'the same object, not a copy');
    }
  });

  it('carry triggers without a body, naming their function', () => {
    const request = eventRequest({ kind: 'trigger', target: 'node-lifecycle', reason: 'periodic' }, { source }, 'id-2');
    assert.equal(request.body, '');
    assert.equal(request.headers['content-type'], undefined);
    assert.equal(request.headers['ce-type'], 'dev.cirrus-ccm.reconcile.all');
    assert.equal(request.headers['ce-cirrustarget'], 'node-lifecycle');
    assert.equal(request.headers['ce-cirrusreason'], 'periodic');
  });

  it('are signed when sent, for the path and query of the URL they go to, so that the host verifies them', () => {
    const request = eventRequest({ kind: 'object', change: nodeChange }, { source, secret: 's3cret' });
    assert.equal(request.headers['x-cirrus-signature'], undefined, 'signed by deliver(), which knows the URL');
    const headers = headersFor('http://127.0.0.1:8080/node-init?x=1', request);
    assert.match(headers['x-cirrus-signature'] ?? '', /^t=\d+,n=[0-9a-f]{32},d=[0-9a-f]{64},v4=[0-9a-f]{64}$/);
    const sent = { method: 'POST', url: '/node-init?x=1', headers, body: request.body };
    assert.deepEqual(verifyRequest(sent, { secret: 's3cret' }), { ok: true });
    const refused = { ok: false, reason: 'signature does not match', code: 'CIRRUS_ERR_SIGNATURE_INVALID' };
    assert.deepEqual(verifyRequest({ ...sent, url: '/routes?x=1' }, { secret: 's3cret' }), refused);
    assert.deepEqual(verifyRequest({ ...sent, url: '/node-init?x=2' }, { secret: 's3cret' }), refused);
    assert.deepEqual(
      verifyRequest(
        { ...sent, headers: { ...headers, 'ce-type': 'dev.knative.apiserver.resource.delete' } },
        { secret: 's3cret' },
      ),
      refused,
    );
    assert.equal(
      headersFor('http://127.0.0.1:8080/', eventRequest({ kind: 'object', change: nodeChange }, { source }))[
        'x-cirrus-signature'
      ],
      undefined,
      'unsigned without a secret',
    );
  });

  it('read replies into outcomes', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    assert.deepEqual(classify(202, '{}', null), { kind: 'accepted', status: 202 });
    assert.deepEqual(classify(400, '{"error":"invalid","problems":["a","b"]}', null), {
      kind: 'rejected',
      status: 400,
      reason: 'invalid (a; b)',
    });
    assert.deepEqual(classify(503, '{"error":"later"}', '7'), {
      kind: 'retry',
      reason: 'retry-after',
      status: 503,
      detail: 'HTTP 503: later',
      retryAfterMs: 7_000,
    });
    assert.deepEqual(classify(429, '', 'Thu, 01 Jan 2026 00:00:30 GMT', now), {
      kind: 'retry',
      reason: 'retry-after',
      status: 429,
      detail: 'HTTP 429: (no body)',
      retryAfterMs: 30_000,
    });
    assert.deepEqual(classify(503, 'busy', null), {
      kind: 'retry',
      reason: 'status',
      status: 503,
      detail: 'HTTP 503: busy',
    });
    assert.deepEqual(classify(401, '{"error":"unauthorized"}', '5'), {
      kind: 'retry',
      reason: 'status',
      status: 401,
      detail: 'HTTP 401: unauthorized',
    });
    assert.equal(parseRetryAfter('soon'), undefined);
  });
});

describe('relay outcomes of a hand-over in process', () => {
  it('follow the reply classes: 2xx accepted with its cloud calls, 400 rejected, 503 after its Retry-After, others retried; failures marked as logged by the function', () => {
    assert.deepEqual(localOutcome({ status: 202, body: {}, cloudCalls: 2 }), {
      kind: 'accepted',
      status: 202,
      cloudCalls: 2,
    });
    assert.deepEqual(localOutcome({ status: 202, body: {} }), { kind: 'accepted', status: 202 });
    assert.deepEqual(
      localOutcome({
        status: 400,
        body: { error: 'invalid event', code: 'CIRRUS_ERR_INVALID_EVENT', problems: ['x'] },
      }),
      { kind: 'rejected', status: 400, reason: 'invalid event (x)', logged: true },
    );
    assert.deepEqual(
      localOutcome({ status: 503, body: { error: 'later', code: 'CIRRUS_ERR_RETRY_LATER' }, retryAfterSeconds: 7 }),
      {
        kind: 'retry',
        reason: 'retry-after',
        status: 503,
        detail: 'status 503: later',
        retryAfterMs: 7000,
        logged: true,
      },
    );
    assert.deepEqual(localOutcome({ status: 500, body: { error: 'boom', code: 'CIRRUS_ERR_INTERNAL' } }), {
      kind: 'retry',
      reason: 'status',
      status: 500,
      detail: 'status 500: boom',
      logged: true,
    });
  });
});

describe('relay readiness', () => {
  const base = { identity: 'relay-1', holder: 'relay-0' };
  const cases: { name: string; status: RelayStatus; ready: boolean; state: string }[] = [
    {
      name: 'a leader with every watch open',
      status: { ...base, role: 'leader', ready: true, watches: { nodes: true } },
      ready: true,
      state: 'ready',
    },
    {
      name: 'a leader still opening a watch',
      status: { ...base, role: 'leader', ready: false, watches: { nodes: false } },
      ready: false,
      state: 'not-ready',
    },
    {
      name: 'a standby that reads the Lease',
      status: { ...base, role: 'standby', ready: true, watches: {} },
      ready: true,
      state: 'standby',
    },
    {
      name: 'a stopped relay',
      status: { ...base, role: 'stopped', ready: false, watches: {} },
      ready: false,
      state: 'stopped',
    },
  ];
  for (const { name, status, ready, state } of cases) {
    it(`${name}: ${ready ? 200 : 503} with status ${state}`, () => {
      assert.deepEqual(relayReadiness(status), { ready, body: { status: state, ...status } });
    });
  }
});

describe('relay delivery queue', () => {
  interface Sent {
    readonly destination: string;
    readonly key: string;
    readonly value: string;
  }

  interface Harness {
    readonly queue: DeliveryQueue<string>;
    readonly sent: Sent[];
    readonly metrics: ReturnType<typeof createRelayMetrics>;
    /** The queue's clock: retry delays pass only when the test advances it. */
    readonly clock: ManualClock;
  }

  function queue(send: (sent: Sent) => Promise<DeliveryOutcome> | DeliveryOutcome, concurrency = 10): Harness {
    const sent: Sent[] = [];
    const metrics = createRelayMetrics({ processMetrics: false, gauges: () => undefined });
    const clock = new ManualClock(0);
    const q = new DeliveryQueue<string>({
      concurrency,
      retry: { initialMs: 20, maxMs: 80, jitter: 0 },
      // Values are "<id>:<n>": same id merges (the later wins), another id is kept apart.
      merge: (older, newer) => (older.split(':')[0] === newer.split(':')[0] ? newer : undefined),
      send: async (destination, key, value) => {
        const item = { destination, key, value };
        sent.push(item);
        return send(item);
      },
      metrics,
      log: silentLogger(),
      clock,
    });
    return { queue: q, sent, metrics, clock };
  }

  // Lets the scripted sends answer and the queue act on the answers (all of it is promise jobs).
  async function settle(): Promise<void> {
    await nextTurn();
  }
  const accepted: DeliveryOutcome = { kind: 'accepted', status: 202 };

  it('coalesces what waits behind a delivery in flight, and keeps other incarnations apart', async () => {
    let release: () => void = () => undefined;
    const first = new Promise<void>((resolve) => {
      release = resolve;
    });
    const { queue: q, sent } = queue(async ({ value }) => {
      if (value === 'a:1') await first;
      return accepted;
    });
    q.push('d', 'k', 'a:1');
    q.push('d', 'k', 'a:2');
    assert.equal(q.push('d', 'k', 'a:3'), 'coalesced');
    assert.equal(q.push('d', 'k', 'b:1'), 'queued');
    q.push('d', 'k', 'b:2');
    release();
    await q.idle();
    assert.deepEqual(
      sent.map((s) => s.value),
      ['a:1', 'a:3', 'b:2'],
    );
  });

  it('never has two deliveries of one key in flight, and respects the global limit', async () => {
    let inFlight = 0;
    let most = 0;
    const perKey = new Map<string, number>();
    let mostPerKey = 0;
    const { queue: q } = queue(async ({ key }) => {
      inFlight += 1;
      perKey.set(key, (perKey.get(key) ?? 0) + 1);
      most = Math.max(most, inFlight);
      mostPerKey = Math.max(mostPerKey, perKey.get(key) ?? 0);
      await nextTurn();
      inFlight -= 1;
      perKey.set(key, (perKey.get(key) ?? 0) - 1);
      return accepted;
    }, 3);
    for (let i = 0; i < 40; i += 1) q.push('d', `k${i % 8}`, `x${i}:${i}`);
    await q.idle();
    assert.equal(most, 3);
    assert.equal(mostPerKey, 1);
  });

  it('logs a failed delivery at warn, short and naming its destination, unless the function logged it (in process: debug)', async () => {
    const lines: { level: number; destination?: string; detail?: string; msg: string }[] = [];
    const log = pino(
      { level: 'debug' },
      { write: (text: string) => void lines.push(JSON.parse(text) as (typeof lines)[0]) },
    );
    const answers: DeliveryOutcome[] = [
      { kind: 'retry', reason: 'status', status: 500, detail: `HTTP 500: ${'x'.repeat(300)}` },
      { kind: 'retry', reason: 'status', status: 500, detail: 'status 500: boom', logged: true },
      accepted,
    ];
    const clock = new ManualClock(0);
    const q = new DeliveryQueue<string>({
      concurrency: 1,
      retry: { initialMs: 20, maxMs: 80, jitter: 0 },
      merge: (_older, newer) => newer,
      send: () => Promise.resolve(answers.shift() ?? accepted),
      metrics: createRelayMetrics({ processMetrics: false, gauges: () => undefined }),
      log,
      clock,
    });
    q.push('node-init', 'Node/a', 'a:1');
    await nextTurn();
    clock.advance(20);
    await nextTurn();
    clock.advance(40);
    await q.idle();
    const failed = lines.filter((line) => line.msg === 'delivery failed; retrying');
    assert.deepEqual(
      failed.map((line) => [line.level, line.destination]),
      [
        [40, 'node-init'],
        [20, 'node-init'],
      ],
    );
    assert.equal(failed[0]?.detail?.length, 120);
  });

  it('retries with backoff until accepted, merging newer values into the retry', async () => {
    let failures = 2;
    const {
      queue: q,
      sent,
      metrics,
      clock,
    } = queue(() => {
      if (failures === 0) return accepted;
      failures -= 1;
      return { kind: 'retry', reason: 'status', status: 500, detail: 'boom' };
    });
    q.push('d', 'k', 'a:1');
    await settle();
    assert.deepEqual(
      clock.pending.map((p) => p.ms),
      [20],
      'the first retry waits the initial delay',
    );
    q.push('d', 'k', 'a:2');
    clock.advance(19);
    await settle();
    assert.equal(sent.length, 1, 'not retried before the delay is over');
    clock.advance(1);
    await settle();
    assert.deepEqual(
      clock.pending.map((p) => p.ms),
      [40],
      'the second retry waits twice as long',
    );
    clock.advance(40);
    await q.idle();
    assert.deepEqual(
      sent.map((s) => s.value),
      ['a:1', 'a:2', 'a:2'],
    );
    assert.equal(await metric(metrics.registry, 'cirrus_relay_retries_total', { reason: 'status' }), 2);
  });

  it('drops a rejected value and goes on with the next', async () => {
    const { queue: q, sent } = queue(({ value }) =>
      value === 'a:1' ? { kind: 'rejected', status: 400, reason: 'bad' } : accepted,
    );
    q.push('d', 'k', 'a:1');
    q.push('d', 'k', 'b:1');
    await q.idle();
    assert.deepEqual(
      sent.map((s) => s.value),
      ['a:1', 'b:1'],
    );
  });

  it("observes a watch event's age when its delivery is accepted, from the oldest event it carries, and no age for a periodic push", async () => {
    let failures = 1;
    const {
      queue: q,
      metrics,
      clock,
    } = queue(() => {
      if (failures === 0) return accepted;
      failures -= 1;
      return { kind: 'retry', reason: 'status', status: 500, detail: 'boom' };
    });
    const histogram = async (name: string): Promise<{ count: number; sum: number; labels: object[] }> => {
      const values = ((await metrics.registry.getSingleMetric(name)?.get())?.values ??
        []) as MetricValueWithName<string>[];
      const of = (suffix: string): typeof values => values.filter((v) => v.metricName === `${name}_${suffix}`);
      return {
        count: of('count').reduce((n, v) => n + v.value, 0),
        sum: of('sum').reduce((n, v) => n + v.value, 0),
        labels: of('count').map((v) => v.labels),
      };
    };
    q.push('d', 'Service/ns/web', 'a:1', { event: 'services' });
    await settle();
    clock.advance(15);
    // A newer event joins the retry: the delivery's age is still the first one's.
    q.push('d', 'Service/ns/web', 'a:2', { event: 'services' });
    clock.advance(5);
    await q.idle();
    assert.deepEqual(await histogram('cirrus_relay_event_age_seconds'), {
      count: 1,
      sum: 0.02,
      labels: [{ destination: 'd', resource: 'services' }],
    });
    q.push('d', 'reconcile.all', 't:1', { skipIfBusy: true });
    await q.idle();
    assert.equal((await histogram('cirrus_relay_event_age_seconds')).count, 1, 'a periodic trigger is no event');
    assert.equal((await histogram('cirrus_relay_delivery_latency_seconds')).count, 2, 'both are deliveries');
  });

  it('skips a periodic push while the key is busy', () => {
    const { queue: q } = queue(() => new Promise<DeliveryOutcome>(() => undefined));
    assert.equal(q.push('d', 'all', 't:1', { skipIfBusy: true }), 'queued');
    assert.equal(q.push('d', 'all', 't:2', { skipIfBusy: true }), 'skipped');
    assert.equal(q.push('d', 'all', 't:3'), 'queued');
    q.stop();
  });

  it('caps a Retry-After at the backoff ceiling', async () => {
    let first = true;
    const {
      queue: q,
      sent,
      clock,
    } = queue(() => {
      if (!first) return accepted;
      first = false;
      return { kind: 'retry', reason: 'retry-after', detail: '503', retryAfterMs: 3_600_000 };
    });
    q.push('d', 'k', 'a:1');
    await settle();
    assert.deepEqual(
      clock.pending.map((p) => p.ms),
      [80],
      'waits the 80 ms ceiling, not an hour',
    );
    clock.advance(80);
    await q.idle();
    assert.equal(sent.length, 2);
  });

  it('releases keys waiting on an unreachable destination as soon as it answers again', async () => {
    let up = false;
    const sent: string[] = [];
    const clock = new ManualClock(0);
    const q = new DeliveryQueue<string>({
      concurrency: 5,
      retry: { initialMs: 60_000, maxMs: 60_000, jitter: 0 },
      merge: (_older, newer) => newer,
      send: (_destination, _key, value) => {
        sent.push(value);
        return Promise.resolve<DeliveryOutcome>(
          up ? accepted : { kind: 'retry', reason: 'unreachable', detail: 'ECONNREFUSED' },
        );
      },
      metrics: createRelayMetrics({ processMetrics: false, gauges: () => undefined }),
      log: silentLogger(),
      clock,
    });
    q.push('d', 'a', 'a:1');
    q.push('d', 'b', 'b:1');
    await settle();
    assert.deepEqual(q.retrying(), new Map([['d', 2]]));
    up = true;
    q.push('d', 'c', 'c:1');
    await q.idle();
    assert.deepEqual(
      sent.sort(),
      ['a:1', 'a:1', 'b:1', 'b:1', 'c:1'],
      'a and b went again right after c was accepted, not a minute later',
    );
    assert.equal(clock.now(), 0, 'without the clock moving');
    assert.deepEqual(clock.pending, [], 'and their retry waits are over');
  });
});
