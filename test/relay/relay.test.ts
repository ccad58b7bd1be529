// The relay against the real API server, delivering to stand-ins for the functions that answer as
// each test tells them — function servers on loopback, or functions of the test's own process that
// the relay hands its events to (relay/transport.ts): every test that does not depend on the way
// runs both ways. The wire format, what the function host makes of it, coalescing, per-key
// ordering, retries, rejection, periodic triggers; over HTTP only: signing, outages, readiness, and
// recovery from the relay's own failures, which do not depend on the way.
//
// Other test files create Nodes in the same cluster at the same time: assertions look only at the
// objects a test created (and the relay delivers the others too, which is fine).

import assert from 'node:assert/strict';
import { before, describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import type { MetricValueWithName } from 'prom-client';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type KubeConfig } from '@kubernetes/client-node';
import { createRelayMetrics } from '../../relay/metrics.ts';
import { relayReadiness, type Relay, type RelayOptions, type RoutingSources } from '../../relay/index.ts';
import type { LocalHandler } from '../../shared/wire/index.ts';
import { nodes } from '../../relay/resources.ts';
import { ResourceWatch, defaultWatchSettings, type ResourceChange } from '../../relay/watch.ts';
import { buildMultiHost } from '../../shared/host/app.ts';
import type { FunctionDefinition, ObjectKey, ReconcileOptions, Report } from '../../shared/host/function.ts';
import { buildProbeApp } from '../../shared/host/probes.ts';
import { serve } from '../../shared/host/serve.ts';
import { signatureHeader, verifyRequest } from '../../shared/wire/signing.ts';
import { createNode, newNode, silentLogger, uninitialized, withAddresses, withReady } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';
import {
  functionServer,
  gate,
  metric,
  reaching,
  ready,
  standIn,
  testRelay,
  transportNames,
  waitFor,
  type Received,
} from './harness.ts';

const mergePatch = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

// A function definition that records what the host asks of it.
interface Call {
  readonly key: ObjectKey | 'all';
  readonly lastKnown: unknown;
  readonly claimVerified?: boolean | undefined;
}

function recordingDefinition(calls: Call[]): FunctionDefinition {
  const report = (options: ReconcileOptions): Report => ({
    function: 'node-init',
    dryRun: options.dryRun,
    objects: [],
  });
  return {
    name: 'node-init',
    kinds: ['Node', 'Service'],
    reconcileOne: (key, options) => {
      calls.push({ key, lastKnown: options.lastKnown, claimVerified: options.claimVerified });
      return Promise.resolve(report(options));
    },
    reconcileAll: (options) => {
      calls.push({ key: 'all', lastKnown: undefined });
      return Promise.resolve(report(options));
    },
  };
}

