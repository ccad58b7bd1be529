// G7/G8: the relay alone, delivering everything (a `sink` destination, as K_SINK) to a trivial
// local HTTP server that answers 202. Node label PATCHes carry a sequence number; per event, the
// latency from our PATCH returning to the sink receiving it; and events delivered per second.
// Runs twice: as fast as one client can write, and at 500 writes/s (G8's load).

import { createServer, type Server } from 'node:http';
import { buildRoutingTable, startRelay } from '../../relay/index.ts';
import { createLogger } from '../../app/log.ts';
import { deleteNodes, nodeObject, type Bench } from '../../test/harness/context.ts';
import { percentile, sleep, until } from '../../test/harness/kube.ts';
import type { Figure, ScenarioResult } from '../../test/harness/report.ts';
import { catalogue } from '../../functions/catalogue.ts';

const nodes = 100;

interface Phase {
  readonly ratePerSecond: number | undefined;
  readonly seconds: number;
  readonly ceiling: number | undefined;
}

interface Sink {
  readonly server: Server;
  readonly url: string;
  /** Receipt time by sequence number. */
  readonly received: Map<number, number>;
  delivered: number;
}

export async function relayAlone(bench: Bench, ceiling: number | undefined): Promise<ScenarioResult> {
  const { kube } = bench;
  const names = Array.from({ length: nodes }, (_, i) => `relay-${i}`);
  await kube.createAll(
    '/api/v1/nodes',
    names.map((n) => nodeObject(n, 'relay', false)),
    { concurrency: 16 },
  );
  const sink = await startSink();
  const relay = startRelay({
    kubeConfig: bench.kubeConfig,
    routing: buildRoutingTable(catalogue, { sink: sink.url }),
    logger: createLogger({ name: 'relay', level: 'warn' }),
    leaderElection: false,
    processMetrics: false,
  });
  const figures: Figure[] = [];
  try {
    await relay.ready;
    await until(() => sink.delivered >= nodes, 30_000, 'the initial adds');
    const seconds = bench.full ? 30 : 5;
    figures.push(...(await phase(bench, sink, names, { ratePerSecond: undefined, seconds, ceiling })));
    figures.push(...(await phase(bench, sink, names, { ratePerSecond: 500, seconds, ceiling })));
  } finally {
    await relay.stop();
    sink.server.close();
    await deleteNodes(kube, 'relay');
  }
  return { figures, detail: { nodes } };
}

async function phase(bench: Bench, sink: Sink, names: string[], p: Phase): Promise<Figure[]> {
  const acked = new Map<number, number>();
  const sent = new Map<number, number>();
  sink.received.clear();
  const deliveredBefore = sink.delivered;
  const started = performance.now();
  const end = started + p.seconds * 1000;
  let seq = 0;
  const worker = async (): Promise<void> => {
    while (performance.now() < end) {
      const n = seq++;
      if (p.ratePerSecond !== undefined) await sleep(started + (n * 1000) / p.ratePerSecond - performance.now());
      sent.set(n, performance.now());
      await bench.kube.call(
        'PATCH',
        `/api/v1/nodes/${names[n % names.length] ?? ''}`,
        { metadata: { labels: { 'bench.cirrus/seq': String(n) } } },
        'application/merge-patch+json',
      );
      acked.set(n, performance.now());
    }
  };
  await Promise.all(Array.from({ length: p.ratePerSecond === undefined ? 32 : 16 }, worker));
  const writeSeconds = (performance.now() - started) / 1000;
  await sleep(1_000);
  const delivered = sink.delivered - deliveredBefore;
  const latencies = [...sink.received].flatMap(([n, at]) => (acked.has(n) ? [at - (acked.get(n) ?? at)] : []));
  const fromSend = [...sink.received].flatMap(([n, at]) => (sent.has(n) ? [at - (sent.get(n) ?? at)] : []));
  const eventsPerSecond = Math.min(delivered, acked.size) / writeSeconds;
  const scenario = `relay alone, ${p.ratePerSecond === undefined ? 'max' : `${p.ratePerSecond}/s`} (${p.seconds} s)`;
  const p50 = percentile(latencies, 50);
  const p99 = percentile(latencies, 99);
  const paced = p.ratePerSecond !== undefined;
  const { ceiling } = p;
  const note = `${acked.size} writes, ${delivered} delivered${ceiling === undefined ? '' : `; ${((100 * eventsPerSecond) / ceiling).toFixed(0)} % of PATCH ceiling`}`;
  return [
    {
      scenario,
      metric: 'events delivered per second',
      value: eventsPerSecond,
      unit: '/s',
      ...(paced
        ? {}
        : {
            goal: 'G7 ≥ 1000/s or ≥ 90 % of ceiling',
            met: eventsPerSecond >= Math.min(1000, 0.9 * (ceiling ?? 1000)),
          }),
      note,
    },
    {
      scenario,
      metric: 'write acked → sink receives p50',
      value: p50,
      unit: 'ms',
      ...(paced ? { goal: 'G8 ≤ 20 ms', met: p50 <= 20 } : {}),
      note: 'ack and delivery race: < 0 counted',
    },
    {
      scenario,
      metric: 'write acked → sink receives p99',
      value: p99,
      unit: 'ms',
      ...(paced ? { goal: 'G8 ≤ 100 ms', met: p99 <= 100 } : {}),
    },
    {
      scenario,
      metric: 'write sent → sink receives p50',
      value: percentile(fromSend, 50),
      unit: 'ms',
      note: 'upper bound: includes the write itself',
    },
    { scenario, metric: 'write sent → sink receives p99', value: percentile(fromSend, 99), unit: 'ms' },
  ];
}

async function startSink(): Promise<Sink> {
  const received = new Map<number, number>();
  const sink = { received, delivered: 0 } as Omit<Sink, 'server' | 'url'> & { delivered: number };
  const server = createServer((req, res) => {
    const at = performance.now();
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      sink.delivered++;
      const seq = /"bench\.cirrus\/seq":"(\d+)"/.exec(body)?.[1];
      if (seq !== undefined) received.set(Number(seq), at);
      res.writeHead(202).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const address = server.address();
  const port = typeof address === 'object' && address !== null ? address.port : 0;
  return Object.assign(sink, { server, url: `http://127.0.0.1:${port}/` });
}
