// Step 0: the API server's own ceiling on this machine — sustained Node merge
// PATCHes per second from one client with `concurrency` requests in flight, before cirrus runs.

import { deleteNodes, nodeObject, type Bench } from '../../test/harness/context.ts';
import type { ScenarioResult } from '../../test/harness/report.ts';

export async function calibrate(bench: Bench): Promise<{ result: ScenarioResult; patchesPerSecond: number }> {
  const { kube } = bench;
  const nodes = 50;
  const concurrency = 32;
  const seconds = bench.full ? 15 : 5;
  const names = Array.from({ length: nodes }, (_, i) => `calib-${i}`);
  await kube.createAll(
    '/api/v1/nodes',
    names.map((n) => nodeObject(n, 'calib', false)),
    { concurrency: 16 },
  );
  let sent = 0;
  const end = performance.now() + seconds * 1000;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    while (performance.now() < end) {
      const n = sent++;
      const patch = { metadata: { labels: { 'bench.cirrus/seq': String(n) } } };
      await kube.call('PATCH', `/api/v1/nodes/${names[n % nodes] ?? ''}`, patch, 'application/merge-patch+json');
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  const patchesPerSecond = sent / ((performance.now() - started) / 1000);
  await deleteNodes(kube, 'calib');
  return {
    patchesPerSecond,
    result: {
      figures: [
        {
          scenario: 'calibration',
          metric: 'Node PATCH/s (API server ceiling)',
          value: patchesPerSecond,
          unit: '/s',
          note: `1 client, ${concurrency} in flight, ${seconds} s`,
        },
      ],
      detail: { concurrency, seconds, patches: sent },
    },
  };
}
