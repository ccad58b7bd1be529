import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { totalmem } from 'node:os';
import { describe, it, type TestContext } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiException } from '@kubernetes/client-node';
import { Counter, Registry } from 'prom-client';
import { RetryError } from '../../shared/cloud/errors.ts';
import { pacedProvider } from '../../shared/cloud/paced.ts';
import { FakeCloud } from '../../providers/fake/index.ts';
import { buildApp, buildMultiApp, defaultPressure, type AppOptions, type FunctionApp } from '../../shared/host/app.ts';
import { InvalidRequestError } from '../../shared/host/errors.ts';
import type { FunctionDefinition, ObjectKey, ReconcileOptions, Report } from '../../shared/host/function.ts';
import { buildProbeApp, type Readiness } from '../../shared/host/probes.ts';
import { serve } from '../../shared/host/serve.ts';
import { defaultMaxConcurrentRequests, memoryBudget, unconstrainedMemoryBytes } from '../../shared/host/shedding.ts';
import { createLogger, redactedPaths } from '../../app/log.ts';
import { ManualClock } from '../../shared/clock.ts';
import { optionSpec } from '../../app/config.ts';
import { maxEventBytes, signatureHeader, signRequest } from '../../shared/wire/signing.ts';
import { deliver, type EventRequest } from '../../relay/delivery.ts';
import { createRelayMetrics } from '../../relay/metrics.ts';
import { DeliveryQueue, type DeliveryOutcome } from '../../relay/queue.ts';
import { silentLogger } from '../harness/builders.ts';
import { answerWithoutBody } from '../harness/http.ts';

// A function that records what the host asks of it: the boundary the host serves, written here
// so that each test decides what the reconcile does.
interface Call {
  readonly method: 'reconcileOne' | 'reconcileAll';
  readonly key?: ObjectKey;
  readonly options: ReconcileOptions;
}

type One = (key: ObjectKey, options: ReconcileOptions) => Promise<Report>;

interface Recording extends FunctionDefinition {
  readonly calls: Call[];
}

function report(options: ReconcileOptions, objects: Report['objects'] = []): Report {
  return { function: 'node-init', dryRun: options.dryRun, objects };
}

function recording(
  settings: { kinds?: string[]; one?: One; all?: (options: ReconcileOptions) => Promise<Report> } = {},
): Recording {
  const calls: Call[] = [];
  return {
    name: 'node-init',
    kinds: settings.kinds ?? ['Node'],
    calls,
    reconcileOne: async (key, options) => {
      calls.push({ method: 'reconcileOne', key, options });
      return settings.one
        ? settings.one(key, options)
        : report(options, [{ key: `${key.kind}/${key.name}`, result: 'unchanged', changes: [] }]);
    },
    reconcileAll: async (options) => {
      calls.push({ method: 'reconcileAll', options });
      return settings.all
        ? settings.all(options)
        : report(options, [{ key: 'Node/a', result: 'initialized', changes: [{ action: 'patch', target: 'Node/a' }] }]);
    },
  };
}

interface Harness {
  readonly app: FunctionApp;
  readonly definition: Recording;
  /** Every line logged, parsed. */
  readonly logs: Record<string, unknown>[];
}

async function build(
  t: TestContext,
  definition: Recording = recording(),
  options: Partial<AppOptions> = {},
): Promise<Harness> {
  const logs: Record<string, unknown>[] = [];
  const logger = createLogger({
    name: definition.name,
    level: 'debug',
    destination: { write: (line: string) => logs.push(JSON.parse(line) as Record<string, unknown>) },
  });
  const app = await buildApp(definition, { logger, processMetrics: false, ...options });
  t.after(() => app.close());
  return { app, definition, logs };
}

const nodeObject = {
  apiVersion: 'v1',
  kind: 'Node',
  metadata: { name: 'worker-1', annotations: { note: 'do-not-log-me' } },
};

// Binary mode as ApiServerSource sends it: ce-* headers, the extensions, JSON data.
function binaryHeaders(
  type: string,
  extensions: Record<string, string> = { kind: 'Node', name: 'worker-1', namespace: '' },
): Record<string, string> {
  const headers: Record<string, string> = {
    'ce-specversion': '1.0',
    'ce-id': 'event-1',
    'ce-source': 'https://10.96.0.1:443',
    'ce-type': type,
    'content-type': 'application/json',
  };
  for (const [name, value] of Object.entries(extensions)) headers[`ce-${name}`] = value;
  return headers;
}

function structuredEvent(type: string, extensions: Record<string, string>, data: unknown): Record<string, unknown> {
  return {
    specversion: '1.0',
    id: 'event-1',
    source: 'https://10.96.0.1:443',
    type,
    datacontenttype: 'application/json',
    ...extensions,
    data,
  };
}

const structured = { 'content-type': 'application/cloudevents+json' };

function omit(headers: Record<string, string>, name: string): Record<string, string> {
  return Object.fromEntries(Object.entries(headers).filter(([key]) => key !== name));
}

function json(body: string): Record<string, unknown> {
  return JSON.parse(body) as Record<string, unknown>;
}

describe('POST / with a Kubernetes event', () => {
  const extensions = { kind: 'Node', name: 'worker-1', namespace: '' };
  const refData = { apiVersion: 'v1', kind: 'Node', name: 'worker-1', namespace: '' };
  for (const mode of ['resource', 'ref'] as const) {
    for (const action of ['add', 'update', 'delete'] as const) {
      const type = `dev.knative.apiserver.${mode}.${action}`;
      const data = mode === 'resource' ? nodeObject : refData;
      const requests = {
        binary: { headers: binaryHeaders(type, extensions), payload: data },
        structured: { headers: structured, payload: structuredEvent(type, extensions, data) },
      };
      for (const [content, request] of Object.entries(requests)) {
        it(`${type} in ${content} mode reconciles the object and answers 202 with the report`, async (t) => {
          const { app, definition } = await build(t);
          const response = await app.inject({ method: 'POST', url: '/', ...request });
          assert.equal(response.statusCode, 202);
          assert.deepEqual(
            definition.calls.map((c) => [c.method, c.key, c.options.dryRun]),
            [['reconcileOne', { kind: 'Node', name: 'worker-1' }, false]],
          );
          assert.deepEqual(json(response.body), {
            function: 'node-init',
            dryRun: false,
            objects: [{ key: 'Node/worker-1', result: 'unchanged', changes: [] }],
          });
          assert.match(String(response.headers['content-type']), /^application\/json/);
          assert.deepEqual(
            Object.keys(response.headers).filter((h) => h.startsWith('ce-')),
            [],
            'a reply must not look like a CloudEvent',
          );
        });
      }
    }
  }

  it("hands the function an add or update event's object as a claim, a delete's as the last known state, and the node-set digest", async (t) => {
    const { app, definition } = await build(t);
    const send = async (type: string, extra: Record<string, string>, payload: unknown): Promise<void> => {
      const headers = binaryHeaders(type, { ...extensions, ...extra });
      const response = await app.inject({ method: 'POST', url: '/', headers, payload: JSON.stringify(payload) });
      assert.equal(response.statusCode, 202, response.body);
    };
    await send('dev.knative.apiserver.resource.update', { cirrusnodeset: 'abc123' }, nodeObject);
    await send('dev.knative.apiserver.resource.add', {}, nodeObject);
    await send('dev.knative.apiserver.resource.delete', {}, nodeObject);
    // An object that is not the one the event names claims nothing; neither does a reference.
    await send('dev.knative.apiserver.resource.update', {}, { ...nodeObject, metadata: { name: 'worker-2' } });
    await send('dev.knative.apiserver.ref.update', {}, refData);
    assert.deepEqual(
      definition.calls.map(({ options: { claimed, lastKnown, nodeSet } }) => ({ claimed, lastKnown, nodeSet })),
      [
        { claimed: nodeObject, lastKnown: undefined, nodeSet: 'abc123' },
        { claimed: nodeObject, lastKnown: undefined, nodeSet: undefined },
        { claimed: undefined, lastKnown: nodeObject, nodeSet: undefined },
        { claimed: undefined, lastKnown: undefined, nodeSet: undefined },
        { claimed: undefined, lastKnown: undefined, nodeSet: undefined },
      ],
    );
  });

  const keys: { name: string; kinds?: string[]; headers: Record<string, string>; payload?: object; key: ObjectKey }[] =
    [
      {
        name: 'takes the key from the extensions over data',
        headers: binaryHeaders('dev.knative.apiserver.resource.update', {
          kind: 'Node',
          name: 'from-extension',
          namespace: '',
        }),
        payload: nodeObject,
        key: { kind: 'Node', name: 'from-extension' },
      },
      {
        name: 'takes the key from resource data without extensions',
        headers: binaryHeaders('dev.knative.apiserver.resource.update', {}),
        payload: nodeObject,
        key: { kind: 'Node', name: 'worker-1' },
      },
      {
        name: 'takes a namespaced key from the extensions',
        kinds: ['Service'],
        headers: binaryHeaders('dev.knative.apiserver.ref.add', { kind: 'Service', name: 'web', namespace: 'default' }),
        key: { kind: 'Service', name: 'web', namespace: 'default' },
      },
      {
        name: 'takes a namespaced key from ref data',
        kinds: ['Service'],
        headers: binaryHeaders('dev.knative.apiserver.ref.delete', {}),
        payload: { apiVersion: 'v1', kind: 'Service', name: 'web', namespace: 'default' },
        key: { kind: 'Service', name: 'web', namespace: 'default' },
      },
    ];
  for (const { name, kinds, headers, payload, key } of keys) {
    it(name, async (t) => {
      const { app, definition } = await build(t, recording(kinds ? { kinds } : {}));
      const response = await app.inject({
        method: 'POST',
        url: '/',
        headers,
        ...(payload === undefined ? {} : { payload }),
      });
      assert.equal(response.statusCode, 202, response.body);
      assert.deepEqual(definition.calls[0]?.key, key);
    });
  }

  it('passes ?dryRun=true through, and says so in the report', async (t) => {
    const { app, definition } = await build(t);
    const response = await app.inject({
      method: 'POST',
      url: '/?dryRun=true',
      headers: binaryHeaders('dev.knative.apiserver.resource.add'),
      payload: nodeObject,
    });
    assert.equal(response.statusCode, 202);
    assert.equal(definition.calls[0]?.options.dryRun, true);
    assert.equal(json(response.body)['dryRun'], true);
  });
});

