import assert from 'node:assert/strict';
import type { IncomingHttpHeaders } from 'node:http';
import { describe, it } from 'node:test';
import {
  acceptedEventTypes,
  binaryModeHeaders,
  contentMode,
  eventMode,
  eventObjectKey,
  eventTypes,
  extensionNames,
  formatKey,
  objectSubject,
  parseErrorBody,
  readCloudEvent,
  type CloudEvent,
} from '../../shared/wire/index.ts';
import { InvalidRequestError } from '../../shared/host/errors.ts';

// What ApiServerSource sends in binary mode for a Node (knative/eventing events.go): lower-case
// extensions copied from the object, an empty namespace for a cluster-scoped kind.
const apiServerHeaders: IncomingHttpHeaders = {
  'ce-specversion': '1.0',
  'ce-id': '3b1b6a9e-4c7e-4b8e-9f55-0a6f3c1c2d11',
  'ce-source': 'https://10.96.0.1:443',
  'ce-type': 'dev.knative.apiserver.resource.update',
  'ce-subject': '/apis/v1/namespaces//nodes/worker-1',
  'ce-time': '2026-11-22T03:00:00.123456789Z',
  'ce-kind': 'Node',
  'ce-apiversion': 'v1',
  'ce-name': 'worker-1',
  'ce-namespace': '',
  'content-type': 'application/json',
};

const node = { apiVersion: 'v1', kind: 'Node', metadata: { name: 'worker-1', uid: 'u-1' } };

// The problems of the InvalidRequestError that `fn` throws; fails when it throws anything else.
function problemsOf(fn: () => unknown): { message: string; problems: readonly string[] } {
  try {
    fn();
  } catch (error) {
    assert.ok(error instanceof InvalidRequestError, `expected an InvalidRequestError, got ${String(error)}`);
    return { message: error.message, problems: error.problems };
  }
  assert.fail('expected an InvalidRequestError, nothing was thrown');
}

describe('readCloudEvent, binary mode', () => {
  it('reads the core attributes from ce-* headers, the extensions by name, data from the body', () => {
    const event = readCloudEvent(apiServerHeaders, node);
    assert.deepEqual(event, {
      specversion: '1.0',
      id: '3b1b6a9e-4c7e-4b8e-9f55-0a6f3c1c2d11',
      source: 'https://10.96.0.1:443',
      type: 'dev.knative.apiserver.resource.update',
      subject: '/apis/v1/namespaces//nodes/worker-1',
      time: '2026-11-22T03:00:00.123456789Z',
      datacontenttype: 'application/json',
      extensions: { kind: 'Node', apiversion: 'v1', name: 'worker-1', namespace: '' },
      data: node,
    });
  });

  it('takes datacontenttype from Content-Type, parameters included', () => {
    const event = readCloudEvent({ ...apiServerHeaders, 'content-type': 'application/json; charset=utf-8' }, node);
    assert.equal(event.datacontenttype, 'application/json; charset=utf-8');
  });

  it('percent-decodes header values, and keeps a value whose escapes are invalid as it is', () => {
    const event = readCloudEvent(
      { ...apiServerHeaders, 'ce-subject': '/nodes/w%C3%B6rker%20one', 'ce-comment': '100%' },
      node,
    );
    assert.equal(event.subject, '/nodes/wörker one');
    assert.equal(event.extensions['comment'], '100%');
  });

  it('has no data when there is no body', () => {
    const headers = Object.fromEntries(Object.entries(apiServerHeaders).filter(([name]) => name !== 'content-type'));
    const event = readCloudEvent({ ...headers, 'ce-type': eventTypes.reconcileAll }, undefined);
    assert.equal(event.data, undefined);
    assert.equal(event.datacontenttype, undefined);
  });

  it('lists every missing attribute at once', () => {
    const { message, problems } = problemsOf(() => readCloudEvent({ 'content-type': 'application/json' }, {}));
    assert.equal(message, 'not a valid CloudEvent (binary mode: attributes in ce-* headers)');
    assert.deepEqual(problems, [
      'specversion: is required',
      'id: is required',
      'source: is required',
      'type: is required',
    ]);
  });

  it('rejects another specversion, empty attributes, and extension names that are not lower-case letters and digits', () => {
    const headers = { ...apiServerHeaders, 'ce-specversion': '0.3', 'ce-id': '', 'ce-resource-version': '42' };
    assert.deepEqual(problemsOf(() => readCloudEvent(headers, node)).problems, [
      'specversion: must be "1.0", not "0.3"',
      'id: must not be empty',
      'resource-version: extension names must be lower-case letters a-z and digits only',
    ]);
  });
});

