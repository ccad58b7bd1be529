// The host's entry for hand-overs in process (shared/host/local.ts, ADR 0021): an event handed over
// runs as its `POST /` request would — the same Job with a verified claim, the object by reference,
// the same error table and metrics — counted among the app's requests in flight.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { RetryError } from '../../shared/cloud/errors.ts';
import { buildMultiHost, type AppOptions } from '../../shared/host/app.ts';
import type { FunctionDefinition, ObjectKey, ReconcileOptions, Report } from '../../shared/host/function.ts';
import type { LocalFunctions } from '../../shared/host/local.ts';
import { eventTypes, type CloudEvent, type LocalHandler } from '../../shared/wire/index.ts';
import { deepFreeze } from '../harness/cirrus.ts';
import { silentLogger } from '../harness/builders.ts';

interface Seen {
  readonly key: ObjectKey | 'all';
  readonly options: ReconcileOptions;
}

// A node-init definition that records its calls and runs `body` for each.
function definition(seen: Seen[], body: (options: ReconcileOptions) => Promise<void> = () => Promise.resolve()) {
  const report = (options: ReconcileOptions): Report => ({
    function: 'node-init',
    dryRun: options.dryRun,
    objects: [],
  });
  const run = async (key: ObjectKey | 'all', options: ReconcileOptions): Promise<Report> => {
    seen.push({ key, options });
    await body(options);
    return report(options);
  };
  return {
    name: 'node-init',
    kinds: ['Node'],
    reconcileOne: (key, options) => run(key, options),
    reconcileAll: (options) => run('all', options),
  } satisfies FunctionDefinition;
}

async function host(
  fn: FunctionDefinition,
  options: Partial<AppOptions> = {},
): Promise<{ handler: LocalHandler; local: LocalFunctions; metrics: () => Promise<string> }> {
  const { app, local } = await buildMultiHost([fn], { logger: silentLogger(), processMetrics: false, ...options });
  const handler = local.handlers.get(fn.name);
  if (handler === undefined) throw new Error('no handler');
  return { handler, local, metrics: async () => (await app.inject({ method: 'GET', url: '/metrics' })).body };
}

const node = { apiVersion: 'v1', kind: 'Node', metadata: { name: 'worker-1', resourceVersion: '7' } };

function nodeEvent(type: string = eventTypes.resourceUpdate, data: unknown = node): CloudEvent {
  return {
    specversion: '1.0',
    id: 'id-1',
    source: 'https://api',
    type,
    extensions: { kind: 'Node', apiversion: 'v1', name: 'worker-1', namespace: '' },
    datacontenttype: 'application/json',
    data,
  };
}

const never = new AbortController().signal;

describe('hand-overs in process', () => {
  it('run the event as its request would, the claim verified and the object the very one handed over', async () => {
    const seen: Seen[] = [];
    const { handler, metrics } = await host(definition(seen));
    const frozen = deepFreeze(structuredClone(node));
    const reply = await handler(nodeEvent(eventTypes.resourceUpdate, frozen), never);
    assert.equal(reply.status, 202);
    assert.equal(reply.cloudCalls, 0);
    assert.deepEqual(seen[0]?.key, { kind: 'Node', name: 'worker-1' });
    assert.equal(seen[0].options.claimed, frozen, 'by reference');
    assert.equal(seen[0].options.claimVerified, true);
    const deletion = await handler(nodeEvent(eventTypes.resourceDelete, frozen), never);
    assert.equal(deletion.status, 202);
    assert.equal(seen[1]?.options.lastKnown, frozen);
    assert.equal(seen[1].options.claimed, undefined);
    const exposition = await metrics();
    assert.match(
      exposition,
      /cirrus_reconcile_requests_total\{function="node-init",trigger="dev\.knative\.apiserver\.resource\.update",code="202"\} 1/,
    );
    // The first hand-over's answer is the function's cold start, as a request's would be.
    const coldStart = Number(/^cirrus_cold_start_seconds\{function="node-init"\} (\S+)$/m.exec(exposition)?.[1]);
    assert.ok(coldStart > 0 && coldStart <= process.uptime(), String(coldStart));
  });

  it("answer with the error table's statuses: an invalid event 400, a RetryError 503 with its delay, a failure 500", async () => {
    const seen: Seen[] = [];
    let fail: Error | undefined;
    const { handler } = await host(
      definition(seen, () => (fail === undefined ? Promise.resolve() : Promise.reject(fail))),
    );
    const service = { ...nodeEvent(), extensions: { kind: 'Service', name: 'web', namespace: 'default' } };
    const invalid = await handler(service, never);
    assert.equal(invalid.status, 400);
    assert.equal((invalid.body as { code?: string }).code, 'CIRRUS_ERR_UNSUPPORTED_KIND');
    fail = new RetryError('the cloud is busy', 2500);
    const later = await handler(nodeEvent(), never);
    assert.equal(later.status, 503);
    assert.equal(later.retryAfterSeconds, 3);
    fail = new Error('boom');
    const failed = await handler(nodeEvent(), never);
    assert.equal(failed.status, 500);
    assert.equal((failed.body as { error?: string }).error, 'boom');
  });

  it('count among the requests in flight, refused 503 over the limit, and hand the relay’s signal to the reconcile', async () => {
    const seen: Seen[] = [];
    let release: () => void = () => undefined;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const { handler, local } = await host(
      definition(seen, () => gate),
      { pressure: { maxConcurrentRequests: 1 } },
    );
    const relay = new AbortController();
    const first = handler(nodeEvent(), relay.signal);
    const second = await handler(nodeEvent(), never);
    assert.equal(second.status, 503);
    assert.equal(second.retryAfterSeconds, 5);
    assert.equal((second.body as { code?: string }).code, 'CIRRUS_ERR_OVERLOADED');
    relay.abort();
    assert.equal(seen[0]?.options.signal.aborted, true, 'the relay gave up: the reconcile is abandoned');
    let settled = false;
    void local.settled().then(() => (settled = true));
    await new Promise((resolve) => setImmediate(resolve));
    assert.equal(settled, false, 'a reconcile still runs');
    release();
    assert.equal((await first).status, 202);
    await local.settled();
    assert.equal((await handler(nodeEvent(), never)).status, 202, 'its place is free again');
  });
});