describe('POST / with dev.cirrus-ccm.reconcile.all', () => {
  it('reconciles everything, in binary mode without a body', async (t) => {
    const { app, definition } = await build(t);
    const headers = omit(binaryHeaders('dev.cirrus-ccm.reconcile.all', {}), 'content-type');
    const response = await app.inject({ method: 'POST', url: '/', headers });
    assert.equal(response.statusCode, 202, response.body);
    assert.deepEqual(
      definition.calls.map((c) => c.method),
      ['reconcileAll'],
    );
    assert.deepEqual(json(response.body)['objects'], [
      { key: 'Node/a', result: 'initialized', changes: [{ action: 'patch', target: 'Node/a' }] },
    ]);
  });

  it('reconciles everything, in binary mode with an empty JSON body', async (t) => {
    const { app, definition } = await build(t);
    const response = await app.inject({
      method: 'POST',
      url: '/',
      headers: binaryHeaders('dev.cirrus-ccm.reconcile.all', {}),
      payload: '',
    });
    assert.equal(response.statusCode, 202, response.body);
    assert.deepEqual(
      definition.calls.map((c) => c.method),
      ['reconcileAll'],
    );
  });

  it("paces the pass's cloud calls to the share of the budget its trigger carries (cirrusbudget), and only then", async (t) => {
    const cloud = pacedProvider(new FakeCloud());
    const node = { metadata: { name: 'a' } };
    const definition = recording({
      all: async (options) => {
        const started = performance.now();
        const instances = cloud.instancesV2();
        assert.ok(instances);
        for (let i = 0; i < 5; i++) await instances.instanceExists(node, options.signal);
        return report(options, [
          { key: 'Node/a', result: 'unchanged', changes: [], note: String(performance.now() - started) },
        ]);
      },
    });
    const { app } = await build(t, definition);
    const passMs = async (extensions: Record<string, string>): Promise<number> => {
      const headers = omit(binaryHeaders('dev.cirrus-ccm.reconcile.all', extensions), 'content-type');
      const response = await app.inject({ method: 'POST', url: '/', headers });
      assert.equal(response.statusCode, 202, response.body);
      const [object] = json(response.body)['objects'] as { note: string }[];
      return Number(object?.note);
    };
    // One token at once, then one per 50 ms: four waits.
    const paced = await passMs({ cirrusbudget: '20/1' });
    assert.ok(paced >= 190, `${paced} ms for 5 calls at 20 a second`);
    const free = await passMs({});
    assert.ok(free < 100, `${free} ms for 5 calls without a budget`);
  });

  for (const value of ['0/1', '20/0', '20', 'fast/1', '20/1.5', '-1/1']) {
    it(`refuses a trigger whose cirrusbudget is ${JSON.stringify(value)} with a 400 naming it`, async (t) => {
      const { app, definition } = await build(t);
      const headers = omit(binaryHeaders('dev.cirrus-ccm.reconcile.all', { cirrusbudget: value }), 'content-type');
      const response = await app.inject({ method: 'POST', url: '/', headers });
      assert.equal(response.statusCode, 400, response.body);
      assert.equal(json(response.body)['error'], 'invalid cirrusbudget extension');
      assert.match(String((json(response.body)['problems'] as string[])[0]), /^cirrusbudget: must be/);
      assert.equal(definition.calls.length, 0);
    });
  }

  it('reconciles everything, in structured mode, as a dry run when asked', async (t) => {
    const { app, definition } = await build(t);
    const event = {
      specversion: '1.0',
      id: 'tick-1',
      source: '/cirrus/periodic',
      type: 'dev.cirrus-ccm.reconcile.all',
    };
    const response = await app.inject({ method: 'POST', url: '/?dryRun=true', headers: structured, payload: event });
    assert.equal(response.statusCode, 202, response.body);
    assert.deepEqual(
      definition.calls.map((c) => [c.method, c.options.dryRun]),
      [['reconcileAll', true]],
    );
  });
});

