// app/log.ts: the function named on each line under cirrus start, an error's message said once,
// and secrets censored wherever the redaction paths say, errors included.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { censorSecrets, createLogger, escapeControl, prettyOptions } from '../../app/log.ts';

function capture(): { log: ReturnType<typeof createLogger>; lines: Record<string, unknown>[] } {
  const lines: Record<string, unknown>[] = [];
  const log = createLogger({
    name: 'cirrus',
    destination: { write: (text: string) => lines.push(JSON.parse(text) as Record<string, unknown>) },
  });
  return { log, lines };
}

describe('log lines', () => {
  it("an error wrapped with its cause's message says that message once", () => {
    const { log, lines } = capture();
    const cause = new Error('no machine in the static inventory has the name "worker-9"');
    log.error(
      { err: new Error(`failed to get instance metadata for node worker-9: ${cause.message}`, { cause }) },
      'x',
    );
    const err = lines[0]?.['err'] as { message: string };
    assert.equal(
      err.message,
      'failed to get instance metadata for node worker-9: no machine in the static inventory has the name "worker-9"',
    );
  });

  it('a secret an error carries is censored, its message kept', () => {
    const { log, lines } = capture();
    const error = Object.assign(new Error('request failed'), { headers: { authorization: 'Bearer s3cret' } });
    log.warn({ err: error }, 'failed');
    const text = JSON.stringify(lines[0]);
    assert.doesNotMatch(text, /s3cret/);
    assert.equal((lines[0]?.['err'] as { message: string }).message, 'request failed');
    assert.deepEqual((lines[0]?.['err'] as { headers: unknown }).headers, { authorization: '[redacted]' });
  });

  it('secrets in arrays and in a child of a child are censored; a line without one is left as it is', () => {
    const { log, lines } = capture();
    log
      .child({ reqId: 1 })
      .child({ token: 't' })
      .info({ users: [{ password: 'p', name: 'a' }] }, 'y');
    assert.equal(lines[0]?.['token'], '[redacted]');
    assert.deepEqual(lines[0]['users'], [{ password: '[redacted]', name: 'a' }]);
    const plain = { a: { b: { c: 1 } }, list: [1, 2] };
    assert.equal(censorSecrets(plain), plain);
  });

  it('pretty lines under cirrus start lead with the function, not the process', async () => {
    const { prettyFactory } = await import('pino-pretty');
    const format = prettyFactory({ ...prettyOptions, colorize: false });
    const { log, lines } = capture();
    log.child({ function: 'service-lb' }).info({ changes: 1 }, 'reconciled');
    log.info('cirrus serving');
    assert.match(format(lines[0] ?? {}), /INFO: service-lb: reconciled \{"changes":1\}/);
    assert.match(format(lines[1] ?? {}), /INFO: cirrus: cirrus serving/);
  });

  // A tenant's annotation reaching a message or a field (issue 38, finding 4): a newline and a forged
  // line, a carriage return, terminal escapes (ESC, 8-bit CSI), DEL.
  const forged = 'x\n[12:00:00.000] INFO: forged\r\u001b[2J\u001b]0;title\u0007\u009b31m\u007f';
  // The only escape sequences left are the colours pino-pretty itself writes (SGR).
  // eslint-disable-next-line no-control-regex
  const sgr = /\u001b\[[0-9;]*m/g;
  const uncoloured = (text: string): string => text.replace(sgr, '');
  // eslint-disable-next-line no-control-regex
  const oneCleanLine = /^[^\u0000-\u001f\u007f-\u009f]*\n$/;

  it('pretty lines print no control character of a message, an error or any field: one line each', async () => {
    const { prettyFactory } = await import('pino-pretty');
    const { log, lines } = capture();
    log.child({ function: 'service-lb' }).warn({ err: new Error(forged), annotation: forged }, forged);
    log.info({ name: forged, hostname: forged, caller: forged, pid: forged, weird: '\u0085\u009f' }, 'metadata');
    log.error({ type: 'Error', stack: forged, error: { message: forged, stack: forged } }, 'error-like');
    log.info({ time: forged }, 'a time of its own');
    assert.equal(lines.length, 4);
    for (const colorize of [false, true]) {
      const format = prettyFactory({ ...prettyOptions, colorize });
      for (const line of lines) {
        const printed = uncoloured(format(line));
        assert.match(printed, oneCleanLine, `one line, no control character: ${JSON.stringify(printed)}`);
        assert.doesNotMatch(printed, /\n\[12:00:00\.000\]/);
      }
    }
    const plain = prettyFactory({ ...prettyOptions, colorize: false });
    assert.match(
      plain(lines[0] ?? {}),
      /WARN: service-lb: x\\n\[12:00:00\.000\] INFO: forged\\r\\u001b\[2J\\u001b\]0;title\\u0007\\u009b31m\\u007f: x\\n/,
    );
    assert.match(
      plain(lines[1] ?? {}),
      /INFO: cirrus: metadata \{"name":"x\\n\[12:00:00\.000\] INFO: forged.*"weird":"\\u0085\\u009f"\}\n$/,
    );
  });

  it('escapeControl writes C0, DEL and C1 as JSON escapes and leaves the rest (a backslash, no-break space, é) as it is', () => {
    assert.equal(
      escapeControl('a\nb\r\t\u0000\u001b[0m\u007f\u0080\u009b\u00a0é\\n'),
      'a\\nb\\r\\t\\u0000\\u001b[0m\\u007f\\u0080\\u009b\u00a0é\\n',
    );
  });
});