// ApiServerSource's attributes for a Node, and the object as data.
function assertNodeEvent(received: Received, name: string): void {
  const h = received.headers;
  assert.equal(h['ce-specversion'], '1.0');
  assert.equal(h['ce-subject'], `/apis/v1/namespaces//nodes/${name}`);
  assert.equal(h['ce-kind'], 'Node');
  assert.equal(h['ce-apiversion'], 'v1');
  assert.equal(h['ce-name'], name);
  assert.equal(h['ce-namespace'], '');
  assert.equal(h['content-type'], 'application/json');
  assert.match(String(h['ce-id']), /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  assert.ok(!Number.isNaN(Date.parse(String(h['ce-time']))));
  assert.equal(h['x-cirrus-signature'], undefined, 'unsigned without a secret');
  const data = JSON.parse(received.body) as { kind?: string; apiVersion?: string; metadata: Record<string, unknown> };
  assert.equal(data.kind, 'Node');
  assert.equal(data.apiVersion, 'v1');
  assert.equal(data.metadata['name'], name);
  assert.equal(data.metadata['managedFields'], undefined, 'managedFields are left out');
}

for (const transport of transportNames)
  describe(`relay (${transport})`, { skip: controlPlaneSkip }, () => {
    let admin: KubeConfig;
    let core: CoreV1Api;
    let server: string;
    before(async () => {
      const cluster = await testCluster();
      admin = cluster.admin;
      core = admin.makeApiClient(CoreV1Api);
      server = cluster.info.server;
    });

    // Tests that run over HTTP only: they need a connection, a signature, or nothing of the transport.
    function httpOnly(name: string, fn: (t: TestContext) => Promise<void>): void {
      if (transport === 'http') it(name, fn);
    }

    // A relay reaching the destinations of `routing` the way of this suite.
    function relayTo(
      t: TestContext,
      routing: RoutingSources,
      options: Partial<RelayOptions> = {},
      handlers?: ReadonlyMap<string, LocalHandler>,
    ): Relay {
      return testRelay(t, admin, routing, { ...reaching(transport, routing.to ?? [], handlers), ...options });
    }

    async function label(name: string, labels: Record<string, string>): Promise<void> {
      await core.patchNode({ name, body: { metadata: { labels } } }, mergePatch);
    }

    // The host serving a recording definition: its URL (as one function of a multi-function app, as
    // under `cirrus start`), and its handler for the relay in process.
    async function servedHost(
      t: TestContext,
      calls: Call[],
      auth?: { secret: string },
    ): Promise<{ url: string; handler: LocalHandler }> {
      const { app, local } = await buildMultiHost([recordingDefinition(calls)], {
        logger: silentLogger(),
        processMetrics: false,
        pressure: false,
        ...(auth ? { auth } : {}),
      });
      const handler = local.handlers.get('node-init');
      if (handler === undefined) throw new Error('no handler for node-init');
      const stop = new AbortController();
      const serving = await serve(app, { port: 0, host: '127.0.0.1', signal: stop.signal, graceMs: 100 });
      t.after(async () => {
        stop.abort();
        await serving.closed;
      });
      return { url: `${serving.address}/node-init`, handler };
    }

    it('delivers a Node add, update and delete in ApiServerSource binary mode', async (t) => {
      const fn = await standIn(t, transport);
      const relay = relayTo(t, { to: [`all=${fn.url}`] });
      await ready(relay);
      const name = uniqueName('wire');
      await createNode(core, newNode(name, uninitialized));
      await waitFor('the add', () => fn.about(name).length === 1);
      await label(name, { step: 'two' });
      await waitFor('the update', () => fn.about(name).length === 2);
      await core.deleteNode({ name });
      await waitFor('the delete', () => fn.about(name).length === 3);

      assert.deepEqual(
        fn.about(name).map((r) => r.headers['ce-type']),
        [
          'dev.knative.apiserver.resource.add',
          'dev.knative.apiserver.resource.update',
          'dev.knative.apiserver.resource.delete',
        ],
      );
      for (const received of fn.about(name)) assertNodeEvent(received, name);
      assert.ok(
        fn.about(name).every((r) => r.headers['ce-source'] === server),
        'source is the API server URL',
      );
      const [, update, deletion] = fn.about(name);
      assert.equal(update?.data?.metadata?.labels?.['step'], 'two');
      assert.equal(deletion?.data?.metadata?.labels?.['step'], 'two', 'the delete carries the last known state');
      assert.equal(
        await metric(relay.registry, 'cirrus_relay_lists_total', { resource: 'nodes', reason: 'initial' }),
        1,
      );
    });

    it('delivers Services with their namespace in subject and extensions', async (t) => {
      const fn = await standIn(t, transport);
      const relay = relayTo(t, { to: [`service-lb=${fn.url}`] });
      await ready(relay);
      const name = uniqueName('svc');
      await core.createNamespacedService({
        namespace: 'default',
        body: { metadata: { name }, spec: { type: 'LoadBalancer', ports: [{ port: 80 }] } },
      });
      await waitFor('the Service', () => fn.about(name).length === 1);
      const [received] = fn.about(name);
      assert.equal(received?.headers['ce-subject'], `/apis/v1/namespaces/default/services/${name}`);
      assert.equal(received.headers['ce-namespace'], 'default');
      assert.equal(received.headers['ce-kind'], 'Service');
      // Its age, from the watch event to the function's acceptance, by the event's resource.
      const ages = async (): Promise<number> =>
        (
          ((await relay.registry.getSingleMetric('cirrus_relay_event_age_seconds')?.get())?.values ??
            []) as MetricValueWithName<string>[]
        )
          .filter((v) => v.metricName === 'cirrus_relay_event_age_seconds_count')
          .filter((v) => v.labels['destination'] === 'service-lb' && v.labels['resource'] === 'services')
          .reduce((n, v) => n + v.value, 0);
      await waitFor('the event age', async () => (await ages()) >= 1);
      await core.deleteNamespacedService({ name, namespace: 'default' });
      await waitFor('the delete', () => fn.about(name).some((r) => r.type === 'delete'));
    });

    it("sends service-lb the digest of the load balancers' nodes, which a node joining changes, and no one else", async (t) => {
      const [lb, init] = [await standIn(t, transport), await standIn(t, transport)];
      const relay = relayTo(t, { to: [`service-lb=${lb.url}`, `node-init=${init.url}`] });
      await ready(relay);
      const [service, node] = [uniqueName('digest'), uniqueName('digest-node')];
      await core.createNamespacedService({
        namespace: 'default',
        body: { metadata: { name: service }, spec: { type: 'LoadBalancer', ports: [{ port: 80 }] } },
      });
      await waitFor('the Service', () => lb.about(service).length === 1);
      await createNode(core, newNode(node, uninitialized));
      await waitFor('the Node at node-init', () => init.about(node).length >= 1);
      await waitFor('the fan-out for the new node', () => lb.about(service).length >= 2);
      const digests = lb.about(service).map((r) => r.headers['ce-cirrusnodeset']);
      assert.ok(
        digests.every((d) => typeof d === 'string' && /^[0-9a-f]{16}$/.test(d)),
        JSON.stringify(digests),
      );
      assert.notEqual(digests[0], digests.at(-1), 'the node set changed');
      assert.equal(init.about(node)[0]?.headers['ce-cirrusnodeset'], undefined);
      await core.deleteNode({ name: node });
      await core.deleteNamespacedService({ name: service, namespace: 'default' });
    });

    it('is understood by the function host: keys, the last known state on delete, reconcile.all', async (t) => {
      const calls: Call[] = [];
      const { url, handler } = await servedHost(t, calls);
      const relay = relayTo(t, { to: [`all=${url}`], periods: { routes: 100 } }, {}, new Map([['all', handler]]));
      await ready(relay);
      const name = uniqueName('host');
      await createNode(
        core,
        newNode(name, (node) => {
          node.metadata = { ...node.metadata, labels: { kept: 'yes' } };
        }),
      );
      await waitFor('the add to reach the definition', () => calls.some((c) => c.key !== 'all' && c.key.name === name));
      await core.deleteNode({ name });
      await waitFor('the delete', () => calls.filter((c) => c.key !== 'all' && c.key.name === name).length === 2);
      const [, deletion] = calls.filter((c) => c.key !== 'all' && c.key.name === name);
      assert.deepEqual(deletion?.key, { kind: 'Node', name });
      assert.equal(
        (deletion.lastKnown as { metadata?: { labels?: Record<string, string> } }).metadata?.labels?.['kept'],
        'yes',
      );
      if (transport === 'in-process') {
        const [add] = calls.filter((c) => c.key !== 'all' && c.key.name === name);
        assert.equal(add?.claimVerified, true, 'a hand-over in process is a verified claim');
        assert.equal(deletion.claimVerified, undefined, 'a delete claims nothing: it is read (ADR 0022)');
      }
      await waitFor('a periodic reconcile.all', () => calls.some((c) => c.key === 'all'));
      assert.equal(
        await metric(relay.registry, 'cirrus_relay_deliveries_total', { outcome: 'rejected' }),
        0,
        'the host rejected nothing',
      );
    });

    httpOnly(
      'signs requests: a host with the secret accepts them, and answers 401 to a relay without it',
      async (t) => {
        const calls: Call[] = [];
        const { url } = await servedHost(t, calls, { secret: 'relay-secret' });
        const signed = relayTo(t, { to: [`node-init=${url}`] }, { secret: 'relay-secret' });
        const unsigned = relayTo(t, { to: [`node-init=${url}`] });
        await Promise.all([ready(signed), ready(unsigned)]);
        const name = uniqueName('signed');
        await createNode(core, newNode(name, uninitialized));
        await waitFor('the signed delivery', () => calls.some((c) => c.key !== 'all' && c.key.name === name));
        await waitFor(
          'the unsigned relay to be refused and retry',
          async () => (await metric(unsigned.registry, 'cirrus_relay_retries_total', { reason: 'status' })) >= 2,
        );
        assert.equal(await metric(unsigned.registry, 'cirrus_relay_deliveries_total', { outcome: 'accepted' }), 0);
        assert.equal(
          calls.filter((c) => c.key !== 'all' && c.key.name === name).length,
          1,
          'only the signed relay got through',
        );
      },
    );

    // A relay feeding `destination` (whose reply to the add of the object `name` waits until `held`
    // opens) and `witness` (everything, never held): what is queued meanwhile, and what the relay saw.
    async function heldAtAdd(t: TestContext, prefix: string, destination: string) {
      const fn = await standIn(t, transport);
      const witness = await standIn(t, transport);
      const held = gate();
      const name = uniqueName(prefix);
      fn.respond = async (request) => {
        if (request.name === name && request.type === 'add') await held.opened;
        return { status: 202 };
      };
      const relay = relayTo(t, { to: [`${destination}=${fn.url}`, `all=${witness.url}`] });
      await ready(relay);
      return { fn, witness, held, name, relay };
    }

    it('coalesces the changes made while a delivery is in flight into one, the latest state winning', async (t) => {
      const { fn, witness, held, name, relay } = await heldAtAdd(t, 'coalesce', 'node-init');
      await createNode(core, newNode(name, uninitialized));
      await waitFor('the add to be in flight', () => fn.about(name).length === 1);
      for (let step = 1; step <= 5; step += 1) await label(name, { step: String(step) });
      // The unblocked destination has seen the last change: so has the relay.
      await waitFor('the relay to see every update', () =>
        witness.about(name).some((r) => r.data?.metadata?.labels?.['step'] === '5'),
      );
      held.open();
      await waitFor('the coalesced update', () => fn.about(name).length === 2);
      await sleep(300);
      assert.deepEqual(
        fn.about(name).map((r) => [r.type, r.data?.metadata?.labels?.['step']]),
        [
          ['add', undefined],
          ['update', '5'],
        ],
      );
      assert.ok((await metric(relay.registry, 'cirrus_relay_coalesced_total', { destination: 'node-init' })) >= 4);
    });

    it('sends a queued Service as its watch has it when sent, with the changes its feed let pass since', async (t) => {
      const { fn, witness, held, name } = await heldAtAdd(t, 'latest', 'service-lb');
      await core.createNamespacedService({
        namespace: 'default',
        body: { metadata: { name }, spec: { type: 'LoadBalancer', ports: [{ port: 80 }] } },
      });
      t.after(() => core.deleteNamespacedService({ name, namespace: 'default' }).catch(() => undefined));
      await waitFor('the add to be in flight', () => fn.about(name).length === 1);
      // A change of the spec: an update for service-lb, queued behind the add.
      await core.patchNamespacedService(
        { name, namespace: 'default', body: { spec: { ports: [{ port: 81 }] } } },
        mergePatch,
      );
      // A status write (another controller's, or service-lb's own): its feed lets it pass.
      await core.patchNamespacedServiceStatus(
        { name, namespace: 'default', body: { status: { loadBalancer: { ingress: [{ ip: '192.0.2.9' }] } } } },
        mergePatch,
      );
      await waitFor('the relay to see the status', () =>
        witness
          .about(name)
          .some(
            (r) =>
              (r.data as { status?: { loadBalancer?: { ingress?: unknown[] } } } | undefined)?.status?.loadBalancer
                ?.ingress?.length === 1,
          ),
      );
      held.open();
      await waitFor('the queued update', () => fn.about(name).length === 2);
      const sent = fn.about(name)[1]?.data as
        { status?: { loadBalancer?: { ingress?: { ip?: string }[] } } } | undefined;
      // The function gets the Service as it is (ADR 0022: it may start from it), not as it was queued.
      assert.equal(sent?.status?.loadBalancer?.ingress?.[0]?.ip, '192.0.2.9');
    });

    it('sends a queued Node whole, as it was queued: what the relay keeps of a Node has no status', async (t) => {
      const { fn, witness, held, name } = await heldAtAdd(t, 'whole', 'node-init');
      await createNode(core, newNode(name, uninitialized));
      await core.patchNodeStatus(
        { name, body: { status: { addresses: [{ type: 'InternalIP', address: '10.9.0.1' }] } } },
        mergePatch,
      );
      await waitFor('the add to be in flight', () => fn.about(name).length >= 1);
      await label(name, { step: '1' }); // still tainted: an update for node-init, queued behind the add
      await label(name, { step: '2' });
      await waitFor('the relay to see the last change', () =>
        witness.about(name).some((r) => r.data?.metadata?.labels?.['step'] === '2'),
      );
      held.open();
      await waitFor('the queued update', () => fn.about(name).some((r) => r.data?.metadata?.labels?.['step'] === '2'));
      const sent = fn.about(name).find((r) => r.data?.metadata?.labels?.['step'] === '2')?.data as
        { status?: { addresses?: unknown[] } } | undefined;
      assert.deepEqual(sent?.status?.addresses, [{ type: 'InternalIP', address: '10.9.0.1' }]);
    });

    it('keeps each key in order with one delivery in flight, while keys go in parallel', async (t) => {
      const fn = await standIn(t, transport);
      fn.respond = async () => {
        await sleep(Math.random() * 30);
        return { status: 202 };
      };
      const relay = relayTo(t, { to: [`all=${fn.url}`] });
      await ready(relay);
      const names = [uniqueName('order'), uniqueName('order'), uniqueName('order')];
      await Promise.all(
        names.map(async (name) => {
          await createNode(core, newNode(name));
          for (let step = 1; step <= 8; step += 1) await label(name, { step: String(step) });
        }),
      );
      await waitFor('every final state', () =>
        names.every((name) => fn.about(name).at(-1)?.data?.metadata?.labels?.['step'] === '8'),
      );
      for (const name of names) {
        const steps = fn.about(name).map((r) => Number(r.data?.metadata?.labels?.['step'] ?? 0));
        assert.deepEqual(
          steps,
          [...steps].sort((a, b) => a - b),
          `${name} delivered in order: ${steps.join(',')}`,
        );
        const versions = fn.about(name).map((r) => Number(r.data?.metadata?.resourceVersion));
        assert.equal(new Set(versions).size, versions.length, 'no state delivered twice');
      }
      assert.equal(fn.maxInFlightPerKey, 1, 'never two deliveries in flight for one key');
      assert.ok(fn.maxInFlight >= 2, 'different keys are delivered in parallel');
    });

    it('retries after a 500 with backoff until the function accepts', async (t) => {
      const fn = await standIn(t, transport);
      const name = uniqueName('500');
      fn.respond = (request) =>
        request.name === name && fn.about(name).length <= 2
          ? { status: 500, body: '{"error":"boom"}' }
          : { status: 202 };
      const relay = relayTo(t, { to: [`node-init=${fn.url}`] });
      await ready(relay);
      await createNode(core, newNode(name, uninitialized));
      await waitFor('the third attempt', () => fn.about(name).length === 3);
      const [first, second, third] = fn.about(name).map((r) => r.at) as [number, number, number];
      assert.ok(second - first >= 90, `first retry after ~100 ms, was ${second - first}`);
      assert.ok(third - second >= 190, `second retry after ~200 ms, was ${third - second}`);
      await waitFor(
        'the acceptance',
        async () =>
          (await metric(relay.registry, 'cirrus_relay_deliveries_total', {
            destination: 'node-init',
            outcome: 'accepted',
          })) >= 1,
      );
      assert.ok(
        (await metric(relay.registry, 'cirrus_relay_retries_total', { destination: 'node-init', reason: 'status' })) >=
          2,
      );
    });

    httpOnly('signs every attempt afresh: a retry carries its own timestamp and nonce (ADR 0027)', async (t) => {
      // A function refusing the first two attempts as one refuses an expired signature: the retries
      // must not resend the first signature, which the 30 s lifetime would refuse for good.
      const fn = await functionServer(t);
      const name = uniqueName('resign');
      fn.respond = (request) =>
        request.name === name && fn.about(name).length <= 2
          ? { status: 401, body: '{"error":"unauthorized: signature timestamp is more than 30 s older"}' }
          : { status: 202 };
      const relay = relayTo(t, { to: [`node-init=${fn.url}`] }, { secret: 'relay-secret' });
      await ready(relay);
      await createNode(core, newNode(name, uninitialized));
      await waitFor('the third attempt', () => fn.about(name).length === 3);
      const attempts = fn.about(name).map((r) => {
        const header = String(r.headers[signatureHeader]);
        const verified = verifyRequest(
          { method: 'POST', url: '/', headers: r.headers, body: r.body },
          { secret: 'relay-secret', now: () => Math.floor(r.at / 1000) },
        );
        return { nonce: /n=([0-9a-f]{32})/.exec(header)?.[1], hmac: /v4=([0-9a-f]{64})/.exec(header)?.[1], verified };
      });
      assert.equal(new Set(attempts.map((a) => a.nonce)).size, 3, 'a nonce per attempt');
      assert.equal(new Set(attempts.map((a) => a.hmac)).size, 3, 'a signature per attempt');
      for (const attempt of attempts) assert.deepEqual(attempt.verified, { ok: true }, 'each fresh when it arrived');
    });

    it("honours a 503's Retry-After", async (t) => {
      const fn = await standIn(t, transport);
      const name = uniqueName('503');
      fn.respond = (request) =>
        request.name === name && fn.about(name).length === 1
          ? { status: 503, headers: { 'retry-after': '1' }, body: '{"error":"later"}' }
          : { status: 202 };
      const relay = relayTo(t, { to: [`node-init=${fn.url}`] });
      await ready(relay);
      await createNode(core, newNode(name, uninitialized));
      await waitFor('the retry', () => fn.about(name).length === 2, 5_000);
      const [first, second] = fn.about(name).map((r) => r.at) as [number, number];
      assert.ok(
        second - first >= 950,
        `waited the second it was told (the backoff alone is 100 ms), was ${second - first}`,
      );
      assert.ok(
        (await metric(relay.registry, 'cirrus_relay_retries_total', {
          destination: 'node-init',
          reason: 'retry-after',
        })) >= 1,
      );
    });

    it('gives up on a delivery at its timeout and retries it, abandoning the reconcile', async (t) => {
      const fn = await standIn(t, transport);
      const name = uniqueName('slow');
      const held = gate();
      t.after(() => {
        held.open();
      });
      fn.respond = async (request) => {
        if (request.name === name && fn.about(name).length === 1) await held.opened;
        return { status: 202 };
      };
      const relay = relayTo(t, { to: [`node-init=${fn.url}`] }, { deliveryTimeoutMs: 300 });
      await ready(relay);
      await createNode(core, newNode(name, uninitialized));
      await waitFor('the second attempt', () => fn.about(name).length === 2, 5_000);
      const unanswered = await metric(relay.registry, 'cirrus_relay_retries_total', {
        destination: 'node-init',
        reason: 'unreachable',
      });
      assert.ok(unanswered >= 1, 'the timed-out attempt counts as unanswered');
      if (transport === 'in-process')
        assert.equal(fn.about(name)[0]?.signal?.aborted, true, 'the reconcile is abandoned');
      await waitFor(
        'the acceptance',
        async () => (await metric(relay.registry, 'cirrus_relay_deliveries_total', { outcome: 'accepted' })) >= 1,
      );
    });

    it('does not retry a 400, and goes on with the next change of that key', async (t) => {
      const fn = await standIn(t, transport);
      const name = uniqueName('400');
      fn.respond = (request) =>
        request.name === name && fn.about(name).length === 1
          ? { status: 400, body: '{"error":"invalid event","problems":["name: bad"]}' }
          : { status: 202 };
      const relay = relayTo(t, { to: [`node-init=${fn.url}`] });
      await ready(relay);
      await createNode(core, newNode(name, uninitialized));
      await waitFor(
        'the rejection',
        async () => (await metric(relay.registry, 'cirrus_relay_deliveries_total', { outcome: 'rejected' })) === 1,
      );
      await sleep(400); // four backoff periods: a retry would have come
      assert.equal(fn.about(name).length, 1, 'not retried');
      await label(name, { after: 'rejection' });
      await waitFor('the next change', () => fn.about(name).length === 2);
    });

    httpOnly('retries while the connection is refused, and delivers once the function listens', async (t) => {
      const fn = await functionServer(t);
      await fn.stop();
      const relay = relayTo(t, { to: [`node-init=${fn.url}`] });
      await ready(relay);
      const name = uniqueName('refused');
      await createNode(core, newNode(name, uninitialized));
      await waitFor(
        'refused attempts',
        async () => (await metric(relay.registry, 'cirrus_relay_retries_total', { reason: 'unreachable' })) >= 2,
      );
      await fn.start();
      await waitFor('the delivery', () => fn.about(name).length >= 1, 5_000);
    });

    httpOnly('loses no final state while a function is down for a while', async (t) => {
      const fn = await functionServer(t);
      const witness = await functionServer(t);
      await fn.stop();
      const relay = relayTo(t, { to: [`all=${fn.url}`, `node-init=${witness.url}`] });
      await ready(relay);
      const [updated, deleted, created, shortLived] = ['updated', 'deleted', 'created', 'brief'].map(uniqueName) as [
        string,
        string,
        string,
        string,
      ];
      await Promise.all(
        [updated, deleted, created, shortLived].map((name) => createNode(core, newNode(name, uninitialized))),
      );
      await label(updated, { version: '1' });
      await label(updated, { version: '2' });
      await core.deleteNode({ name: deleted });
      await core.deleteNode({ name: shortLived });
      await label(created, { last: 'change' }); // followed by the witness: once it has it, the relay has everything
      await waitFor('the relay to see the changes', () =>
        witness.about(created).some((r) => r.data?.metadata?.labels?.['last'] === 'change'),
      );
      await waitFor(
        'refused attempts for a while',
        async () =>
          (await metric(relay.registry, 'cirrus_relay_retries_total', { destination: 'all', reason: 'unreachable' })) >=
          8,
      );
      assert.equal(fn.received.length, 0);
      await fn.start();

      const last = (name: string): Received | undefined => fn.about(name).at(-1);
      const labelOf = (name: string, key: string): string | undefined => last(name)?.data?.metadata?.labels?.[key];
      await waitFor(
        'the final states',
        () =>
          labelOf(updated, 'version') === '2' &&
          last(deleted)?.type === 'delete' &&
          last(shortLived)?.type === 'delete' &&
          labelOf(created, 'last') === 'change',
        5_000,
      );
      assert.deepEqual(
        fn.about(updated).map((r) => r.type),
        ['add'],
        'an add and its updates waiting together go as one add',
      );
    });

    it('sends periodic reconcile.all triggers, skipping them while one is still in flight', async (t) => {
      const fn = await standIn(t, transport);
      const held = gate();
      let hold = false;
      fn.respond = async (request) => {
        if (hold && request.key === 'all/routes') await held.opened;
        return { status: 202 };
      };
      const relay = relayTo(t, { to: [`routes=${fn.url}`], periods: { routes: 100 } });
      await ready(relay);
      const triggers = (): number => fn.received.filter((r) => r.key === 'all/routes').length;
      await waitFor('three triggers', () => triggers() >= 3);
      // routes also gets a trigger for a Node change (reason nodes) from the other tests' Nodes.
      const trigger = fn.received.find((r) => r.key === 'all/routes' && r.headers['ce-cirrusreason'] === 'periodic');
      assert.equal(trigger?.headers['ce-type'], 'dev.cirrus-ccm.reconcile.all');
      assert.equal(trigger.headers['ce-source'], '/cirrus/relay');
      assert.equal(trigger.body, '');
      assert.equal(trigger.headers['content-type'], undefined, 'no content type without a body');
      hold = true;
      const before = triggers();
      await waitFor('a trigger to be held', () => triggers() === before + 1);
      await sleep(500);
      assert.equal(triggers(), before + 1, 'no trigger piled up behind the one in flight');
      assert.ok(
        (await metric(relay.registry, 'cirrus_relay_triggers_total', { trigger: 'periodic', result: 'skipped' })) >= 3,
      );
      hold = false;
      held.open();
      await waitFor('triggers to resume', () => triggers() >= before + 3);
    });

    // ADR 0029: node-lifecycle's monitor period is one recheck per Node that needs one, from the
    // relay's copy. Before it, the period was a reconcile.all, and the function listed every Node.
    it('rechecks each Node that needs it every monitor period, from its copy: none for Ready Nodes, no reconcile.all', async (t) => {
      const fn = await standIn(t, transport);
      const relay = relayTo(t, { to: [`node-lifecycle=${fn.url}`], periods: { 'node-lifecycle': 100 } });
      await ready(relay);
      const [readyNode, notReady, tainted] = [
        uniqueName('recheck-ready'),
        uniqueName('recheck-not-ready'),
        uniqueName('recheck-tainted'),
      ];
      const shutdownTainted = (node: ReturnType<typeof newNode>): void => {
        node.spec = { taints: [{ key: 'node.cloudprovider.kubernetes.io/shutdown', effect: 'NoSchedule' }] };
      };
      await createNode(core, newNode(readyNode, withReady('True')));
      await createNode(core, newNode(notReady, withReady('False')));
      await createNode(core, newNode(tainted, withReady('True'), shutdownTainted));
      await waitFor(
        'rechecks of the Nodes that need one',
        () => fn.about(notReady).length >= 3 && fn.about(tainted).length >= 3,
      );
      const before = { ready: fn.about(readyNode).length, notReady: fn.about(notReady).length };
      await sleep(1_000);
      assert.equal(fn.about(readyNode).length, before.ready, 'a Ready, untainted Node was rechecked');
      assert.ok(
        fn.about(notReady).length >= before.notReady + 4,
        `${fn.about(notReady).length - before.notReady} rechecks in 1 s at 100 ms`,
      );
      const recheck = fn.about(notReady).at(-1);
      assert.equal(recheck?.type, 'update');
      assert.equal(recheck.data?.metadata?.name, notReady, "the recheck carries the relay's copy of the Node");
      assert.equal(fn.received.filter((r) => r.key === 'all/node-lifecycle').length, 0, 'a reconcile.all was sent');
      const metrics = { destination: 'node-lifecycle' };
      assert.equal(await metric(relay.registry, 'cirrus_relay_triggers_total', { ...metrics, trigger: 'periodic' }), 0);
      assert.ok(
        (await metric(relay.registry, 'cirrus_relay_triggers_total', {
          ...metrics,
          trigger: 'recheck',
          result: 'queued',
        })) > 0,
      );
      await Promise.all([readyNode, notReady, tainted].map((name) => core.deleteNode({ name })));
    });

    // ADR 0031: node-init's refresh period is one recheck per Node the relay knows, initialized or
    // not, carrying its copy with the Node's addresses; counted as rechecks, never a reconcile.all.
    it("rechecks every Node each node-init period, from its copy with the Node's addresses", async (t) => {
      const fn = await standIn(t, transport);
      const relay = relayTo(t, { to: [`node-init=${fn.url}`], periods: { 'node-init': 200 } });
      await ready(relay);
      const [initialized, tainted] = [uniqueName('refresh'), uniqueName('refresh-tainted')];
      await createNode(
        core,
        newNode(initialized, withReady('True'), withAddresses({ type: 'InternalIP', address: '10.9.0.1' })),
      );
      await createNode(core, newNode(tainted, uninitialized));
      await waitFor('rechecks of both Nodes', () => fn.about(initialized).length >= 3 && fn.about(tainted).length >= 4);
      const recheck = fn.about(initialized).at(-1);
      assert.equal(recheck?.type, 'update');
      assert.equal(recheck.headers['ce-cirrusreason'], 'recheck');
      assert.deepEqual(
        (recheck.data as { status?: { addresses?: unknown } } | undefined)?.status?.addresses,
        [{ type: 'InternalIP', address: '10.9.0.1' }],
        "the recheck carries the relay's copy of the Node's addresses",
      );
      assert.equal(fn.received.filter((r) => r.key === 'all/node-init').length, 0, 'a reconcile.all was sent');
      const metrics = { destination: 'node-init' };
      assert.equal(await metric(relay.registry, 'cirrus_relay_triggers_total', { ...metrics, trigger: 'periodic' }), 0);
      assert.ok(
        (await metric(relay.registry, 'cirrus_relay_triggers_total', { ...metrics, trigger: 'recheck' })) >= 3,
        'node-init’s rechecks are counted',
      );
      await Promise.all([initialized, tainted].map((name) => core.deleteNode({ name })));
    });

    httpOnly('reports readiness and metrics over HTTP', async (t) => {
      const fn = await functionServer(t);
      const relay = relayTo(t, { to: [`service-lb=${fn.url}`] });
      const app = await buildProbeApp({
        logger: silentLogger(),
        registry: relay.registry,
        readiness: () => relayReadiness(relay.status()),
      });
      t.after(() => app.close());
      await ready(relay);
      const readyz = await app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(readyz.statusCode, 200);
      assert.deepEqual(
        { ...readyz.json<Record<string, unknown>>(), identity: undefined, holder: undefined },
        {
          status: 'ready',
          role: 'leader',
          ready: true,
          identity: undefined,
          holder: undefined,
          watches: { nodes: true, services: true },
        },
      );
      assert.equal((await app.inject({ method: 'GET', url: '/healthz' })).statusCode, 200);
      const metrics = await app.inject({ method: 'GET', url: '/metrics' });
      assert.match(metrics.body, /cirrus_relay_lists_total\{resource="nodes",reason="initial"\} 1/);
      assert.match(metrics.body, /cirrus_relay_watch_established\{resource="services"\} 1/);
      await relay.stop();
      const stopped = await app.inject({ method: 'GET', url: '/readyz' });
      assert.equal(stopped.statusCode, 503);
      assert.equal(stopped.json<{ status: string }>().status, 'stopped');
    });

    httpOnly(
      'recovers from a failure of its own event handling by relisting, and emits the change again',
      async (t) => {
        const name = uniqueName('handler');
        const changes: ResourceChange[] = [];
        let failed = false;
        const metrics = createRelayMetrics({ processMetrics: false, gauges: () => undefined });
        const watch = new ResourceWatch(nodes, {
          kubeConfig: admin,
          settings: { ...defaultWatchSettings, backoff: { initialMs: 50, maxMs: 200, jitter: 0 } },
          onChange: (change) => {
            if (change.key === `Node/${name}` && !failed) {
              failed = true;
              throw new Error('a bug in the relay');
            }
            changes.push(change);
          },
          metrics,
          log: silentLogger(),
        });
        const stop = new AbortController();
        const running = watch.run(stop.signal);
        t.after(async () => {
          stop.abort();
          await running;
        });
        await waitFor('the watch', () => watch.established);
        await createNode(core, newNode(name));
        await waitFor('the change, emitted again after the relist', () =>
          changes.some((c) => c.key === `Node/${name}` && c.type === 'add'),
        );
        assert.ok(failed);
        assert.equal(await metric(metrics.registry, 'cirrus_relay_lists_total', { reason: 'handler' }), 1);
        await waitFor('the watch to be open again', () => watch.established);
      },
    );
  });