describe('POST / rejects an event that cannot succeed with 400', () => {
  const allTypes =
    'dev.knative.apiserver.resource.add, dev.knative.apiserver.resource.update, dev.knative.apiserver.resource.delete, ' +
    'dev.knative.apiserver.ref.add, dev.knative.apiserver.ref.update, dev.knative.apiserver.ref.delete, dev.cirrus-ccm.reconcile.all';
  const node = 'dev.knative.apiserver.resource.update';
  const cases: {
    name: string;
    headers: Record<string, string>;
    payload?: unknown;
    url?: string;
    error: string | RegExp;
    code: string;
    problems?: string[];
  }[] = [
    {
      name: 'a malformed event, listing every problem',
      headers: structured,
      payload: { specversion: '1.0', id: '', source: 7, Kind: 'Node' },
      error: 'not a valid CloudEvent (structured mode: the whole event in the body)',
      code: 'CIRRUS_ERR_INVALID_EVENT',
      problems: [
        'id: must not be empty',
        'source: must be a string',
        'type: is required',
        'Kind: extension names must be lower-case letters a-z and digits only',
      ],
    },
    {
      name: 'a missing ce-type',
      headers: omit(binaryHeaders(node), 'ce-type'),
      payload: nodeObject,
      error: 'not a valid CloudEvent (binary mode: attributes in ce-* headers)',
      code: 'CIRRUS_ERR_INVALID_EVENT',
      problems: ['type: is required'],
    },
    {
      name: 'a specversion other than 1.0',
      headers: { ...binaryHeaders(node), 'ce-specversion': '0.3' },
      payload: nodeObject,
      error: 'not a valid CloudEvent (binary mode: attributes in ce-* headers)',
      code: 'CIRRUS_ERR_INVALID_EVENT',
      problems: ['specversion: must be "1.0", not "0.3"'],
    },
    {
      name: 'plain JSON that is no CloudEvent',
      headers: { 'content-type': 'application/json' },
      payload: { name: 'worker-1' },
      error: 'not a valid CloudEvent (binary mode: attributes in ce-* headers)',
      code: 'CIRRUS_ERR_INVALID_EVENT',
      problems: ['specversion: is required', 'id: is required', 'source: is required', 'type: is required'],
    },
    {
      name: 'a kind the function does not handle, naming the kinds it does',
      headers: binaryHeaders(node, { kind: 'Pod', name: 'web-0', namespace: 'default' }),
      error: 'node-init does not handle kind "Pod"; it accepts Node',
      code: 'CIRRUS_ERR_UNSUPPORTED_KIND',
      problems: ['kind: must be one of Node, not "Pod"'],
    },
    {
      name: 'an unknown type, listing the accepted types',
      headers: binaryHeaders('dev.knative.sources.ping'),
      error: `event type "dev.knative.sources.ping" is not accepted; accepted types: ${allTypes}`,
      code: 'CIRRUS_ERR_UNSUPPORTED_EVENT_TYPE',
      problems: [`type: must be one of ${allTypes}`],
    },
    {
      name: 'a resource event without a name',
      headers: binaryHeaders(node, { kind: 'Node' }),
      payload: { kind: 'Node', metadata: {} },
      error: 'the event does not name an object',
      code: 'CIRRUS_ERR_INVALID_EVENT',
      problems: ['name: no "name" extension and no data.metadata.name'],
    },
    {
      name: 'a ref event without a name',
      headers: binaryHeaders('dev.knative.apiserver.ref.add', {}),
      payload: { apiVersion: 'v1', kind: 'Node' },
      error: 'the event does not name an object',
      code: 'CIRRUS_ERR_INVALID_EVENT',
      problems: ['name: no "name" extension and no data.name'],
    },
    {
      name: 'a dryRun that is not true or false',
      url: '/?dryRun=yes',
      headers: binaryHeaders(node),
      payload: nodeObject,
      error: 'invalid query: query parameter "dryRun" must be true or false, not "yes"',
      code: 'CIRRUS_ERR_INVALID_QUERY',
      problems: ['query parameter "dryRun" must be true or false, not "yes"'],
    },
    {
      name: 'batched mode',
      headers: { 'content-type': 'application/cloudevents-batch+json' },
      payload: [structuredEvent(node, {}, nodeObject)],
      error: 'batched CloudEvents are not supported: send one event per request',
      code: 'CIRRUS_ERR_INVALID_EVENT',
    },
    {
      name: 'a body that is not JSON',
      headers: binaryHeaders(node),
      payload: '{"kind":',
      error: /JSON/,
      code: 'CIRRUS_ERR_MALFORMED_BODY',
    },
  ];
  for (const { name, headers, payload, url, error, code, problems } of cases) {
    it(`rejects ${name}`, async (t) => {
      const { app, definition } = await build(t);
      const response = await app.inject({
        method: 'POST',
        url: url ?? '/',
        headers,
        ...(payload === undefined ? {} : { payload: payload as object }),
      });
      assert.equal(response.statusCode, 400, response.body);
      const body = json(response.body);
      if (typeof error === 'string') assert.equal(body['error'], error);
      else assert.match(String(body['error']), error);
      assert.deepEqual(body['problems'], problems ?? [body['error']]);
      assert.equal(body['code'], code);
      assert.deepEqual(definition.calls, [], 'nothing is reconciled');
    });
  }

  it('rejects a body over bodyLimit with 400, not 413 (which Knative senders retry)', async (t) => {
    const { app } = await build(t, recording(), { bodyLimit: 100 });
    const response = await app.inject({
      method: 'POST',
      url: '/',
      headers: binaryHeaders(node),
      payload: { ...nodeObject, padding: 'x'.repeat(200) },
    });
    assert.equal(response.statusCode, 400);
    assert.match(String(json(response.body)['error']), /too large/);
    assert.equal(json(response.body)['code'], 'CIRRUS_ERR_BODY_TOO_LARGE');
  });

  it('answers an unknown route 404 with a code', async (t) => {
    const { app } = await build(t);
    const response = await app.inject({ method: 'POST', url: '/nowhere?x=1' });
    assert.equal(response.statusCode, 404);
    assert.deepEqual(json(response.body), { error: 'no route POST /nowhere', code: 'CIRRUS_ERR_NOT_FOUND' });
  });

  it('logs a rejection at warn with its problems', async (t) => {
    const { app, logs } = await build(t);
    await app.inject({
      method: 'POST',
      url: '/',
      headers: { ...binaryHeaders(node), 'ce-specversion': '0.3' },
      payload: nodeObject,
    });
    const line = logs.find((l) => l['msg'] === 'reconcile rejected');
    assert.equal(line?.['level'], 'warn');
    assert.equal(line['code'], 400);
    assert.equal(line['errorCode'], 'CIRRUS_ERR_INVALID_EVENT');
    assert.deepEqual(line['problems'], ['specversion: must be "1.0", not "0.3"']);
  });
});

describe('POST /reconcile', () => {
  it('reconciles one object by name, of the first kind by default, and answers 200', async (t) => {
    const { app, definition } = await build(t, recording({ kinds: ['Node', 'Service'] }));
    const response = await app.inject({ method: 'POST', url: '/reconcile', payload: { name: 'worker-1' } });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(
      definition.calls.map((c) => [c.method, c.key, c.options.dryRun]),
      [['reconcileOne', { kind: 'Node', name: 'worker-1' }, false]],
    );
    assert.deepEqual(json(response.body), {
      function: 'node-init',
      dryRun: false,
      objects: [{ key: 'Node/worker-1', result: 'unchanged', changes: [] }],
    });
  });

  it('takes a kind and a namespace', async (t) => {
    const { app, definition } = await build(t, recording({ kinds: ['Node', 'Service'] }));
    const response = await app.inject({
      method: 'POST',
      url: '/reconcile',
      payload: { kind: 'Service', name: 'web', namespace: 'default' },
    });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(definition.calls[0]?.key, { kind: 'Service', name: 'web', namespace: 'default' });
  });

  it('reconciles everything for {"all": true}', async (t) => {
    const { app, definition } = await build(t);
    const response = await app.inject({ method: 'POST', url: '/reconcile', payload: { all: true } });
    assert.equal(response.statusCode, 200);
    assert.deepEqual(
      definition.calls.map((c) => c.method),
      ['reconcileAll'],
    );
  });

  for (const [query, dryRun] of [
    ['?dryRun=true', true],
    ['?dryRun=false', false],
    ['', false],
  ] as const) {
    it(`passes dryRun=${dryRun} for "${query}"`, async (t) => {
      const { app, definition } = await build(t);
      const response = await app.inject({ method: 'POST', url: `/reconcile${query}`, payload: { all: true } });
      assert.equal(response.statusCode, 200);
      assert.equal(definition.calls[0]?.options.dryRun, dryRun);
      assert.equal(json(response.body)['dryRun'], dryRun);
    });
  }

  const hint = 'the body must be a JSON object: {"name": "...", "namespace"?: "...", "kind"?: "..."} or {"all": true}';
  // Only dryRun, once, true or false: anything else could be a dry run that silently writes.
  const badQueries: { query: string; error: string }[] = [
    {
      query: '?dryrun=true',
      error: 'invalid query: unknown query parameter "dryrun": the only one is dryRun (true or false)',
    },
    {
      query: '?dryRun[]=true',
      error: 'invalid query: unknown query parameter "dryRun[]": the only one is dryRun (true or false)',
    },
    {
      query: '?dryRun=true&dryRun=false',
      error: 'invalid query: query parameter "dryRun" is given 2 times: give it once',
    },
    {
      query: '?dryRun=true&dryRun=true',
      error: 'invalid query: query parameter "dryRun" is given 2 times: give it once',
    },
    { query: '?dryRun=TRUE', error: 'invalid query: query parameter "dryRun" must be true or false, not "TRUE"' },
    { query: '?dryRun', error: 'invalid query: query parameter "dryRun" must be true or false, not ""' },
    {
      query: '?dryRun=true&force=1',
      error: 'invalid query: unknown query parameter "force": the only one is dryRun (true or false)',
    },
  ];
  for (const { query, error } of badQueries) {
    for (const route of ['/', '/reconcile']) {
      it(`rejects ${route}${query} with 400 naming the parameter, and reconciles nothing`, async (t) => {
        const { app, definition } = await build(t);
        const event = route === '/';
        const response = await app.inject({
          method: 'POST',
          url: `${route}${query}`,
          ...(event
            ? { headers: binaryHeaders('dev.knative.apiserver.resource.add'), payload: nodeObject }
            : { payload: { all: true } }),
        });
        assert.equal(response.statusCode, 400, response.body);
        assert.equal(json(response.body)['error'], error);
        assert.equal(json(response.body)['code'], 'CIRRUS_ERR_INVALID_QUERY');
        assert.deepEqual(definition.calls, []);
      });
    }
  }

  it('lists every problem of a query', async (t) => {
    const { app } = await build(t);
    const response = await app.inject({ method: 'POST', url: '/reconcile?a=1&dryRun=no', payload: { all: true } });
    assert.equal(response.statusCode, 400);
    assert.deepEqual(json(response.body), {
      error: 'invalid query',
      code: 'CIRRUS_ERR_INVALID_QUERY',
      problems: [
        'unknown query parameter "a": the only one is dryRun (true or false)',
        'query parameter "dryRun" must be true or false, not "no"',
      ],
    });
  });

  it('reads percent-encoded names and values as the signature does', async (t) => {
    const { app, definition } = await build(t);
    const response = await app.inject({ method: 'POST', url: '/reconcile?dry%52un=%74rue', payload: { all: true } });
    assert.equal(response.statusCode, 200, response.body);
    assert.equal(definition.calls[0]?.options.dryRun, true);
  });

  const bad: { name: string; payload?: string; contentType?: string; error?: string; problems: string[] }[] = [
    { name: 'no body', problems: [hint] },
    { name: 'a JSON array', payload: '["worker-1"]', problems: [hint] },
    { name: 'a text body', payload: 'worker-1', contentType: 'text/plain', problems: [hint] },
    { name: 'an empty object', payload: '{}', problems: ['name: is required (or send {"all": true})'] },
    {
      name: 'a misspelt field',
      payload: '{"nmae":"worker-1"}',
      problems: ['Unrecognized key: "nmae"', 'name: is required (or send {"all": true})'],
    },
    { name: 'an empty name', payload: '{"name":""}', problems: ['name: must not be empty'] },
    { name: 'a name that is not a string', payload: '{"name":5}', problems: ['name: must be a string'] },
    {
      name: 'an empty namespace',
      payload: '{"name":"web","namespace":""}',
      problems: ['namespace: must not be empty (leave it out for a cluster-scoped object)'],
    },
    {
      name: 'all with a name',
      payload: '{"all":true,"name":"worker-1"}',
      problems: ['"all": true takes no name, namespace or kind'],
    },
    { name: 'all that is not a boolean', payload: '{"all":"yes"}', problems: ['all: must be true or false'] },
    {
      name: 'a kind the function does not handle',
      payload: '{"name":"web","kind":"Service"}',
      error: 'node-init does not handle kind "Service"; it accepts Node',
      problems: ['kind: must be one of Node, not "Service"'],
    },
  ];
  for (const { name, payload, contentType, error, problems } of bad) {
    it(`rejects ${name} with 400 and the problems`, async (t) => {
      const { app, definition } = await build(t);
      const headers = payload === undefined ? {} : { 'content-type': contentType ?? 'application/json' };
      const response = await app.inject({
        method: 'POST',
        url: '/reconcile',
        headers,
        ...(payload === undefined ? {} : { payload }),
      });
      assert.equal(response.statusCode, 400, response.body);
      const code = error === undefined ? 'CIRRUS_ERR_INVALID_RECONCILE_REQUEST' : 'CIRRUS_ERR_UNSUPPORTED_KIND';
      assert.deepEqual(json(response.body), { error: error ?? 'invalid reconcile request', code, problems });
      assert.deepEqual(definition.calls, []);
    });
  }
});