describe('readCloudEvent, structured mode', () => {
  const structured = { 'content-type': 'application/cloudevents+json; charset=utf-8' };
  const event = {
    specversion: '1.0',
    id: 'e-1',
    source: 'https://10.96.0.1:443',
    type: 'dev.knative.apiserver.resource.add',
    datacontenttype: 'application/json',
    kind: 'Node',
    name: 'worker-1',
    namespace: '',
    data: node,
  };

  it('reads the whole event from the body, extensions being the attributes it does not know', () => {
    assert.deepEqual(readCloudEvent(structured, event), {
      specversion: '1.0',
      id: 'e-1',
      source: 'https://10.96.0.1:443',
      type: 'dev.knative.apiserver.resource.add',
      datacontenttype: 'application/json',
      extensions: { kind: 'Node', name: 'worker-1', namespace: '' },
      data: node,
    });
  });

  it('ignores ce-* headers: the body is the event', () => {
    assert.equal(readCloudEvent({ ...structured, 'ce-id': 'from-header' }, event).id, 'e-1');
  });

  it('accepts number and boolean extensions, and treats null attributes as absent', () => {
    const read = readCloudEvent(structured, { ...event, attempt: 2, replay: false, subject: null });
    assert.equal(read.extensions['attempt'], 2);
    assert.equal(read.extensions['replay'], false);
    assert.equal(read.subject, undefined);
    assert.equal(Object.hasOwn(read.extensions, 'subject'), false);
  });

  it('decodes data_base64: JSON for a JSON datacontenttype, text otherwise', () => {
    const attributes: Record<string, unknown> = { ...event };
    delete attributes['data'];
    const base64 = Buffer.from(JSON.stringify(node)).toString('base64');
    assert.deepEqual(readCloudEvent(structured, { ...attributes, data_base64: base64 }).data, node);
    const text = readCloudEvent(structured, {
      ...attributes,
      datacontenttype: 'text/plain',
      data_base64: Buffer.from('hi').toString('base64'),
    });
    assert.equal(text.data, 'hi');
  });

  it('rejects data together with data_base64', () => {
    assert.deepEqual(problemsOf(() => readCloudEvent(structured, { ...event, data_base64: 'e30=' })).problems, [
      'data_base64: must be a base64 string, and not given together with data',
    ]);
  });

  it('lists every problem of a malformed event', () => {
    const { message, problems } = problemsOf(() =>
      readCloudEvent(structured, { specversion: '1.0.1', id: 7, type: '', Kind: 'Node', tags: ['a'] }),
    );
    assert.equal(message, 'not a valid CloudEvent (structured mode: the whole event in the body)');
    assert.deepEqual(problems, [
      'specversion: must be "1.0", not "1.0.1"',
      'id: must be a string',
      'source: is required',
      'type: must not be empty',
      'Kind: extension names must be lower-case letters a-z and digits only',
      'tags: must be a string, number or boolean',
    ]);
  });

  it('rejects a body that is not a JSON object', () => {
    const { problems } = problemsOf(() => readCloudEvent(structured, [event]));
    assert.equal(problems[0], 'the body must be a JSON object (the event)');
  });
});

describe('contentMode', () => {
  const cases: { contentType: string | undefined; mode: string }[] = [
    { contentType: 'application/cloudevents+json', mode: 'structured' },
    { contentType: 'Application/CloudEvents+JSON; charset=UTF-8', mode: 'structured' },
    { contentType: 'application/json', mode: 'binary' },
    { contentType: 'text/plain', mode: 'binary' },
    { contentType: undefined, mode: 'binary' },
  ];
  for (const { contentType, mode } of cases) {
    it(`${String(contentType)} is ${mode} mode`, () => {
      assert.equal(contentMode(contentType), mode);
    });
  }

  it('rejects batched mode and other event formats, saying what to send instead', () => {
    assert.equal(
      problemsOf(() => contentMode('application/cloudevents-batch+json')).message,
      'batched CloudEvents are not supported: send one event per request',
    );
    assert.equal(
      problemsOf(() => contentMode('application/cloudevents+avro')).message,
      'event format application/cloudevents+avro is not supported: use application/cloudevents+json or binary mode',
    );
  });
});

describe('eventMode', () => {
  const cases: [string, string | undefined][] = [
    ['dev.knative.apiserver.resource.add', 'resource'],
    ['dev.knative.apiserver.resource.update', 'resource'],
    ['dev.knative.apiserver.resource.delete', 'resource'],
    ['dev.knative.apiserver.ref.add', 'ref'],
    ['dev.knative.apiserver.ref.update', 'ref'],
    ['dev.knative.apiserver.ref.delete', 'ref'],
    ['dev.cirrus-ccm.reconcile.all', 'all'],
    ['dev.knative.apiserver.resource.patch', undefined],
    ['dev.knative.sources.ping', undefined],
  ];
  for (const [type, mode] of cases) {
    it(`${type} → ${String(mode)}`, () => {
      assert.equal(eventMode(type), mode);
    });
  }

  it('accepts exactly the types that have a mode', () => {
    assert.deepEqual(
      [...acceptedEventTypes].sort(),
      cases
        .filter(([, mode]) => mode !== undefined)
        .map(([type]) => type)
        .sort(),
    );
  });
});

