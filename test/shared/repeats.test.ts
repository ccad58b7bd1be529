// shared/repeats.ts: a repeated failure is logged once, then once per interval with a count, by
// its message and cause (not by object), on an injected clock.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../shared/clock.ts';
import { Repeats } from '../../shared/repeats.ts';

interface Line {
  readonly fields: Record<string, unknown>;
  readonly message: string;
}

function recorder(): { lines: Line[]; log: { warn: (fields: Record<string, unknown>, message: string) => void } } {
  const lines: Line[] = [];
  return { lines, log: { warn: (fields, message) => lines.push({ fields, message }) } };
}

const refused = (): Error => new Error('connect ECONNREFUSED 127.0.0.1:5000');

describe('Repeats', () => {
  it('logs the first failure, then one summary per interval for every Node failing the same way', () => {
    const clock = new ManualClock(0);
    const repeats = new Repeats({ intervalMs: 60_000, clock });
    const { lines, log } = recorder();
    // Ten Nodes, every 5 s, for a minute: 130 failures of one kind.
    for (let second = 0; second <= 60; second += 5) {
      for (let node = 0; node < 10; node += 1)
        repeats.warn(log, { key: `Node/n${node}`, err: refused() }, 'node not reconciled');
      clock.advance(5_000);
    }
    assert.equal(lines.length, 2, lines.map((l) => l.message).join('\n'));
    const [first, summary] = lines as [Line, Line];
    assert.equal(first.message, 'node not reconciled');
    assert.equal(first.fields['key'], 'Node/n0');
    // The summary came with Node/n0 at 60 s: the 119 held back and this one.
    assert.equal(
      summary.message,
      'node not reconciled: connect ECONNREFUSED 127.0.0.1:5000 (120 more times in the last 60 s)',
    );
    assert.equal(summary.fields['repeats'], 120);
    assert.equal('err' in summary.fields, false);
  });

  it('keeps kinds apart: another cause or another message is logged as it comes', () => {
    const clock = new ManualClock(0);
    const repeats = new Repeats({ intervalMs: 60_000, clock });
    const { lines, log } = recorder();
    repeats.warn(log, { err: refused() }, 'node not reconciled');
    repeats.warn(log, { err: new Error('throttled') }, 'node not reconciled');
    repeats.warn(log, { err: refused() }, 'route not reconciled');
    repeats.warn(log, { err: refused() }, 'node not reconciled');
    assert.deepEqual(
      lines.map((l) => l.message),
      ['node not reconciled', 'node not reconciled', 'route not reconciled'],
    );
  });

  it('logs a lone failure after a quiet interval in full, not as a count', () => {
    const clock = new ManualClock(0);
    const repeats = new Repeats({ intervalMs: 60_000, clock });
    const { lines, log } = recorder();
    repeats.warn(log, { err: refused() }, 'node not reconciled');
    clock.advance(90_000);
    repeats.warn(log, { err: refused() }, 'node not reconciled');
    assert.deepEqual(
      lines.map((l) => l.message),
      ['node not reconciled', 'node not reconciled'],
    );
    assert.ok((lines as [Line, Line])[1].fields['err'] instanceof Error);
  });
});