describe('errors from the reconcile', () => {
  const routes = [
    {
      route: 'POST /',
      request: {
        method: 'POST' as const,
        url: '/',
        headers: binaryHeaders('dev.knative.apiserver.resource.update'),
        payload: nodeObject,
      },
    },
    {
      route: 'POST /reconcile',
      request: { method: 'POST' as const, url: '/reconcile', payload: { name: 'worker-1' } },
    },
  ];
  for (const { route, request } of routes) {
    for (const [ms, seconds] of [
      [1500, '2'],
      [1001, '2'],
      [3000, '3'],
      [0, '1'],
      [10, '1'],
    ] as const) {
      it(`${route}: a RetryError of ${ms} ms in the cause chain → 503, Retry-After: ${seconds}`, async (t) => {
        const one: One = () =>
          Promise.reject(
            new Error('ensure load balancer', {
              cause: new Error('provider', { cause: new RetryError('rate limited', ms) }),
            }),
          );
        const { app } = await build(t, recording({ one }));
        const response = await app.inject(request);
        assert.equal(response.statusCode, 503);
        assert.equal(response.headers['retry-after'], seconds);
        assert.deepEqual(json(response.body), { error: 'ensure load balancer', code: 'CIRRUS_ERR_RETRY_LATER' });
      });
    }

    it(`${route}: an InvalidRequestError → 400 with its problems`, async (t) => {
      const one: One = () =>
        Promise.reject(new InvalidRequestError('invalid node name "Worker_1"', ['name: must be a DNS subdomain']));
      const { app } = await build(t, recording({ one }));
      const response = await app.inject(request);
      assert.equal(response.statusCode, 400);
      assert.deepEqual(json(response.body), {
        error: 'invalid node name "Worker_1"',
        code: 'CIRRUS_ERR_INVALID_REQUEST',
        problems: ['name: must be a DNS subdomain'],
      });
    });

    it(`${route}: a Kubernetes API error → 500 with the API server's message, not its headers`, async (t) => {
      const status = { kind: 'Status', message: 'nodes "worker-1" is forbidden', reason: 'Forbidden', code: 403 };
      const one: One = () =>
        Promise.reject(new ApiException(403, 'HTTP-Code: 403 ...', JSON.stringify(status), { 'audit-id': 'a1' }));
      const { app } = await build(t, recording({ one }));
      const response = await app.inject(request);
      assert.equal(response.statusCode, 500);
      assert.deepEqual(json(response.body), {
        error: 'Kubernetes API answered 403: nodes "worker-1" is forbidden',
        code: 'CIRRUS_ERR_INTERNAL',
      });
    });

    it(`${route}: an InvalidRequestError as a cause → 400`, async (t) => {
      const one: One = () =>
        Promise.reject(new Error('cannot reconcile', { cause: new InvalidRequestError('bad name') }));
      const { app } = await build(t, recording({ one }));
      const response = await app.inject(request);
      assert.equal(response.statusCode, 400);
      assert.deepEqual(json(response.body), {
        error: 'cannot reconcile',
        code: 'CIRRUS_ERR_INVALID_REQUEST',
        problems: ['bad name'],
      });
    });

    it(`${route}: any other error → 500 { error }, logged at error with its stack`, async (t) => {
      const one: One = () => Promise.reject(new Error('the API server said no'));
      const { app, logs } = await build(t, recording({ one }));
      const response = await app.inject(request);
      assert.equal(response.statusCode, 500);
      assert.deepEqual(json(response.body), { error: 'the API server said no', code: 'CIRRUS_ERR_INTERNAL' });
      const line = logs.find((l) => l['msg'] === 'reconcile failed');
      assert.equal(line?.['level'], 'error');
      assert.equal(line['key'], 'Node/worker-1');
      assert.match(String((line['err'] as Record<string, unknown>)['stack']), /Error: the API server said no\n\s+at /);
    });
  }

  it('a definition that throws before returning a promise → 500', async (t) => {
    const definition = recording();
    const throwing: FunctionDefinition = {
      ...definition,
      reconcileOne: () => {
        throw new Error('synchronous');
      },
    };
    const { app } = await build(t, { ...throwing, calls: [] });
    const response = await app.inject({ method: 'POST', url: '/reconcile', payload: { name: 'worker-1' } });
    assert.equal(response.statusCode, 500);
    assert.deepEqual(json(response.body), { error: 'synchronous', code: 'CIRRUS_ERR_INTERNAL' });
  });

  it('does not answer before the reconcile has finished', async (t) => {
    let finish: (report: Report) => void = () => undefined;
    const one: One = () => new Promise((resolve) => (finish = resolve));
    const { app, definition } = await build(t, recording({ one }));
    let answered = false;
    const pending = app
      .inject({ method: 'POST', url: '/reconcile', payload: { name: 'worker-1' } })
      .then((response) => {
        answered = true;
        return response;
      });
    while (definition.calls.length === 0) await sleep(1);
    await sleep(20);
    assert.equal(answered, false);
    const options = definition.calls[0]?.options;
    assert.ok(options);
    finish(report(options));
    assert.equal((await pending).statusCode, 200);
  });
});

