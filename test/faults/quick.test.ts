// The fault suite's quick profile (test/faults, `npm run chaos -- --quick`) inside `npm test`: a
// relay SIGKILLed during churn, a forced 410 Gone, every event delivered three times, Services
// deleted while cirrus is down. Fails when a row misses its goal, naming the row and what it lost.
// Starts a control plane of its own (row 3 restarts its API server).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { chaosTable, runChaos } from './suite.ts';

describe('chaos --quick', () => {
  it('meets every row’s goal', { timeout: 240_000 }, async () => {
    const run = await runChaos({ profile: 'quick' });
    const missed = run.results.filter((r) => r.ok !== true);
    assert.deepEqual(
      missed.map((r) => `row ${r.row}: ${r.note} ${JSON.stringify(r.detail ?? {})}`),
      [],
      `\n${chaosTable(run.results)}\nlogs: ${run.dir}`,
    );
  });
});
