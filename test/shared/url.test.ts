// shared/net/url.ts, and the places every message that can reach a tenant's Event, a reply or a
// log line goes through it (issue 38, finding 3): an error text that repeats a URL with
// `user:password@` or a token in its query, from any provider, reaches none of them.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { createLogger } from '../../app/log.ts';
import { errorReply } from '../../shared/host/errors.ts';
import { scrubbed } from '../../shared/host/run.ts';
import { eventFor } from '../../shared/kube/events.ts';
import { displayUrl, scrubUrls } from '../../shared/net/url.ts';

// A third-party provider's error, repeating the URL it was configured with.
const leaky = 'GET https://admin:hunter2@cloud.example:8443/v2/lb?api_key=k3y&x=1 answered 502';
const clean = 'GET https://[redacted]@cloud.example:8443/v2/lb?[redacted] answered 502';
const secrets = /hunter2|admin:|k3y/;

describe('scrubUrls', () => {
  const table: [string, string][] = [
    [leaky, clean],
    ['no url here: user:pw@host', 'no url here: user:pw@host'],
    [
      'http://h/p and http://t@h2/#frag and "https://u:p@h3/q?s=1"',
      'http://h/p and http://[redacted]@h2/ and "https://[redacted]@h3/q?[redacted]"',
    ],
    ['postgres://u:p@db:5432/x', 'postgres://[redacted]@db:5432/x'],
    ['http://h/path@not-userinfo', 'http://h/path@not-userinfo'],
    ['connect ECONNREFUSED 127.0.0.1:443', 'connect ECONNREFUSED 127.0.0.1:443'],
    ['http://a@b@c/ (two @)', 'http://[redacted]@c/ (two @)'],
  ];
  for (const [text, expected] of table)
    it(`${JSON.stringify(text)} → ${JSON.stringify(expected)}`, () => {
      assert.equal(scrubUrls(text), expected);
    });

  it('shows one URL without userinfo or query', () => {
    assert.equal(displayUrl(new URL('https://u:p@h:1/base?t=1#f')), 'https://[redacted]@h:1/base?[redacted]');
    assert.equal(displayUrl('http://127.0.0.1:8080/base'), 'http://127.0.0.1:8080/base');
  });
});

describe('where error text leaves cirrus', () => {
  const error = new Error(`failed to ensure load balancer: ${leaky}`, { cause: new Error(leaky) });

  it('an Event message (every function records its Events through eventFor)', () => {
    const event = eventFor(
      { kind: 'Service', name: 'web', namespace: 'tenant' },
      {
        type: 'Warning',
        reason: 'SyncLoadBalancerFailed',
        message: `Error syncing load balancer: ${error.message}`,
        component: 'c',
      },
    );
    assert.equal(event.message, `Error syncing load balancer: failed to ensure load balancer: ${clean}`);
  });

  it('an error reply, and a report’s errors and notes', () => {
    assert.equal(errorReply(error).body.error, `failed to ensure load balancer: ${clean}`);
    assert.equal(errorReply(leaky).body.error, clean);
    const report = scrubbed({
      function: 'service-lb',
      dryRun: false,
      objects: [
        { key: 'Service/a/b', result: 'failed', changes: [], error: leaky, note: leaky },
        { key: 'Service/a/c', result: 'ensured', changes: [] },
      ],
    });
    assert.doesNotMatch(JSON.stringify(report), secrets);
    assert.equal(report.objects[0]?.error, clean);
    const unchanged = { function: 'f', dryRun: false, objects: [{ key: 'k', result: 'ok', changes: [] }] };
    assert.equal(scrubbed(unchanged), unchanged);
  });

  it('a log line: the message and stack of an error, its causes included', () => {
    const lines: string[] = [];
    const log = createLogger({ name: 'cirrus', destination: { write: (text: string) => lines.push(text) } });
    log.error({ err: error }, 'reconcile failed');
    log.warn({ nested: { err: error } }, 'event not recorded');
    assert.equal(lines.length, 2);
    for (const line of lines) assert.doesNotMatch(line, secrets);
    const err = (JSON.parse(lines[0] ?? '{}') as { err: { message: string; stack: string } }).err;
    assert.equal(err.message, `failed to ensure load balancer: ${clean}`);
    assert.match(err.stack, /caused by: Error: GET https:\/\/\[redacted\]@cloud\.example/);
  });
});