describe('logging', () => {
  it('gives the reconcile a logger with the request id, key and trigger, and logs one line with outcome and duration', async (t) => {
    const one: One = (key, options) => {
      options.log.info('inside');
      return Promise.resolve(
        report(options, [
          { key: 'Node/worker-1', result: 'initialized', changes: [{ action: 'patch', target: 'Node/worker-1' }] },
        ]),
      );
    };
    const { app, logs } = await build(t, recording({ one }));
    const atStart = logs.length; // the warning that requests are not authenticated
    const response = await app.inject({
      method: 'POST',
      url: '/',
      headers: binaryHeaders('dev.knative.apiserver.resource.add'),
      payload: nodeObject,
    });
    const requestId = response.headers['x-request-id'];
    assert.match(String(requestId), /^[0-9a-f-]{36}$/);
    const inside = logs.find((l) => l['msg'] === 'inside');
    assert.deepEqual(
      {
        fn: inside?.['fn'],
        reqId: inside?.['reqId'],
        key: inside?.['key'],
        trigger: inside?.['trigger'],
        ceId: inside?.['ceId'],
      },
      {
        fn: 'node-init',
        reqId: requestId,
        key: 'Node/worker-1',
        trigger: 'dev.knative.apiserver.resource.add',
        ceId: 'event-1',
      },
    );
    const done = logs.filter((l) => l['msg'] === 'reconciled');
    assert.equal(done.length, 1);
    assert.equal(done[0]?.['level'], 'info');
    assert.equal(done[0]['outcome'], 'done');
    assert.equal(done[0]['code'], 202);
    assert.equal(typeof done[0]['durationMs'], 'number');
    assert.deepEqual(done[0]['results'], { initialized: 1 });
    assert.equal(logs.length - atStart, 2, 'no other lines: Fastify request logging is off');
  });

  it('uses its own request id, not the event id, and a new one per request', async (t) => {
    const { app } = await build(t);
    const request = {
      method: 'POST' as const,
      url: '/',
      headers: binaryHeaders('dev.knative.apiserver.resource.add'),
      payload: nodeObject,
    };
    const first = await app.inject(request);
    const second = await app.inject(request);
    assert.notEqual(first.headers['x-request-id'], 'event-1');
    assert.notEqual(first.headers['x-request-id'], second.headers['x-request-id']);
  });

  it('tags a manual reconcile as trigger "manual" and reconcile-all as key "*"', async (t) => {
    const { app, logs } = await build(t);
    await app.inject({ method: 'POST', url: '/reconcile', payload: { all: true } });
    const line = logs.find((l) => l['msg'] === 'reconciled');
    assert.equal(line?.['trigger'], 'manual');
    assert.equal(line['key'], '*');
  });

  it('never logs the event data', async (t) => {
    const { app, logs } = await build(t);
    await app.inject({
      method: 'POST',
      url: '/',
      headers: binaryHeaders('dev.knative.apiserver.resource.add'),
      payload: nodeObject,
    });
    await app.inject({
      method: 'POST',
      url: '/',
      headers: { ...binaryHeaders('dev.knative.apiserver.resource.add'), 'ce-specversion': '2' },
      payload: nodeObject,
    });
    assert.ok(logs.length >= 2);
    assert.doesNotMatch(JSON.stringify(logs), /do-not-log-me/);
  });
});

