// A period's rechecks spread over the period (relay/spread.ts, ADR 0031): 5,000 Nodes every 5
// minutes go out about 17 a second, not 5,000 at once; a few (node-lifecycle's NotReady Nodes every
// 5 s) go one at a time, evenly; a round the timers could not finish is sent before the next.

import assert from 'node:assert/strict';
import { describe, it, type TestContext } from 'node:test';
import { minimumStepMs, Spread } from '../../relay/spread.ts';

// A spread whose sends are recorded with the (mocked) time they happened at.
function recorded(t: TestContext): { spread: Spread<number>; sent: { item: number; at: number }[] } {
  t.mock.timers.enable({ apis: ['setTimeout', 'Date'], now: 0 });
  const sent: { item: number; at: number }[] = [];
  const spread = new Spread<number>((item) => sent.push({ item, at: Date.now() }));
  t.after(() => {
    spread.stop();
  });
  return { spread, sent };
}

// Moves the mocked time on by `ms`, a millisecond at a time: a timer set by a timer's callback runs
// in the same advance, at its own time (one tick() of the whole span would run it at the end).
function advance(t: TestContext, ms: number): void {
  for (let i = 0; i < ms; i++) t.mock.timers.tick(1);
}

describe('relay: rechecks spread over the period', () => {
  it('sends 5,000 items over 5 minutes at about 17 a second, never in one burst', (t) => {
    const { spread, sent } = recorded(t);
    const items = Array.from({ length: 5_000 }, (_, i) => i);
    spread.start(items, 300_000);
    assert.ok(sent.length <= 1, `${sent.length} sent at once`);
    advance(t, 1_000);
    assert.ok(sent.length >= 16 && sent.length <= 18, `${sent.length} in the first second`);
    advance(t, 149_000);
    assert.ok(Math.abs(sent.length - 2_500) <= 2, `${sent.length} by half the period`);
    advance(t, 150_000);
    assert.equal(sent.length, 5_000, 'all sent within the period');
    assert.deepEqual(
      sent.map((s) => s.item),
      items,
      'each once, in order',
    );
    // Never more than a second's share in any one second.
    const perSecond = new Map<number, number>();
    for (const s of sent) perSecond.set(Math.floor(s.at / 1000), (perSecond.get(Math.floor(s.at / 1000)) ?? 0) + 1);
    assert.ok(Math.max(...perSecond.values()) <= 18, `at most ${Math.max(...perSecond.values())} in a second`);
  });

  it('sends a few items one at a time, evenly over the period', (t) => {
    const { spread, sent } = recorded(t);
    spread.start([1, 2, 3, 4], 5_000);
    advance(t, 5_000);
    assert.deepEqual(
      sent.map((s) => s.at),
      [0, 1_250, 2_500, 3_750],
    );
  });

  it(`batches items closer than ${minimumStepMs} ms: fewer timers, the same spread`, (t) => {
    const { spread, sent } = recorded(t);
    spread.start(
      Array.from({ length: 1_000 }, (_, i) => i),
      1_000,
    );
    const times = (): number => new Set(sent.map((s) => s.at)).size;
    advance(t, 1_000);
    assert.equal(sent.length, 1_000);
    assert.equal(times(), 100, 'one send every 10 ms');
  });

  it('sends what a round has left before the next round starts; stop drops it', (t) => {
    const { spread, sent } = recorded(t);
    spread.start([1, 2, 3, 4], 1_000);
    advance(t, 300);
    assert.deepEqual(
      sent.map((s) => s.item),
      [1, 2],
    );
    spread.start([5, 6], 1_000);
    assert.deepEqual(
      sent.map((s) => s.item),
      [1, 2, 3, 4, 5],
      'the rest of the round before at once, then the new round',
    );
    spread.stop();
    advance(t, 5_000);
    assert.equal(sent.length, 5, 'nothing after stop');
    assert.equal(spread.pending, 0);
  });
});
