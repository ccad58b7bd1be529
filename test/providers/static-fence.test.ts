// A pool that lists namespaces is a fence (docs/providers/static.md, "Sharing a pool"): a user who
// may create Services only in one namespace takes no address of another namespace's pool, by any
// of the three routes to a pool (the default pool, the pool annotation, a requested address). Run
// through service-lb against the real API server, as a tenant would meet it: a Warning naming the
// pool, no address in the Service's status, nothing recorded.

import assert from 'node:assert/strict';
import { before, describe, it } from 'node:test';
import { CoreV1Api, type V1Service } from '@kubernetes/client-node';
import { serviceLbFunction } from '../../functions/service-lb/index.ts';
import { createStaticProvider, POOL_ANNOTATION } from '../../providers/static/index.ts';
import type { FunctionDefinition } from '../../shared/host/function.ts';
import { partNames } from '../../providers/static/allocations.ts';
import { createNode, eventsAbout, firstResult, newNode, silentLogger } from '../harness/builders.ts';
import { controlPlaneSkip, testCluster, uniqueName } from '../harness/cluster.ts';

const log = silentLogger();
const run = { dryRun: false, log, signal: new AbortController().signal };
const CONFIG_MAP = 'ipam';
/** The fenced pool's 16 addresses. */
const TEAM_A = Array.from({ length: 16 }, (_, index) => `192.0.2.${index}`);

describe('static provider: a pool with namespaces is a fence', { skip: controlPlaneSkip }, () => {
  let core: CoreV1Api;
  let fn: FunctionDefinition;
  const [teamA, mallory, ipam] = [uniqueName('team-a'), uniqueName('mallory'), uniqueName('ipam')];

  before(async () => {
    const kubeConfig = (await testCluster()).admin;
    core = kubeConfig.makeApiClient(CoreV1Api);
    for (const name of [teamA, mallory, ipam]) await core.createNamespace({ body: { metadata: { name } } });
    await createNode(core, newNode(uniqueName('fence-node')));
    // team-a is also the default pool: a fence holds whichever way its pool is chosen.
    const config = [
      'instances: []',
      'loadBalancers:',
      `  allocations: { namespace: ${ipam}, configMap: ${CONFIG_MAP} }`,
      '  pools:',
      `    - { name: team-a, default: true, namespaces: [${teamA}], addresses: [192.0.2.0-192.0.2.15] }`,
      '    - { name: shared, addresses: [198.51.100.0-198.51.100.3] }',
      '',
    ].join('\n');
    const cloud = await createStaticProvider(
      { config, configPath: undefined, signal: run.signal, log, kubeConfig },
      { namespaceFile: '/nonexistent/namespace' },
    );
    fn = serviceLbFunction({
      core,
      loadBalancer: cloud.loadBalancer() ?? assert.fail('static has load balancers'),
      clusterName: 'kubernetes',
    });
  });

  async function service(namespace: string, name: string, extra: Partial<V1Service['spec']> = {}, pool?: string) {
    await core.createNamespacedService({
      namespace,
      body: {
        metadata: { name, ...(pool === undefined ? {} : { annotations: { [POOL_ANNOTATION]: pool } }) },
        spec: { type: 'LoadBalancer', allocateLoadBalancerNodePorts: false, ports: [{ port: 80 }], ...extra },
      },
    });
  }
  const sync = (namespace: string, name: string) => fn.reconcileOne({ kind: 'Service', namespace, name }, run);
  const ingress = async (namespace: string, name: string): Promise<string[]> =>
    ((await core.readNamespacedService({ namespace, name })).status?.loadBalancer?.ingress ?? []).map(
      (entry) => entry.ip ?? '',
    );
  async function recorded(): Promise<{ namespace: string; addresses: string[] }[]> {
    const parts = await Promise.all(
      partNames(CONFIG_MAP).map((name) =>
        core.readNamespacedConfigMap({ name, namespace: ipam }).catch(() => undefined),
      ),
    );
    return parts.flatMap((part) => Object.values(part?.data ?? {}).map((value) => JSON.parse(value) as never));
  }

  const routes: { route: string; name: string; spec?: Partial<V1Service['spec']>; pool?: string; reason: string }[] = [
    { route: 'as the default pool', name: 'by-default', reason: 'the default pool' },
    { route: 'by its annotation', name: 'by-annotation', pool: 'team-a', reason: 'named by its annotation' },
    {
      route: 'by spec.loadBalancerIP',
      name: 'by-ip',
      spec: { loadBalancerIP: '192.0.2.7' },
      reason: 'the default pool',
    },
    {
      route: 'by spec.loadBalancerIP with the annotation',
      name: 'by-ip-named',
      spec: { loadBalancerIP: '192.0.2.8' },
      pool: 'team-a',
      reason: 'named by its annotation',
    },
  ];
  for (const { route, name, spec, pool, reason } of routes) {
    it(`hands no address of a fenced pool to another namespace ${route}, with a Warning naming the pool`, async () => {
      await service(mallory, name, spec, pool);
      await assert.rejects(sync(mallory, name), /serves only namespace/);
      assert.deepEqual(await ingress(mallory, name), []);
      const warnings = (await eventsAbout(core, mallory, name)).filter((event) => event.startsWith('Warning/'));
      assert.equal(warnings.length, 1, `one Warning: ${warnings.join(' | ')}`);
      assert.match(
        warnings[0] ?? '',
        new RegExp(
          `^Warning/SyncLoadBalancerFailed/Error syncing load balancer: failed to ensure load balancer: pool "team-a" \\(${reason}[^)]*\\) ` +
            `serves only namespace ${teamA}, not namespace ${mallory}; no address is handed out from it`,
        ),
      );
    });
  }

  it('recorded none of those, and team-a still has all 16 of its addresses', async () => {
    const taken = (await recorded()).filter((allocation) => allocation.namespace === mallory);
    assert.deepEqual(taken, []);
    for (let index = 0; index < TEAM_A.length; index += 1) {
      const name = `web-${index}`;
      await service(teamA, name);
      assert.equal(firstResult(await sync(teamA, name)), 'ensured');
      assert.deepEqual(await ingress(teamA, name), [TEAM_A[index]]);
    }
  });

  it('serves every namespace from a pool that lists none: sharing on purpose', async () => {
    await service(mallory, 'shared', {}, 'shared');
    assert.equal(firstResult(await sync(mallory, 'shared')), 'ensured');
    assert.deepEqual(await ingress(mallory, 'shared'), ['198.51.100.0']);
  });
});
