// The coalescing of passes (shared/coalesce.ts): routes' whole-cluster passes, service-lb's node lists.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { Coalescer } from '../../shared/coalesce.ts';
import { ManualClock } from '../../shared/clock.ts';

describe('Coalescer', () => {
  // A pass that reports the state it saw when it started, and ends when the test says so.
  function gatedPasses(): {
    coalescer: Coalescer<number, string>;
    starts: string[];
    state: { value: number };
    release: () => void;
    signals: AbortSignal[];
  } {
    const starts: string[] = [];
    const signals: AbortSignal[] = [];
    const state = { value: 1 };
    const gates: (() => void)[] = [];
    const coalescer = new Coalescer<number, string>(async (context, signal) => {
      starts.push(context);
      signals.push(signal);
      const seen = state.value;
      await new Promise<void>((resolve) => gates.push(resolve));
      return seen;
    });
    return { coalescer, starts, state, signals, release: () => gates.shift()?.() };
  }
  const never = new AbortController().signal;
  const tick = async (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

  it('answers every request with a pass that started after it arrived, and runs at most one queued pass', async () => {
    const { coalescer, starts, state, release } = gatedPasses();
    const first = coalescer.join('a', never);
    state.value = 2; // changes after the running pass has read it
    const joined = [coalescer.join('b', never), coalescer.join('c', never), coalescer.join('d', never)];
    await tick();
    assert.deepEqual(starts, ['a']);
    release();
    assert.equal(await first, 1);
    await tick();
    assert.deepEqual(starts, ['a', 'b']);
    release();
    assert.deepEqual(await Promise.all(joined), [2, 2, 2]);
    assert.equal(coalescer.busy, false);
  });

  it('starts a fresh pass for a request after the last one ended', async () => {
    const { coalescer, starts, release } = gatedPasses();
    const first = coalescer.join('a', never);
    release();
    await first;
    const second = coalescer.join('b', never);
    await tick();
    release();
    await second;
    assert.deepEqual(starts, ['a', 'b']);
  });

  it('gives every waiting request the error of their pass, and goes on with the next', async () => {
    let fail = true;
    const coalescer = new Coalescer<string, string>(async () => {
      await tick();
      if (fail) throw new Error('list failed');
      return 'ok';
    });
    const failing = [coalescer.join('a', never)];
    const queued = [coalescer.join('b', never), coalescer.join('c', never)];
    await assert.rejects(failing[0] ?? Promise.resolve(), { message: 'list failed' });
    await assert.rejects(Promise.all(queued), { message: 'list failed' });
    fail = false;
    assert.equal(await coalescer.join('d', never), 'ok');
  });

  it('aborts a pass only when every request waiting for it has gone', async () => {
    const { coalescer, signals, release } = gatedPasses();
    const running = coalescer.join('a', never);
    const [one, two] = [new AbortController(), new AbortController()];
    const queued = [coalescer.join('b', one.signal), coalescer.join('c', two.signal)];
    release();
    await running;
    await tick();
    const [, queuedSignal] = signals;
    assert.ok(queuedSignal);
    one.abort();
    assert.equal(queuedSignal.aborted, false);
    two.abort();
    assert.equal(queuedSignal.aborted, true);
    release();
    await Promise.all(queued);
  });

  it('spaces passes by the minimum interval: requests meanwhile join the waiting pass', async () => {
    const clock = new ManualClock(1_000);
    const starts: number[] = [];
    const coalescer = new Coalescer<number, string>(
      () => {
        starts.push(clock.now());
        return Promise.resolve(clock.now());
      },
      { minIntervalMs: 1_000, clock },
    );
    assert.equal(await coalescer.join('a', never), 1_000);
    clock.advance(200);
    const waiting = [coalescer.join('b', never), coalescer.join('c', never)];
    await tick();
    assert.deepEqual(starts, [1_000], 'the second pass waits for the interval');
    assert.deepEqual(clock.pending, [{ until: 2_000, ms: 800 }]);
    clock.advance(700);
    const late = coalescer.join('d', never);
    clock.advance(100);
    assert.deepEqual(await Promise.all([...waiting, late]), [2_000, 2_000, 2_000]);
    assert.deepEqual(starts, [1_000, 2_000]);
    clock.advance(5_000);
    assert.equal(await coalescer.join('e', never), 7_000, 'after the interval, a request starts a pass at once');
  });
});