describe('metrics', () => {
  it('counts reconcile requests by function, trigger and code, and times the reconciles', async (t) => {
    const { app } = await build(t);
    await app.inject({
      method: 'POST',
      url: '/',
      headers: binaryHeaders('dev.knative.apiserver.resource.add'),
      payload: nodeObject,
    });
    await app.inject({ method: 'POST', url: '/reconcile', payload: { name: 'worker-1' } });
    await app.inject({ method: 'POST', url: '/reconcile', payload: {} });
    await app.inject({ method: 'POST', url: '/', headers: binaryHeaders('made.up.type'), payload: nodeObject });
    const response = await app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(response.statusCode, 200);
    assert.match(String(response.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    const lines = response.body.split('\n');
    for (const expected of [
      'cirrus_reconcile_requests_total{function="node-init",trigger="dev.knative.apiserver.resource.add",code="202"} 1',
      'cirrus_reconcile_requests_total{function="node-init",trigger="manual",code="200"} 1',
      'cirrus_reconcile_requests_total{function="node-init",trigger="manual",code="400"} 1',
      'cirrus_reconcile_requests_total{function="node-init",trigger="unknown",code="400"} 1',
      'cirrus_reconcile_duration_seconds_count{function="node-init",trigger="dev.knative.apiserver.resource.add"} 1',
      'cirrus_reconcile_duration_seconds_count{function="node-init",trigger="manual"} 1',
      'cirrus_reconcile_duration_seconds_bucket{le="0.005",function="node-init",trigger="manual"} 1',
      'cirrus_reconcile_duration_seconds_bucket{le="60",function="node-init",trigger="manual"} 1',
    ]) {
      assert.ok(lines.includes(expected), `missing: ${expected}`);
    }
  });

  it("sets the cold start once, at the function's first answer, to the seconds since the process started", async (t) => {
    const { app } = await build(t);
    const coldStart = async (): Promise<number | undefined> => {
      const body = (await app.inject({ method: 'GET', url: '/metrics' })).body;
      const value = /^cirrus_cold_start_seconds\{function="node-init"\} (\S+)$/m.exec(body)?.[1];
      return value === undefined ? undefined : Number(value);
    };
    assert.match(
      (await app.inject({ method: 'GET', url: '/metrics' })).body,
      /^# TYPE cirrus_cold_start_seconds gauge$/m,
    );
    await app.inject({ method: 'GET', url: '/healthz' });
    assert.equal(await coldStart(), undefined, 'a probe is no answer to a reconcile request');
    const before = process.uptime();
    await app.inject({ method: 'POST', url: '/reconcile', payload: { name: 'worker-1' } });
    const after = process.uptime();
    const first = await coldStart();
    assert.ok(first !== undefined && first >= before && first <= after, `${String(first)} in [${before}, ${after}]`);
    await new Promise((resolve) => setTimeout(resolve, 20));
    await app.inject({ method: 'POST', url: '/reconcile', payload: { name: 'worker-1' } });
    assert.equal(await coldStart(), first, 'only the first answer sets it');
  });

  it("registers the function's own metrics in the app's registry, not the global one", async (t) => {
    let registered: Registry | undefined;
    const definition: Recording = {
      ...recording(),
      registerMetrics: (registry) => {
        registered = registry;
        new Counter({ name: 'node_init_things_total', help: 'things', registers: [registry] }).inc(3);
      },
    };
    const { app } = await build(t, definition);
    const body = (await app.inject({ method: 'GET', url: '/metrics' })).body;
    assert.match(body, /^node_init_things_total 3$/m);
    // A second app of the same function must not collide with the first (a global registry would throw).
    const second = await build(t, definition);
    assert.notEqual(registered, undefined);
    assert.match((await second.app.inject({ method: 'GET', url: '/metrics' })).body, /^node_init_things_total 3$/m);
  });

  it('exports the process metrics only when asked', async (t) => {
    const withProcess = await build(t, recording(), { processMetrics: true });
    const without = await build(t, recording(), { processMetrics: false });
    assert.match(
      (await withProcess.app.inject({ method: 'GET', url: '/metrics' })).body,
      /^process_cpu_user_seconds_total /m,
    );
    assert.doesNotMatch(
      (await without.app.inject({ method: 'GET', url: '/metrics' })).body,
      /process_cpu_user_seconds_total/,
    );
  });
});

describe('probes and OPTIONS', () => {
  it('answers /healthz and /readyz with 200', async (t) => {
    const { app } = await build(t);
    assert.deepEqual(json((await app.inject({ method: 'GET', url: '/healthz' })).body), { status: 'ok' });
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    assert.equal(ready.statusCode, 200);
    assert.deepEqual(json(ready.body), { status: 'ready' });
  });

  it('answers OPTIONS / with 204 and Allow: POST, echoing a webhook origin', async (t) => {
    const { app } = await build(t);
    const response = await app.inject({
      method: 'OPTIONS',
      url: '/',
      headers: { 'webhook-request-origin': 'eventing.knative.dev' },
    });
    assert.equal(response.statusCode, 204);
    assert.equal(response.headers['allow'], 'POST');
    assert.equal(response.headers['webhook-allowed-origin'], 'eventing.knative.dev');
  });

  it('serves the same probes without a function, asking a readiness callback (the relay)', async (t) => {
    const registry = new Registry();
    new Counter({ name: 'probe_things_total', help: 'things', registers: [registry] }).inc(2);
    let readiness: Readiness = { ready: false, body: { status: 'standby', role: 'standby' } };
    const app = await buildProbeApp({
      logger: createLogger({ name: 'x', level: 'silent' }),
      registry,
      readiness: () => readiness,
    });
    t.after(() => app.close());
    assert.deepEqual(json((await app.inject({ method: 'GET', url: '/healthz' })).body), { status: 'ok' });
    const notReady = await app.inject({ method: 'GET', url: '/readyz' });
    assert.equal(notReady.statusCode, 503);
    assert.deepEqual(json(notReady.body), { status: 'standby', role: 'standby' });
    readiness = { ready: true, body: { status: 'ready' } };
    assert.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
    assert.match((await app.inject({ method: 'GET', url: '/metrics' })).body, /^probe_things_total 2$/m);
    assert.equal((await app.inject({ method: 'POST', url: '/', payload: {} })).statusCode, 404);
  });

  it('refuses to build a function without kinds', async () => {
    await assert.rejects(
      buildApp({ ...recording(), kinds: [] }, { logger: createLogger({ name: 'x', level: 'silent' }) }),
      { name: 'TypeError', message: 'function node-init: kinds must name at least one kind' },
    );
  });
});

describe('load shedding', () => {
  // A heap limit of 1 byte is exceeded at the first sample, 10 ms after start.
  async function overloaded(t: TestContext, retryAfter?: number): Promise<Harness> {
    const harness = await build(t, recording(), {
      pressure: {
        maxHeapUsedBytes: 1,
        maxEventLoopDelay: 0, // its first samples can read as an infinite delay: the heap must do it
        sampleInterval: 10,
        ...(retryAfter === undefined ? {} : { retryAfter }),
      },
    });
    for (let i = 0; i < 200; i += 1) {
      const response = await harness.app.inject({ method: 'POST', url: '/reconcile', payload: { all: true } });
      if (response.statusCode === 503) return harness;
      await sleep(10);
    }
    assert.fail('never overloaded');
  }

  it('answers the reconcile routes 503 with Retry-After (5 s by default) and does not reconcile', async (t) => {
    const { app, definition } = await overloaded(t);
    const calls = definition.calls.length;
    for (const request of [
      { method: 'POST' as const, url: '/reconcile', payload: { all: true } },
      {
        method: 'POST' as const,
        url: '/',
        headers: binaryHeaders('dev.knative.apiserver.resource.add'),
        payload: nodeObject,
      },
    ]) {
      const response = await app.inject(request);
      assert.equal(response.statusCode, 503);
      assert.equal(response.headers['retry-after'], '5');
      assert.deepEqual(json(response.body), {
        error: 'overloaded: try again later',
        code: 'CIRRUS_ERR_UNDER_PRESSURE',
      });
    }
    assert.equal(definition.calls.length, calls);
  });

  it('sends the configured Retry-After', async (t) => {
    const { app } = await overloaded(t, 12);
    assert.equal(
      (await app.inject({ method: 'POST', url: '/reconcile', payload: { all: true } })).headers['retry-after'],
      '12',
    );
  });

  it('keeps the probes and /metrics answering', async (t) => {
    const { app } = await overloaded(t);
    for (const url of ['/healthz', '/readyz', '/metrics'])
      assert.equal((await app.inject({ method: 'GET', url })).statusCode, 200, url);
    assert.match(
      (await app.inject({ method: 'GET', url: '/metrics' })).body,
      /cirrus_reconcile_requests_total\{function="node-init",trigger="manual",code="503"\} \d/,
    );
  });

  it('can be turned off', async (t) => {
    const { app } = await build(t, recording(), { pressure: false });
    await sleep(30);
    assert.equal((await app.inject({ method: 'POST', url: '/reconcile', payload: { all: true } })).statusCode, 200);
  });
});

describe('load shedding by memory', () => {
  it('answers 503 with Retry-After once the resident set is over maxRssBytes', async (t) => {
    // The event-loop check off: its first samples can read as an infinite delay (no histogram yet).
    const { app, definition } = await build(t, recording(), {
      pressure: { maxRssBytes: 1, maxEventLoopDelay: 0, sampleInterval: 10 },
    });
    let response = await app.inject({ method: 'POST', url: '/reconcile', payload: { all: true } });
    for (let i = 0; i < 200 && response.statusCode !== 503; i += 1) {
      await sleep(10);
      response = await app.inject({ method: 'POST', url: '/reconcile', payload: { all: true } });
    }
    assert.equal(response.statusCode, 503);
    assert.equal(response.headers['retry-after'], '5');
    const calls = definition.calls.length;
    const event = await app.inject({
      method: 'POST',
      url: '/',
      headers: binaryHeaders('dev.knative.apiserver.resource.add'),
      payload: nodeObject,
    });
    assert.equal(event.statusCode, 503);
    assert.equal(definition.calls.length, calls, 'nothing more was reconciled');
  });

  it('is on by default: RSS over 80 % of the memory budget, V8 heap over 85 % of its limit', () => {
    assert.equal(defaultPressure.maxRssBytes, Math.floor(0.8 * memoryBudget()));
    assert.ok(defaultPressure.maxRssBytes > 0);
    assert.ok(defaultPressure.maxHeapUsedBytes > 0);
    const limit = process.constrainedMemory();
    assert.equal(memoryBudget(), limit > 0 && limit < totalmem() ? limit : unconstrainedMemoryBytes);
  });
});

describe('load shedding by requests in flight', { timeout: 10_000 }, () => {
  // A function whose reconciles wait until the test releases them.
  function held(): { definition: Recording; running: () => number; release: () => void } {
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    let running = 0;
    const wait = async (options: ReconcileOptions): Promise<Report> => {
      running += 1;
      await gate;
      return report(options);
    };
    return {
      definition: recording({ one: (_key, options) => wait(options), all: wait }),
      running: () => running,
      release,
    };
  }

  async function until(condition: () => boolean): Promise<void> {
    for (let i = 0; i < 500 && !condition(); i += 1) await sleep(5);
    assert.ok(condition(), 'in time');
  }

  const all = { method: 'POST' as const, url: '/reconcile', payload: { all: true } };

  it('answers the excess 503 with Retry-After at once, and the others 2xx', async (t) => {
    const { definition, running, release } = held();
    const { app } = await build(t, definition, { pressure: { maxConcurrentRequests: 2 } });
    const admitted = [
      app.inject(all),
      app.inject({
        ...all,
        url: '/?dryRun=true',
        payload: nodeObject,
        headers: binaryHeaders('dev.knative.apiserver.resource.add'),
      }),
    ];
    await until(() => running() === 2);
    const excess = await Promise.all([app.inject(all), app.inject(all), app.inject({ ...all, url: '/' })]);
    for (const response of excess) {
      assert.equal(response.statusCode, 503, response.body);
      assert.equal(response.headers['retry-after'], '5');
      assert.deepEqual(json(response.body), {
        error: 'overloaded: 2 requests in flight, the most this instance takes; try again later',
        code: 'CIRRUS_ERR_OVERLOADED',
      });
    }
    assert.equal(definition.calls.length, 2, 'the excess was not reconciled');
    release();
    assert.deepEqual(
      (await Promise.all(admitted)).map((r) => r.statusCode),
      [200, 202],
    );
    assert.equal((await app.inject(all)).statusCode, 200, 'their places are free again');
    assert.match(
      (await app.inject({ method: 'GET', url: '/metrics' })).body,
      /cirrus_reconcile_requests_total\{function="node-init",trigger="manual",code="503"\} 2/,
    );
  });

  it('frees the place of a request refused or failed on the way', async (t) => {
    const { app } = await build(t, recording({ all: () => Promise.reject(new Error('boom')) }), {
      pressure: { maxConcurrentRequests: 1 },
    });
    for (let i = 0; i < 3; i += 1) {
      assert.equal(
        (await app.inject({ ...all, payload: '{', headers: { 'content-type': 'application/json' } })).statusCode,
        400,
      );
      assert.equal((await app.inject({ ...all, url: '/reconcile?dryrun=true' })).statusCode, 400);
      assert.equal((await app.inject(all)).statusCode, 500);
    }
  });

  it('is one limit for all the functions of a process (`cirrus start`)', async (t) => {
    const { definition, running, release } = held();
    const app = await buildMultiApp([definition, { ...recording(), name: 'routes' }], {
      logger: silentLogger(),
      processMetrics: false,
      pressure: { maxConcurrentRequests: 1 },
    });
    t.after(() => app.close());
    const first = app.inject({ ...all, url: '/node-init/reconcile' });
    await until(() => running() === 1);
    assert.equal((await app.inject({ ...all, url: '/routes/reconcile' })).statusCode, 503);
    release();
    assert.equal((await first).statusCode, 200);
    assert.equal((await app.inject({ ...all, url: '/routes/reconcile' })).statusCode, 200);
  });

  it("has the default of --max-concurrent-requests, the relay's --concurrent-deliveries", () => {
    assert.equal(defaultPressure.maxConcurrentRequests, defaultMaxConcurrentRequests);
    assert.equal(optionSpec('maxConcurrentRequests').schema.parse(undefined), defaultMaxConcurrentRequests);
    assert.equal(optionSpec('concurrentDeliveries').schema.parse(undefined), defaultMaxConcurrentRequests);
  });

  it('is off with pressure: false (AWS Lambda)', async (t) => {
    const { definition, running, release } = held();
    const { app } = await build(t, definition, { pressure: false });
    const many = Array.from({ length: 80 }, () => app.inject(all));
    await until(() => running() === 80);
    release();
    assert.ok((await Promise.all(many)).every((r) => r.statusCode === 200));
  });

  describe('over a socket', { timeout: 20_000 }, () => {
    async function listening(t: TestContext, definition: Recording, options: Partial<AppOptions>): Promise<number> {
      const { app } = await build(t, definition, options);
      const stop = new AbortController();
      const server = await serve(app, { port: 0, host: '127.0.0.1', signal: stop.signal, graceMs: 100 });
      t.after(async () => {
        stop.abort();
        await server.closed;
      });
      return server.port;
    }

    it('answers 503 before the body of the excess request is sent, and closes its connection', async (t) => {
      const { definition, running, release } = held();
      const port = await listening(t, definition, { pressure: { maxConcurrentRequests: 1 } });
      const first = fetch(`http://127.0.0.1:${port}/reconcile`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: '{"all":true}',
      });
      await until(() => running() === 1);
      const reply = await answerWithoutBody(port, {
        path: '/',
        headers: binaryHeaders('dev.knative.apiserver.resource.add'),
        contentLength: maxEventBytes,
      });
      assert.equal(reply.status, 503);
      assert.equal(reply.headers['retry-after'], '5');
      assert.equal(reply.headers['connection'], 'close');
      assert.equal(reply.closedByServer, true);
      release();
      assert.equal((await first).status, 200);
    });

    it('keeps the place of a reconcile whose client hung up until the reconcile ends', async (t) => {
      const { definition, running, release } = held();
      const port = await listening(t, definition, { pressure: { maxConcurrentRequests: 1 } });
      const client = connect(port, '127.0.0.1');
      client.write(
        'POST /reconcile HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 12\r\n\r\n{"all":true}',
      );
      await until(() => running() === 1);
      client.destroy();
      await sleep(50);
      const post = (): Promise<Response> =>
        fetch(`http://127.0.0.1:${port}/reconcile`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: '{"all":true}',
        });
      assert.equal((await post()).status, 503, 'the hung-up reconcile still runs');
      release();
      await until(() => running() === 1);
      await sleep(20);
      assert.equal((await post()).status, 200);
    });

    it('is retried by the relay after the Retry-After, not dropped', async (t) => {
      const { definition, running, release } = held();
      const secret = 'relay secret';
      const app = await buildMultiApp([definition], {
        logger: silentLogger(),
        processMetrics: false,
        auth: { secret },
        pressure: { maxConcurrentRequests: 1 },
      });
      const stop = new AbortController();
      const server = await serve(app, { port: 0, host: '127.0.0.1', signal: stop.signal, graceMs: 100 });
      t.after(async () => {
        stop.abort();
        await server.closed;
      });
      // As the relay sends them under `cirrus start`: to /<function>, signed for that path.
      const url = `http://127.0.0.1:${server.port}/node-init`;
      const event = (name: string): EventRequest => ({
        headers: binaryHeaders('dev.knative.apiserver.resource.add', { kind: 'Node', name, namespace: '' }),
        body: JSON.stringify({ ...nodeObject, metadata: { name } }),
        signingSecret: secret,
      });
      const outcomes: string[] = [];
      const clock = new ManualClock(Date.now());
      const queue = new DeliveryQueue<EventRequest>({
        concurrency: 4,
        retry: { initialMs: 60_000, maxMs: 300_000, jitter: 0 },
        merge: () => undefined,
        send: async (_destination, key, request, signal): Promise<DeliveryOutcome> => {
          const outcome = await deliver(url, request, { timeoutMs: 10_000, signal });
          outcomes.push(`${key}: ${outcome.kind} ${'status' in outcome ? String(outcome.status) : ''}`);
          return outcome;
        },
        metrics: createRelayMetrics({ processMetrics: false, gauges: () => undefined }),
        log: silentLogger(),
        clock,
      });
      t.after(() => {
        queue.stop();
      });
      queue.push('node-init', 'Node/a', event('a'));
      await until(() => running() === 1);
      queue.push('node-init', 'Node/b', event('b'));
      await until(() => outcomes.length === 1);
      assert.deepEqual(outcomes, ['Node/b: retry 503']);
      assert.deepEqual(
        clock.pending.map((p) => p.ms),
        [5000],
        'waiting out the Retry-After, not the 60 s backoff',
      );
      assert.deepEqual(queue.retrying(), new Map([['node-init', 1]]));
      release();
      await until(() => outcomes.length === 2);
      clock.advance(5000);
      await queue.idle();
      assert.deepEqual(outcomes, ['Node/b: retry 503', 'Node/a: accepted 202', 'Node/b: accepted 202']);
      assert.deepEqual(
        definition.calls.map((c) => c.key?.name),
        ['a', 'b'],
      );
    });
  });
});

