// KeyedSerializer: one run per key at a time, in arrival order; other keys run beside it; a
// failed run does not hold up the next; a run that waited is told so, and so is a pass's run of
// a key that another run reconciled since the pass began (its listed copy is stale).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { setTimeout as sleep } from 'node:timers/promises';
import { KeyedSerializer } from '../../shared/concurrency.ts';

describe('KeyedSerializer', () => {
  it('runs one key at a time, in arrival order, and tells a run that it waited', async () => {
    const serializer = new KeyedSerializer();
    const log: string[] = [];
    let inFlight = 0;
    const run = (label: string) =>
      serializer.run('k', async (waited) => {
        inFlight += 1;
        assert.equal(inFlight, 1, `${label} overlapped another run of the key`);
        log.push(`${label}:${String(waited)}`);
        await sleep(10);
        inFlight -= 1;
        return label;
      });
    assert.deepEqual(await Promise.all([run('a'), run('b'), run('c')]), ['a', 'b', 'c']);
    assert.deepEqual(log, ['a:false', 'b:true', 'c:true']);
    assert.equal(serializer.busy, 0, 'no key left behind');
  });

  it('runs other keys beside it', async () => {
    const serializer = new KeyedSerializer();
    let together = 0;
    let most = 0;
    const run = (key: string) =>
      serializer.run(key, async () => {
        together += 1;
        most = Math.max(most, together);
        await sleep(10);
        together -= 1;
      });
    await Promise.all([run('a'), run('b'), run('c')]);
    assert.equal(most, 3);
  });

  it('passes a failure to its caller and goes on with the next run', async () => {
    const serializer = new KeyedSerializer();
    const failing = serializer.run('k', () => Promise.reject(new Error('boom')));
    const next = serializer.run('k', (waited) => Promise.resolve(waited));
    await assert.rejects(failing, /boom/);
    assert.equal(await next, true);
  });

  it("tells a pass's run that its copy is stale when a run of the key came and went since the pass began", async () => {
    const serializer = new KeyedSerializer();
    const seen: string[] = [];
    await serializer.pass(async (run) => {
      // As a pass's list: read, then an event's reconcile of 'a' starts and finishes before the
      // pass reaches 'a' — nothing is waiting, but the listed copy of 'a' is older than its write.
      await serializer.run('a', () => Promise.resolve());
      await run('a', (stale) => Promise.resolve(seen.push(`a:${String(stale)}`)));
      await run('b', (stale) => Promise.resolve(seen.push(`b:${String(stale)}`)));
    });
    assert.deepEqual(seen, ['a:true', 'b:false']);
    // A run after the pass ended is no pass's concern, and a new pass starts clean.
    await serializer.run('b', () => Promise.resolve());
    const again = await serializer.pass((run) => run('a', (stale) => Promise.resolve(stale)));
    assert.equal(again, false);
  });
});
