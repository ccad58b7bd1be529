// `cirrus reconcile` prints what a function answered with its control characters escaped (issue 38,
// finding 4): a report's keys, plans, event messages and errors can carry a Service's annotations,
// and a reply that is not a report is printed too. Against a local HTTP server at --url that answers
// as a hostile or broken function would.

import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, it } from 'node:test';
import { runCommandLine } from '../harness/command-line.ts';

// A newline and a forged line, a carriage return, terminal escapes (ESC, BEL, 8-bit CSI), DEL.
const forged = 'x\n[12:00:00.000] INFO: forged\r\u001b[2J\u001b]0;title\u0007\u009b31m\u007f';
// eslint-disable-next-line no-control-regex
const control = /[\u0000-\u0009\u000b-\u001f\u007f-\u009f]/;

const report = {
  function: 'service-lb',
  dryRun: true,
  objects: [
    {
      key: `default/web${forged}`,
      result: `failed${forged}`,
      changes: [
        {
          action: 'plan',
          target: 'Service/default/web',
          detail: {
            name: `lb${forged}`,
            reason: forged,
            changes: [{ setting: `scheme${forged}`, change: forged }],
            warnings: [forged],
          },
        },
        { action: 'event', target: 'Service/default/web', detail: { type: 'Warning', reason: 'R', message: forged } },
        { action: 'cloud', target: 'Service/default/web', detail: { method: forged } },
        { action: `patch${forged}`, target: forged, detail: { metadata: { annotations: { a: forged } } } },
      ],
      error: forged,
      note: forged,
    },
  ],
};

// What the server answers next: status and body.
let reply: { status: number; body: string } = { status: 200, body: '' };
let server: Server;
let url: string;

before(async () => {
  server = createServer((request, response) => {
    request.resume();
    response.writeHead(reply.status, { 'content-type': 'application/json' }).end(reply.body);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/service-lb`;
});

after(() => {
  server.close();
});

// Every line printed: no control character but the line ends, and no line of the reply's own.
function assertNoForgedLine(text: string, lines: number): void {
  assert.doesNotMatch(text, control, JSON.stringify(text));
  assert.doesNotMatch(text, /\n\[12:00:00\.000\]/);
  assert.equal(text.split('\n').length - 1, lines, text);
}

describe('cirrus reconcile prints a reply with its control characters escaped', () => {
  const argv = (...more: string[]): string[] => ['reconcile', 'service', 'default/web', '--url', url, ...more];

  it('a report, readably: every key, plan, change, event, error and note on its own line', async () => {
    reply = { status: 200, body: JSON.stringify(report) };
    const { code, stdout, stderr } = await runCommandLine(argv('--dry-run'));
    assert.equal(code, 0, stderr);
    // The heading, the object, the plan's setting and warning, three changes, the error and the note.
    assertNoForgedLine(stdout, 9);
    assert.match(
      stdout,
      /^default\/webx\\n\[12:00:00\.000\] INFO: forged\\r\\u001b\[2J\\u001b\]0;title\\u0007\\u009b31m\\u007f: failedx\\n/m,
    );
    assert.match(stdout, /^ {2}would record event Warning\/R: x\\n\[12:00:00\.000\] INFO: forged\\r\\u001b/m);
  });

  it('-o json: one line that parses to the same report', async () => {
    reply = { status: 200, body: JSON.stringify(report) };
    const { code, stdout } = await runCommandLine(argv('-o', 'json'));
    assert.equal(code, 0);
    assertNoForgedLine(stdout, 1);
    assert.deepEqual(JSON.parse(stdout), report);
  });

  it('a 2xx reply that is not a report, and a refusal, escaped whole', async () => {
    reply = { status: 200, body: forged };
    const ok = await runCommandLine(argv());
    assert.equal(ok.code, 0);
    assertNoForgedLine(ok.stdout, 1);
    reply = { status: 500, body: `{"error":"${forged}"}` };
    const refused = await runCommandLine(argv());
    assert.equal(refused.code, 1);
    assertNoForgedLine(refused.stderr, 1);
    assert.match(
      refused.stderr,
      /^cirrus reconcile: service-lb answered 500: \{"error":"x\\n\[12:00:00\.000\] INFO: forged/,
    );
  });
});