describe('the body limit, agreed with the relay', () => {
  it('is maxEventBytes by default: a body one byte over is a 400', async (t) => {
    const { app } = await build(t);
    const body = JSON.stringify({ ...nodeObject, padding: '' });
    const padded = body.replace('"padding":""', `"padding":"${'x'.repeat(maxEventBytes - body.length + 1)}"`);
    assert.equal(Buffer.byteLength(padded), maxEventBytes + 1);
    const headers = binaryHeaders('dev.knative.apiserver.resource.add');
    const over = await app.inject({ method: 'POST', url: '/', headers, payload: padded });
    assert.equal(over.statusCode, 400);
    const at = await app.inject({ method: 'POST', url: '/', headers, payload: padded.replace('x"', '"') });
    assert.equal(at.statusCode, 202, 'exactly maxEventBytes is taken');
  });

  it('is one the relay does not exceed: a larger event is rejected without being sent', async () => {
    const outcome = await deliver(
      'http://127.0.0.1:1/',
      { headers: { 'content-type': 'application/json' }, body: 'x'.repeat(maxEventBytes + 1) },
      { timeoutMs: 1000, signal: new AbortController().signal },
    );
    assert.deepEqual(outcome, {
      kind: 'rejected',
      status: 0,
      reason: `the event is ${maxEventBytes + 1} bytes, more than a function takes (${maxEventBytes})`,
    });
  });
});

describe('a public endpoint (AWS Lambda)', () => {
  const secret = 'lambda secret';
  const signedHeaders = (method: string, url: string): Record<string, string> => ({
    [signatureHeader]: signRequest(secret, { method, url, headers: {}, body: '' }),
  });

  it('needs the signature for /metrics and anything else but /healthz and /readyz', async (t) => {
    const { app } = await build(t, recording(), { auth: { secret }, publicEndpoint: true });
    for (const url of ['/healthz', '/readyz'])
      assert.equal((await app.inject({ method: 'GET', url })).statusCode, 200, url);
    const metrics = await app.inject({ method: 'GET', url: '/metrics' });
    assert.equal(metrics.statusCode, 401);
    assert.deepEqual(json(metrics.body), {
      error: `unauthorized: missing ${signatureHeader} header`,
      code: 'CIRRUS_ERR_SIGNATURE_MISSING',
    });
    const signed = await app.inject({ method: 'GET', url: '/metrics', headers: signedHeaders('GET', '/metrics') });
    assert.equal(signed.statusCode, 200);
    assert.match(signed.body, /cirrus_reconcile_requests_total/);
    const elsewhere = await app.inject({ method: 'GET', url: '/metrics', headers: signedHeaders('GET', '/healthz') });
    assert.equal(elsewhere.statusCode, 401, 'signed for another path');
    assert.equal((await app.inject({ method: 'HEAD', url: '/metrics' })).statusCode, 401);
    assert.equal((await app.inject({ method: 'HEAD', url: '/healthz' })).statusCode, 200);
    assert.equal((await app.inject({ method: 'OPTIONS', url: '/' })).statusCode, 401);
    assert.equal((await app.inject({ method: 'GET', url: '/anything' })).statusCode, 401, 'not even a 404');
  });

  it('still serves signed reconciles, and refuses unsigned ones', async (t) => {
    const { app } = await build(t, recording(), { auth: { secret }, publicEndpoint: true });
    const body = '{"all":true}';
    const headers = { 'content-type': 'application/json' };
    const signature = signRequest(secret, { method: 'POST', url: '/reconcile', headers, body });
    const ok = await app.inject({
      method: 'POST',
      url: '/reconcile',
      headers: { ...headers, [signatureHeader]: signature },
      body,
    });
    assert.equal(ok.statusCode, 200, ok.body);
    assert.equal((await app.inject({ method: 'POST', url: '/reconcile', headers, body })).statusCode, 401);
  });

  it('cannot be built without a secret', async () => {
    await assert.rejects(buildApp(recording(), { logger: silentLogger(), publicEndpoint: true }), {
      name: 'TypeError',
      message: 'a public endpoint needs auth: a signing secret',
    });
  });
});

describe('without a signing secret', () => {
  it('warns at start that reconcile requests are not authenticated', async (t) => {
    const { logs } = await build(t);
    assert.deepEqual(
      logs.filter((l) => l['level'] === 'warn').map((l) => l['msg']),
      [
        'no signing secret (--signing-secret-file): reconcile requests are not authenticated, anyone who can reach this server can make it reconcile',
      ],
    );
    const { logs: signed } = await build(t, recording(), { auth: { secret: 's' } });
    assert.deepEqual(signed, []);
  });
});

