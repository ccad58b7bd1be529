// One failure, one line: a Node whose reconcile fails, under `cirrus start`'s wiring (the relay
// handing its events to the functions in process, one log for both), is logged by the function
// at its level and by the relay at debug only; the hand-over's id is logged once (`reqId`, no
// `ceId` repeating it).

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { startCirrus } from '../harness/cirrus.ts';
import { FakeCloud } from '../../providers/fake/index.ts';
import { createNode, newNode, uninitialized } from '../harness/builders.ts';
import { controlPlaneSkip, ownControlPlane, uniqueName } from '../harness/cluster.ts';
import { waitFor } from '../relay/harness.ts';

interface LogLine {
  readonly level: string;
  readonly fn?: string;
  readonly msg?: string;
  readonly reqId?: string;
  readonly ceId?: string;
}

describe('failure logs under the in-process relay', { skip: controlPlaneSkip }, () => {
  const cluster = ownControlPlane();

  it('logs a failed reconcile once, at its level, with one id', async (t) => {
    const cloud = new FakeCloud();
    cloud.errors.set('instanceMetadata', new Error('connect ECONNREFUSED 127.0.0.1:5000'));
    const texts: string[] = [];
    const cirrus = await startCirrus(cluster.admin, cloud, 'info', {
      transport: 'in-process',
      logDestination: { write: (text: string) => void texts.push(text) },
    });
    let stopped: Promise<void> | undefined;
    const stop = (): Promise<void> => (stopped ??= cirrus.stop());
    t.after(stop);
    const name = uniqueName('failing');
    await createNode(cluster.core, newNode(name, uninitialized));
    const lines = (): LogLine[] =>
      texts.filter((text) => text.includes(name)).map((text) => JSON.parse(text) as LogLine);
    const failed = (): LogLine[] => lines().filter((line) => line.msg === 'reconcile failed');
    // Two attempts: the relay has had the first one's answer (and logged it) before it retried.
    await waitFor('the reconcile to fail twice', () => failed().length >= 2, 20_000);
    await stop();
    if (process.env['CIRRUS_TEST_SHOW_LINES'] === '1') for (const line of lines()) console.log(JSON.stringify(line));
    const loud = lines().filter((line) => line.level === 'warn' || line.level === 'error');
    // Every failed attempt is one line (the function's); the relay says nothing more at warn or error.
    assert.deepEqual(
      loud.map((line) => `${line.fn}: ${line.msg}`),
      failed().map((line) => `${line.fn}: ${line.msg}`),
    );
    for (const line of failed()) {
      assert.ok(line.reqId !== undefined, 'the failure names its request');
      assert.equal(line.ceId, undefined, 'the event id is not logged again beside the same reqId');
    }
  });
});