describe('eventObjectKey', () => {
  function event(extensions: CloudEvent['extensions'], data: unknown): CloudEvent {
    return { specversion: '1.0', id: 'e-1', source: 's', type: eventTypes.resourceUpdate, extensions, data };
  }
  const service = { kind: 'Service', metadata: { name: 'web', namespace: 'default' } };

  const cases: { name: string; mode: 'resource' | 'ref'; event: CloudEvent; key: object }[] = [
    {
      name: 'ApiServerSource extensions, cluster-scoped',
      mode: 'resource',
      event: event({ kind: 'Node', name: 'worker-1', namespace: '' }, node),
      key: { kind: 'Node', name: 'worker-1' },
    },
    {
      name: 'extensions, namespaced',
      mode: 'resource',
      event: event({ kind: 'Service', name: 'web', namespace: 'default' }, undefined),
      key: { kind: 'Service', name: 'web', namespace: 'default' },
    },
    {
      name: 'extensions win over data',
      mode: 'resource',
      event: event({ kind: 'Node', name: 'from-extension' }, node),
      key: { kind: 'Node', name: 'from-extension' },
    },
    {
      name: 'resource data when there are no extensions',
      mode: 'resource',
      event: event({}, service),
      key: { kind: 'Service', name: 'web', namespace: 'default' },
    },
    {
      name: 'resource data, cluster-scoped',
      mode: 'resource',
      event: event({}, node),
      key: { kind: 'Node', name: 'worker-1' },
    },
    {
      name: 'ref data',
      mode: 'ref',
      event: event({}, { apiVersion: 'v1', kind: 'Service', name: 'web', namespace: 'default' }),
      key: { kind: 'Service', name: 'web', namespace: 'default' },
    },
    {
      name: 'ref data with an empty namespace',
      mode: 'ref',
      event: event({}, { apiVersion: 'v1', kind: 'Node', name: 'worker-1', namespace: '' }),
      key: { kind: 'Node', name: 'worker-1' },
    },
    {
      name: 'an empty namespace extension means cluster-scoped, whatever data says',
      mode: 'resource',
      event: event({ namespace: '' }, service),
      key: { kind: 'Service', name: 'web' },
    },
    {
      name: 'data fills what the extensions leave out',
      mode: 'resource',
      event: event({ kind: 'Service' }, service),
      key: { kind: 'Service', name: 'web', namespace: 'default' },
    },
  ];
  for (const { name, mode, event: input, key } of cases) {
    it(name, () => {
      assert.deepEqual(eventObjectKey(input, mode), key);
    });
  }

  it('names what is missing, by mode', () => {
    assert.deepEqual(
      problemsOf(() => eventObjectKey(event({ kind: 'Node' }, { metadata: {} }), 'resource')),
      {
        message: 'the event does not name an object',
        problems: ['name: no "name" extension and no data.metadata.name'],
      },
    );
    assert.deepEqual(problemsOf(() => eventObjectKey(event({}, 'not an object'), 'ref')).problems, [
      'kind: no "kind" extension and no data.kind',
      'name: no "name" extension and no data.name',
    ]);
  });

  it('treats data fields of the wrong type, and non-string extensions, as missing', () => {
    assert.deepEqual(
      problemsOf(() => eventObjectKey(event({ kind: 'Node', name: 5 }, { metadata: { name: ['x'] } }), 'resource'))
        .problems,
      ['name: no "name" extension and no data.metadata.name'],
    );
  });
});

describe('the wire, sender to receiver', () => {
  it('reads back the binary-mode headers a sender writes, percent-encoding included', () => {
    const key = { kind: 'Service', name: 'web', namespace: 'default' };
    const headers = binaryModeHeaders({
      specversion: '1.0',
      id: 'e-1',
      source: 'https://10.96.0.1:443',
      type: eventTypes.resourceUpdate,
      subject: objectSubject('v1', key),
      [extensionNames.kind]: key.kind,
      [extensionNames.name]: key.name,
      [extensionNames.namespace]: key.namespace,
      cluster: 'east side "β" 100%',
    });
    assert.equal(headers['ce-subject'], '/apis/v1/namespaces/default/services/web');
    assert.equal(headers['ce-cluster'], 'east%20side%20%22%CE%B2%22%20100%25');
    const event = readCloudEvent({ ...headers, 'content-type': 'application/json' }, {});
    assert.equal(event.extensions['cluster'], 'east side "β" 100%');
    assert.deepEqual(eventObjectKey(event, 'resource'), key);
    assert.equal(formatKey(eventObjectKey(event, 'resource')), 'Service/default/web');
  });

  it('forms subjects and keys of cluster-scoped objects with an empty namespace', () => {
    assert.equal(objectSubject('v1', { kind: 'Node', name: 'worker-1' }), '/apis/v1/namespaces//nodes/worker-1');
    assert.equal(formatKey({ kind: 'Node', name: 'worker-1', namespace: '' }), 'Node/worker-1');
  });

  it('reads error replies back', () => {
    assert.deepEqual(parseErrorBody('{"error":"invalid","problems":["a",7]}'), { error: 'invalid', problems: ['a'] });
    for (const text of ['', 'busy', 'null', '"x"', '[]', '{"error":3}'])
      assert.equal(parseErrorBody(text), undefined, text);
  });
});