// Whether `signal` aborts within a second (the abort follows the socket's close event).
async function aborted(signal: AbortSignal): Promise<boolean> {
  if (signal.aborted) return true;
  const abort = new Promise<boolean>((resolve) => {
    signal.addEventListener('abort', () => {
      resolve(true);
    });
  });
  return Promise.race([abort, sleep(1000).then(() => false)]);
}

// Timeouts: a close that waits for a keep-alive connection would otherwise hang the run for 72 s.
describe('serve', { timeout: 10_000 }, () => {
  const logger = createLogger({ name: 'node-init', level: 'silent' });

  // A reconcile that waits until the test lets it go.
  function gated(): { definition: Recording; entered: Promise<ReconcileOptions>; release: () => void } {
    let release: () => void = () => undefined;
    let enter: (options: ReconcileOptions) => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const entered = new Promise<ReconcileOptions>((resolve) => (enter = resolve));
    const one: One = async (_key, options) => {
      enter(options);
      await gate;
      return report(options);
    };
    return { definition: recording({ one }), entered, release };
  }

  it('listens on the given port and host and resolves with the bound address', async (t) => {
    const app = await buildApp(recording(), { logger, processMetrics: false });
    const stop = new AbortController();
    t.after(() => {
      stop.abort();
    });
    const server = await serve(app, { port: 0, host: '127.0.0.1', signal: stop.signal });
    assert.ok(server.port > 0);
    assert.equal(server.address, `http://127.0.0.1:${server.port}`);
    const response = await fetch(`${server.address}/reconcile`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name":"worker-1"}',
    });
    assert.equal(response.status, 200);
    assert.equal(((await response.json()) as Report).function, 'node-init');
    stop.abort();
    await server.closed;
    await assert.rejects(fetch(`${server.address}/healthz`), 'no longer listening');
  });

  it('on abort, lets the request in flight finish, then closes without waiting for the keep-alive timeout', async () => {
    const { definition, entered, release } = gated();
    const app = await buildApp(definition, { logger, processMetrics: false });
    const stop = new AbortController();
    const server = await serve(app, { port: 0, host: '127.0.0.1', signal: stop.signal });
    let closed = false;
    void server.closed.then(() => (closed = true));
    const response = fetch(`${server.address}/reconcile`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name":"worker-1"}',
    });
    await entered;
    stop.abort();
    await sleep(50);
    assert.equal(closed, false, 'closed while a request was in flight');
    release();
    assert.equal((await response).status, 200);
    await server.closed; // within the suite's timeout, far below the 72 s keep-alive
  });

  it('on abort, lets the request in flight finish, answers a request behind it 503, then closes', async () => {
    const { definition, entered, release } = gated();
    const app = await buildApp(definition, { logger, processMetrics: false });
    const stop = new AbortController();
    const server = await serve(app, { port: 0, host: '127.0.0.1', signal: stop.signal });
    let closed = false;
    void server.closed.then(() => (closed = true));
    // One keep-alive connection: the reconcile, then a readiness probe pipelined behind it once close has begun.
    const socket = connect(server.port, '127.0.0.1');
    let received = '';
    socket.setEncoding('utf8').on('data', (chunk: string) => (received += chunk));
    const socketClosed = new Promise((resolve) => socket.on('close', resolve));
    const body = '{"name":"worker-1"}';
    socket.write(
      `POST /reconcile HTTP/1.1\r\nHost: test\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    await entered;
    stop.abort();
    socket.write('GET /readyz HTTP/1.1\r\nHost: test\r\n\r\n');
    await sleep(50);
    assert.equal(closed, false, 'closed while a request was in flight');
    await assert.rejects(fetch(`${server.address}/healthz`), 'accepted a new connection while closing');
    release();
    await server.closed;
    await socketClosed;
    // The second response follows the first body directly, not on a line of its own.
    const statuses = [...received.matchAll(/HTTP\/1\.1 (\d{3}) /g)].map((m) => m[1]);
    assert.deepEqual(statuses, ['200', '503']);
    assert.match(received, /"function":"node-init"/);
  });

  it('cuts requests still running at the end of the grace period, aborting their signal', async () => {
    let signal: AbortSignal | undefined;
    const one: One = async (_key, options) => {
      signal = options.signal;
      await new Promise((resolve) => {
        options.signal.addEventListener('abort', resolve);
      });
      return report(options);
    };
    const app = await buildApp(recording({ one }), { logger, processMetrics: false });
    const stop = new AbortController();
    const server = await serve(app, { port: 0, host: '127.0.0.1', signal: stop.signal, graceMs: 50 });
    const outcome = fetch(`${server.address}/reconcile`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name":"worker-1"}',
    }).then(
      (response) => `answered ${response.status}`,
      () => 'connection cut',
    );
    while (signal === undefined) await sleep(1);
    stop.abort();
    await server.closed;
    assert.equal(await outcome, 'connection cut');
    assert.equal(await aborted(signal), true);
  });

  it('aborts the reconcile signal when the client gives up, and not otherwise', async (t) => {
    const { definition, entered, release } = gated();
    const app = await buildApp(definition, { logger, processMetrics: false });
    const stop = new AbortController();
    t.after(() => {
      stop.abort();
    });
    const server = await serve(app, { port: 0, host: '127.0.0.1', signal: stop.signal });
    const client = new AbortController();
    const request = fetch(`${server.address}/reconcile`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: '{"name":"a"}',
      signal: client.signal,
    });
    const options = await entered;
    await sleep(20);
    assert.equal(options.signal.aborted, false, 'aborted while the client was still waiting');
    client.abort();
    await assert.rejects(request);
    assert.equal(await aborted(options.signal), true);
    release();
    stop.abort();
    await server.closed;
  });

  it('closes at once when the signal was aborted before listening', async () => {
    const app = await buildApp(recording(), { logger, processMetrics: false });
    const server = await serve(app, { port: 0, host: '127.0.0.1', signal: AbortSignal.abort() });
    await server.closed;
    await assert.rejects(fetch(`${server.address}/healthz`));
  });

  it('rejects when the port is taken', async (t) => {
    const first = await buildApp(recording(), { logger, processMetrics: false });
    const stop = new AbortController();
    t.after(() => {
      stop.abort();
    });
    const server = await serve(first, { port: 0, host: '127.0.0.1', signal: stop.signal });
    const second = await buildApp(recording(), { logger, processMetrics: false });
    t.after(() => second.close());
    await assert.rejects(serve(second, { port: server.port, host: '127.0.0.1' }), { code: 'EADDRINUSE' });
  });
});

describe('createLogger', () => {
  function capture(level?: 'warn'): { log: ReturnType<typeof createLogger>; lines: Record<string, unknown>[] } {
    const lines: Record<string, unknown>[] = [];
    const log = createLogger({
      name: 'node-init',
      level,
      destination: { write: (line: string) => lines.push(JSON.parse(line) as Record<string, unknown>) },
    });
    return { log, lines };
  }

  it('writes JSON lines with fn and the level by name', () => {
    const { log, lines } = capture();
    log.info({ key: 'Node/a' }, 'hello');
    assert.equal(lines.length, 1);
    assert.equal(lines[0]?.['fn'], 'node-init');
    assert.equal(lines[0]['level'], 'info');
    assert.equal(lines[0]['msg'], 'hello');
    assert.equal(lines[0]['key'], 'Node/a');
  });

  it('honours the level', () => {
    const { log, lines } = capture('warn');
    log.info('dropped');
    log.warn('kept');
    assert.deepEqual(
      lines.map((l) => l['msg']),
      ['kept'],
    );
  });

  it('redacts secret-like fields at the top level and two levels down', () => {
    const { log, lines } = capture();
    log.info({
      token: 't',
      password: 'p',
      user: { clientSecret: 's', name: 'admin' },
      req: { headers: { authorization: 'Bearer x', 'set-cookie': 'c', 'x-api-key': 'k', accept: 'application/json' } },
    });
    log.child({ secret: 'from a child' }).info('child');
    assert.deepEqual(lines[0], {
      level: 'info',
      time: lines[0]?.['time'],
      fn: 'node-init',
      token: '[redacted]',
      password: '[redacted]',
      user: { clientSecret: '[redacted]', name: 'admin' },
      req: {
        headers: {
          authorization: '[redacted]',
          'set-cookie': '[redacted]',
          'x-api-key': '[redacted]',
          accept: 'application/json',
        },
      },
    });
    assert.equal(lines[1]?.['secret'], '[redacted]');
  });

  it('has three redaction paths per field', () => {
    assert.ok(redactedPaths.includes('authorization'));
    assert.ok(redactedPaths.includes('*.*.authorization'));
    assert.ok(redactedPaths.includes('*.*["set-cookie"]'));
  });
});
