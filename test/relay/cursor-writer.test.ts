// Who may write the known-keys cursor (relay/cursor-writer.ts, issue 38): a table of writer records
// and what a relay makes of them, on its own clock.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ManualClock } from '../../shared/clock.ts';
import { formatRecord, parseRecord, refusal, WriterJudge } from '../../relay/cursor-writer.ts';

const start = Date.parse('2026-12-01T12:00:00Z');
const other = { identity: 'host-b_0002' };

describe('the cursor writer record', () => {
  it('round-trips through its annotation text', () => {
    const text = formatRecord({ identity: 'host-a_0001', lease: 'kube-system/cirrus-relay' }, start, 15_000);
    assert.deepEqual(parseRecord(text), {
      identity: 'host-a_0001',
      lease: 'kube-system/cirrus-relay',
      renewTime: '2026-12-01T12:00:00.000Z',
      claimSeconds: 15,
    });
    assert.equal(parseRecord('not json'), undefined);
    assert.equal(parseRecord('{"renewTime":"x"}'), undefined);
  });

  it('is free when absent, mine when it names this relay, held while another renews it', () => {
    const clock = new ManualClock(start);
    const judge = new WriterJudge({ identity: 'host-a_0001' }, clock);
    assert.deepEqual(judge.judge(undefined), { kind: 'free', reason: 'none' });
    assert.deepEqual(judge.judge(formatRecord({ identity: 'host-a_0001' }, start, 15_000)), { kind: 'mine' });
    for (let i = 0; i < 6; i += 1) {
      // Renewed every 5 s: never stale, however long it goes on.
      const verdict = judge.judge(formatRecord(other, clock.now(), 15_000));
      assert.equal(verdict.kind, 'held');
      clock.advance(5_000);
    }
  });

  it('is stale once unchanged for as long as it holds, on the reader clock, whatever the writer clock said', () => {
    const clock = new ManualClock(start);
    const judge = new WriterJudge({ identity: 'host-a_0001' }, clock);
    // The writer's clock is an hour ahead: its renewTime is in this relay's future.
    const text = formatRecord(other, start + 3_600_000, 15_000);
    assert.equal(judge.judge(text).kind, 'held');
    clock.advance(14_999);
    assert.equal(judge.judge(text).kind, 'held');
    clock.advance(1);
    assert.deepEqual(judge.judge(text), { kind: 'free', reason: 'stale' });
  });

  it('is stale at once when renewed, by the reader clock, more than twice its duration ago', () => {
    const clock = new ManualClock(start);
    const judge = new WriterJudge({ identity: 'host-a_0001' }, clock);
    assert.deepEqual(judge.judge(formatRecord(other, start - 31_000, 15_000)), { kind: 'free', reason: 'stale' });
    assert.equal(judge.judge(formatRecord(other, start - 29_000, 15_000)).kind, 'held');
  });

  it('passes with the Lease: a writer on the Lease this relay now holds was deposed', () => {
    const clock = new ManualClock(start);
    const lease = 'cirrus-system/cirrus';
    const judge = new WriterJudge({ identity: 'host-a_0001', lease }, clock);
    assert.deepEqual(judge.judge(formatRecord({ ...other, lease }, start, 15_000)), { kind: 'free', reason: 'lease' });
    assert.equal(judge.judge(formatRecord({ ...other, lease: 'kube-system/other' }, start, 15_000)).kind, 'held');
    // Without leader election, a writer's Lease gives nothing away.
    const single = new WriterJudge({ identity: 'host-a_0001' }, clock);
    assert.equal(single.judge(formatRecord({ ...other, lease }, start, 15_000)).kind, 'held');
  });

  it('says who writes and how to run two relays', () => {
    const holder = parseRecord(formatRecord(other, start, 15_000));
    assert.ok(holder);
    const message = refusal('kube-system/cirrus-relay-known-services', holder, true);
    assert.match(message, /written by another relay, host-b_0002 \(without leader election/);
    assert.match(message, /neither writes it nor delivers/);
    assert.match(message, /--leader-elect/);
    assert.match(message, /--relay-cursor=false/);
  });
});
