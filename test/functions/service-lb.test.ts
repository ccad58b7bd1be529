// service-lb against the real API server with the recording fake cloud (k8s.io/cloud-provider
// controllers/service).

import assert from 'node:assert/strict';
import { before, beforeEach, describe, it } from 'node:test';
import { CoreV1Api, PatchStrategy, setHeaderOptions, type V1Service } from '@kubernetes/client-node';
import { LeanCore } from '../../shared/kube/core.ts';
import { readable } from '../../app/cli/reconcile.ts';
import { serviceLbFunction } from '../../functions/service-lb/index.ts';
import { finalizer, syncedAnnotation } from '../../functions/service-lb/predicates.ts';
import { findCause, ImplementedElsewhereError, RetryError } from '../../shared/cloud/errors.ts';
import { FakeCloud } from '../../providers/fake/index.ts';
import type { LoadBalancer, LoadBalancerPlan } from '../../shared/cloud/provider.ts';
import type { FunctionDefinition, Report } from '../../shared/host/function.ts';
import { mergePatch } from '../../shared/kube/api.ts';
import { createNode, eventsAbout, firstResult, newNode, plain, silentLogger, withLabels } from '../harness/builders.ts';
import { loadFunction } from '../harness/cirrus.ts';
import { controlPlaneSkip, offlineCore, testCluster, uniqueName } from '../harness/cluster.ts';

const run = { dryRun: false, log: silentLogger(), signal: new AbortController().signal };
const strategic = setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch);

const result = firstResult;

// The fake's load balancers, which it has unless a test switched them off.
const loadBalancerOf = (cloud: FakeCloud): LoadBalancer =>
  cloud.loadBalancer() ?? assert.fail('the fake cloud has no load balancers');

describe('service-lb', { skip: controlPlaneSkip }, () => {
  let core: CoreV1Api;
  // The functions get LeanCore, as cirrus gives it; the tests' own setup and checks use CoreV1Api.
  let lean: LeanCore;
  let cloud: FakeCloud;
  let fn: FunctionDefinition;
  const namespace = uniqueName('lb');
  const lbNode = uniqueName('lb-node');
  before(async () => {
    core = (await testCluster()).admin.makeApiClient(CoreV1Api);
    lean = new LeanCore((await testCluster()).admin);
    await core.createNamespace({ body: { metadata: { name: namespace } } });
    // At least one node for the load balancers (with none, every sync warns UnAvailableLoadBalancer).
    await createNode(core, newNode(lbNode));
  });
  beforeEach(() => {
    cloud = new FakeCloud();
    fn = serviceLbFunction({ core: lean, loadBalancer: loadBalancerOf(cloud), clusterName: 'kubernetes' });
  });

  async function createService(
    name: string,
    spec: Partial<NonNullable<V1Service['spec']>> = {},
    extra: Partial<V1Service['metadata']> = {},
  ): Promise<V1Service> {
    return core.createNamespacedService({
      namespace,
      body: {
        metadata: { name, ...extra },
        spec: { type: 'LoadBalancer', ports: [{ port: 80, protocol: 'TCP' }], ...spec },
      },
    });
  }
  const read = (name: string): Promise<V1Service> => core.readNamespacedService({ namespace, name });
  const sync = (name: string, options = run): Promise<Report> =>
    fn.reconcileOne({ kind: 'Service', namespace, name }, options);
  // type/reason only: the messages are asserted elsewhere.
  const events = async (name: string): Promise<string[]> =>
    (await eventsAbout(core, namespace, name)).map((e) => e.split('/').slice(0, 2).join('/'));

  it("decides from an event's object that a Service without a load balancer needs nothing, reading nothing", async () => {
    const quiet = serviceLbFunction({
      core: offlineCore(),
      loadBalancer: loadBalancerOf(cloud),
      clusterName: 'kubernetes',
    });
    const key = { kind: 'Service', namespace: 'default', name: 'plain' };
    const claimed: V1Service = { metadata: { name: 'plain', namespace: 'default' }, spec: { type: 'ClusterIP' } };
    assert.equal((await quiet.reconcileOne(key, { ...run, claimed })).objects[0]?.result, 'ignored');
    // A load balancer to ensure is decided on the Service as read.
    const wanted: V1Service = { ...claimed, spec: { type: 'LoadBalancer' } };
    await assert.rejects(quiet.reconcileOne(key, { ...run, claimed: wanted }));
    assert.deepEqual(cloud.methods(), []);
  });
  it('creates the load balancer: finalizer first, then the cloud, then status and Events', async () => {
    const name = uniqueName('web');
    await createService(name, {}, { finalizers: ['example.com/keep'] });

    assert.equal(result(await sync(name)), 'ensured');

    const service = await read(name);
    assert.deepEqual(service.metadata?.finalizers?.sort(), ['example.com/keep', finalizer].sort());
    assert.deepEqual(plain(service.status?.loadBalancer?.ingress), [{ ip: cloud.loadBalancerIp, ipMode: 'VIP' }]);
    assert.ok(service.metadata.annotations?.[syncedAnnotation]);
    assert.deepEqual(cloud.methods(), ['ensureLoadBalancer']);
    assert.deepEqual(await events(name), ['Normal/EnsuredLoadBalancer', 'Normal/EnsuringLoadBalancer']);
  });

  it('does nothing, not even a cloud call, when neither the spec nor the node set changed', async () => {
    const name = uniqueName('steady');
    await createService(name);
    await sync(name);
    const settled = await read(name);
    cloud.calls.length = 0;

    assert.equal(result(await sync(name)), 'unchanged');
    assert.deepEqual(cloud.calls, []);
    assert.equal((await read(name)).metadata?.resourceVersion, settled.metadata?.resourceVersion);

    await core.patchNamespacedService({ namespace, name, body: { metadata: { labels: { team: 'a' } } } }, mergePatch);
    assert.equal(result(await sync(name)), 'unchanged', 'labels do not matter');
    await core.patchNamespacedService(
      { namespace, name, body: { metadata: { annotations: { 'example.com/tier': 'gold' } } } },
      mergePatch,
    );
    assert.equal(result(await sync(name)), 'ensured', 'annotations do');
    await core.patchNamespacedService(
      { namespace, name, body: { spec: { loadBalancerSourceRanges: ['10.0.0.0/8'] } } },
      mergePatch,
    );
    assert.equal(result(await sync(name)), 'ensured', 'so does the spec');
    assert.deepEqual(cloud.methods(), ['ensureLoadBalancer', 'ensureLoadBalancer']);
  });

  it('updates only the load balancers whose node set changed, on the "all" trigger', async () => {
    const name = uniqueName('nodes');
    await createService(name);
    await sync(name);
    cloud.calls.length = 0;

    await createNode(
      core,
      newNode(
        uniqueName('excluded'),
        withLabels({ 'node.kubernetes.io/exclude-from-external-load-balancers': 'true' }),
      ),
    );
    let all = await fn.reconcileAll(run);
    assert.equal(
      all.objects.find((o) => o.key === `Service/${namespace}/${name}`)?.result,
      'unchanged',
      'an excluded node changes nothing',
    );
    assert.equal(cloud.calls.filter((c) => c.args[1] === `${namespace}/${name}`).length, 0);

    const added = uniqueName('added');
    await createNode(core, newNode(added));
    all = await fn.reconcileAll(run);
    assert.equal(all.objects.find((o) => o.key === `Service/${namespace}/${name}`)?.result, 'hosts-updated');
    const update = cloud.calls.find((c) => c.method === 'updateLoadBalancer' && c.args[1] === `${namespace}/${name}`);
    assert.ok((update?.args[2] as string[]).includes(added));
    assert.ok((await events(name)).includes('Normal/UpdatedLoadBalancer'));
  });

  it('falls back to a full ensure when updating the hosts fails', async () => {
    const name = uniqueName('update-fails');
    await createService(name);
    await sync(name);
    cloud.errors.set('updateLoadBalancer', new Error('hosts API down'));
    await createNode(core, newNode(uniqueName('more')));

    assert.equal(result(await sync(name)), 'ensured');
    assert.deepEqual(cloud.methods().slice(-3), ['updateLoadBalancer', 'getLoadBalancer', 'ensureLoadBalancer']);
    assert.ok((await events(name)).includes('Warning/UpdateLoadBalancerFailed'));
  });

  it('deletes the load balancer when the type changes, and clears finalizer, status and record', async () => {
    const name = uniqueName('retype');
    await createService(name);
    await sync(name);
    await core.patchNamespacedService({ namespace, name, body: { spec: { type: 'ClusterIP' } } }, strategic);

    assert.equal(result(await sync(name)), 'deleted');

    const service = await read(name);
    assert.equal(service.metadata?.finalizers?.includes(finalizer) ?? false, false);
    assert.equal(service.metadata?.annotations?.[syncedAnnotation], undefined);
    assert.deepEqual(plain(service.status?.loadBalancer), {});
    assert.deepEqual(cloud.methods().slice(-2), ['getLoadBalancer', 'ensureLoadBalancerDeleted']);
    assert.ok((await events(name)).includes('Normal/DeletedLoadBalancer'));
  });

  it('deletes through the finalizer: the Service stays until its load balancer is gone', async () => {
    const name = uniqueName('delete');
    await createService(name);
    await sync(name);
    await core.deleteNamespacedService({ namespace, name });
    assert.ok((await read(name)).metadata?.deletionTimestamp, 'held by the finalizer');

    assert.equal(result(await sync(name)), 'deleted');
    await assert.rejects(read(name), { code: 404 });
    assert.equal(cloud.loadBalancers.size, 0);
  });

  it('records a refusal retried again and again once, not once per retry (issue 38, finding 2)', async () => {
    const name = uniqueName('refused');
    await createService(name);
    cloud.errors.set('ensureLoadBalancer', new Error('pool "shared" is exhausted'));
    for (let retry = 0; retry < 5; retry += 1) await assert.rejects(sync(name), /exhausted/);
    const warnings = (await events(name)).filter((e) => e === 'Warning/SyncLoadBalancerFailed');
    assert.equal(warnings.length, 1, 'one Warning for five identical refusals');
    // Another reason is news, and is recorded.
    cloud.errors.set('ensureLoadBalancer', new Error('pool "shared" has no IPv6 addresses'));
    await assert.rejects(sync(name), /IPv6/);
    assert.equal((await events(name)).filter((e) => e === 'Warning/SyncLoadBalancerFailed').length, 2);
  });

  it('keeps the finalizer and the Service when the cloud deletion fails', async () => {
    const name = uniqueName('delete-fails');
    await createService(name);
    await sync(name);
    await core.deleteNamespacedService({ namespace, name });
    cloud.errors.set('ensureLoadBalancerDeleted', new Error('cloud API down'));

    await assert.rejects(sync(name), { message: 'failed to delete load balancer: cloud API down' });
    assert.ok((await read(name)).metadata?.finalizers?.includes(finalizer));
    assert.ok((await events(name)).includes('Warning/SyncLoadBalancerFailed'));
  });

  it('cleans up after a Service deleted without its finalizer, from the delete event', async () => {
    const name = uniqueName('vanished');
    await createService(name);
    await sync(name);
    const last = await read(name);
    await core.patchNamespacedServiceStatus(
      { namespace, name, body: { metadata: { '$deleteFromPrimitiveList/finalizers': [finalizer] } } },
      strategic,
    );
    await core.deleteNamespacedService({ namespace, name });

    const report = await sync(name, {
      ...run,
      lastKnown: { ...plain(last), kind: 'Service', apiVersion: 'v1' },
    } as typeof run);
    assert.equal(result(report), 'deleted');
    assert.equal(cloud.loadBalancers.size, 0);
    assert.ok((await events(name)).includes('Normal/DeletedLoadBalancer'));
    assert.equal(result(await sync(name)), 'not-found', 'without the last known object there is nothing to do');
  });

  it('acts on a delete event only once the API server confirms the Service is gone', async () => {
    const name = uniqueName('live');
    await createService(name);
    await sync(name);
    const live = { ...plain(await read(name)), kind: 'Service', apiVersion: 'v1' };
    cloud.calls.length = 0;
    const report = await sync(name, { ...run, lastKnown: live } as typeof run);
    assert.equal(result(report), 'unchanged');
    assert.match(report.objects[0]?.note ?? '', /delete event not acted on: the Service exists/);
    assert.deepEqual(cloud.methods(), [], 'no cloud call for a live Service');
    assert.equal(cloud.loadBalancers.size, 1);
  });

  it("deletes nothing on a forged delete that names a missing Service with a live one's uid", async () => {
    cloud.namesByUid = true;
    const victim = uniqueName('victim');
    await createService(victim);
    await sync(victim);
    const live = plain(await read(victim));
    const ghost = uniqueName('ghost');
    const forged = { ...live, kind: 'Service', apiVersion: 'v1', metadata: { ...live.metadata, name: ghost } };
    const report = await sync(ghost, { ...run, lastKnown: forged } as typeof run);
    assert.equal(result(report), 'not-found');
    assert.match(report.objects[0]?.note ?? '', new RegExp(`belongs to the live Service/${namespace}/${victim}`));
    assert.ok(!cloud.methods().includes('ensureLoadBalancerDeleted'), cloud.methods().join(', '));
    assert.equal(cloud.loadBalancers.size, 1, "the victim's load balancer stays");
    assert.deepEqual(plain((await read(victim)).status?.loadBalancer?.ingress), [
      { ip: cloud.loadBalancerIp, ipMode: 'VIP' },
    ]);
  });

  it('ensures once when requests for one Service arrive together, whatever sent them', async () => {
    const name = uniqueName('together');
    await createService(name);
    cloud.latencyMs.set('ensureLoadBalancer', 100);
    await Promise.all([sync(name), sync(name), fn.reconcileAll(run), sync(name), fn.reconcileAll(run)]);
    const ensures = cloud.calls.filter(
      (c) => c.method === 'ensureLoadBalancer' && c.args[1] === `${namespace}/${name}`,
    );
    assert.equal(ensures.length, 1, cloud.methods().join(', '));
  });

  it("asks for the provider's delay on RetryError, with the finalizer in place and no status", async () => {
    const name = uniqueName('retry');
    await createService(name);
    cloud.errors.set('ensureLoadBalancer', new RetryError('quota', 30_000));

    await assert.rejects(sync(name), (error: unknown) => findCause(error, RetryError)?.retryAfterMs === 30_000);
    const service = await read(name);
    assert.ok(service.metadata?.finalizers?.includes(finalizer));
    assert.deepEqual(plain(service.status?.loadBalancer), {});
    assert.ok((await events(name)).includes('Warning/SyncLoadBalancerFailed'));
  });

  it('leaves status to another controller on ImplementedElsewhere, keeping its finalizer', async () => {
    const name = uniqueName('elsewhere');
    await createService(name);
    cloud.errors.set('ensureLoadBalancer', new ImplementedElsewhereError());

    assert.equal(result(await sync(name)), 'implemented-elsewhere');
    const service = await read(name);
    assert.ok(service.metadata?.finalizers?.includes(finalizer));
    assert.deepEqual(plain(service.status?.loadBalancer), {});
    assert.deepEqual(await events(name), ['Normal/EnsuringLoadBalancer']);
  });

  it('ignores Services of another load balancer class, and ClusterIP Services', async () => {
    const classed = uniqueName('classed');
    await createService(classed, { loadBalancerClass: 'example.com/other' });
    const plainService = uniqueName('clusterip');
    await createService(plainService, { type: 'ClusterIP' });
    assert.equal(result(await sync(classed)), 'ignored');
    assert.equal(result(await sync(plainService)), 'ignored');
    assert.deepEqual(cloud.calls, []);
  });

  it('with --load-balancer-class, serves only Services of that class, and cleans up after its own alone', async () => {
    const served = 'example.com/vip';
    const classFn = serviceLbFunction({
      core,
      loadBalancer: loadBalancerOf(cloud),
      clusterName: 'kubernetes',
      loadBalancerClass: served,
    });
    const classSync = (name: string): Promise<Report> =>
      classFn.reconcileOne({ kind: 'Service', namespace, name }, run);
    const ours = uniqueName('vip');
    await createService(ours, { loadBalancerClass: served });
    const classless = uniqueName('classless');
    await createService(classless);
    assert.equal(result(await classSync(ours)), 'ensured');
    assert.equal(result(await classSync(classless)), 'ignored');
    assert.deepEqual(cloud.methods(), ['ensureLoadBalancer']);
    const record = JSON.parse((await read(ours)).metadata?.annotations?.[syncedAnnotation] ?? '{}') as {
      class?: string;
    };
    assert.equal(record.class, served, 'the record names the class it was made under');

    // The classless Service, made by a service-lb without a class, is not this one's to clean up.
    assert.equal(result(await sync(classless)), 'ensured');
    await core.deleteNamespacedService({ namespace, name: classless });
    assert.equal(result(await classSync(classless)), 'ignored');
    assert.deepEqual(cloud.methods(), ['ensureLoadBalancer', 'ensureLoadBalancer']);
    assert.equal(result(await sync(classless)), 'deleted');

    await core.deleteNamespacedService({ namespace, name: ours });
    assert.equal(result(await sync(ours)), 'ignored', 'nor is the class-served one the classless service-lb');
    assert.equal(result(await classSync(ours)), 'deleted');
    assert.equal(cloud.loadBalancers.size, 0);
  });

  it('makes no change on a dry run, and reports the cloud call, patches and Events', async () => {
    const name = uniqueName('dry');
    const before = await createService(name);
    const report = await sync(name, { ...run, dryRun: true });
    assert.deepEqual(
      report.objects[0]?.changes.map((c) => c.action),
      ['event', 'patch-status', 'cloud', 'plan'],
    );
    assert.deepEqual(cloud.methods(), ['planLoadBalancer'], 'the plan, and no ensure');
    const after = await read(name);
    assert.equal(after.metadata?.resourceVersion, before.metadata?.resourceVersion);
    assert.deepEqual(await events(name), []);
  });

  it("reports the provider's plan per Service on a dry run: create, then unchanged, update, refuse", async () => {
    const name = uniqueName('plan');
    await createService(name);
    const planOf = (report: Report): unknown => report.objects[0]?.changes.find((c) => c.action === 'plan')?.detail;
    const lbName = `fake-${namespace}-${name}`;
    const created = await sync(name, { ...run, dryRun: true });
    assert.equal(result(created), 'create');
    const plan = planOf(created) as LoadBalancerPlan;
    assert.deepEqual(
      { ...plan, changes: plan.changes.slice(0, 1) },
      {
        action: 'create',
        name: lbName,
        changes: [{ setting: 'load balancer', change: `create ${lbName}` }],
      },
    );
    const [, targets] = plan.changes;
    assert.equal(targets?.setting, 'targets');
    assert.match(targets.change, new RegExp(`^add .*${lbNode}`));
    assert.equal(cloud.loadBalancers.size, 0, 'the dry run made nothing');

    assert.equal(result(await sync(name)), 'ensured');
    // With its record written, the reconcile would not call the cloud: nor does the dry run.
    assert.equal(result(await sync(name, { ...run, dryRun: true })), 'unchanged');
    // A load balancer whose nodes are as they should be, and a Service without the record (as before a take-over).
    await core.patchNamespacedService(
      { namespace, name, body: { metadata: { annotations: { [syncedAnnotation]: null } } } },
      mergePatch,
    );
    const same = await sync(name, { ...run, dryRun: true });
    assert.equal(result(same), 'unchanged');
    assert.deepEqual(planOf(same), { action: 'unchanged', name: lbName, changes: [] });

    const [first] = cloud.loadBalancers.values();
    first?.nodes.push('gone-node');
    const updated = await sync(name, { ...run, dryRun: true });
    assert.equal(result(updated), 'update');
    assert.deepEqual(planOf(updated), {
      action: 'update',
      name: lbName,
      changes: [{ setting: 'targets', change: 'remove gone-node' }],
    });

    cloud.errors.set('ensureLoadBalancer', new Error('an annotation the cloud does not offer'));
    const refused = await sync(name, { ...run, dryRun: true });
    assert.equal(result(refused), 'refuse');
    assert.deepEqual(planOf(refused), {
      action: 'refuse',
      name: lbName,
      changes: [],
      reason: 'an annotation the cloud does not offer',
    });
    assert.deepEqual(cloud.loadBalancers.get(`${namespace}/${name}`)?.nodes.at(-1), 'gone-node', 'nothing applied');
  });

  it("prints a dry run's plan readably, as `cirrus reconcile --dry-run` does", async () => {
    const name = uniqueName('print');
    await createService(name);
    const lbName = `fake-${namespace}-${name}`;
    const text = readable(JSON.stringify(await sync(name, { ...run, dryRun: true })));
    const lines = text.split('\n');
    assert.equal(lines[0], 'service-lb dry run: nothing was changed');
    assert.equal(lines[1], `Service/${namespace}/${name}: create (load balancer ${lbName})`);
    assert.equal(lines[2], `  load balancer  create ${lbName}`);
    assert.match(lines[3] ?? '', new RegExp(`^  targets {8}add .*${lbNode}`));
    assert.equal(lines[4], '  would record event Normal/EnsuringLoadBalancer: Ensuring load balancer');
    assert.ok(text.includes('  would call the cloud: ensureLoadBalancer\n'), text);

    cloud.errors.set('ensureLoadBalancer', new Error('not offered'));
    const refused = readable(JSON.stringify(await sync(name, { ...run, dryRun: true })));
    assert.equal(refused.split('\n')[1], `Service/${namespace}/${name}: refuse (load balancer ${lbName}): not offered`);
  });

  it('keeps the dry run as it was, marked, for a provider that offers no plan', async () => {
    const name = uniqueName('noplan');
    await createService(name);
    cloud.disabled.add('planLoadBalancer');
    const unplanned = serviceLbFunction({ core: lean, loadBalancer: loadBalancerOf(cloud), clusterName: 'kubernetes' });
    const report = await unplanned.reconcileOne({ kind: 'Service', namespace, name }, { ...run, dryRun: true });
    assert.equal(result(report), 'ensured');
    assert.deepEqual(report.objects[0]?.changes.at(-1), {
      action: 'plan',
      target: `Service/${namespace}/${name}`,
      detail: 'no plan from the provider',
    });
    assert.deepEqual(cloud.calls, []);
  });

  it('converges when requests for one Service race', async () => {
    const name = uniqueName('race');
    await createService(name, {}, { finalizers: ['example.com/keep'] });
    cloud.latencyMs.set('ensureLoadBalancer', 30);
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => sync(name)));
    assert.ok(
      results.every((r) => r.status === 'fulfilled'),
      JSON.stringify(results.filter((r) => r.status === 'rejected')),
    );
    const service = await read(name);
    assert.deepEqual(service.metadata?.finalizers?.sort(), ['example.com/keep', finalizer].sort());
    assert.deepEqual(plain(service.status?.loadBalancer?.ingress), [{ ip: cloud.loadBalancerIp, ipMode: 'VIP' }]);
    assert.equal(result(await sync(name)), 'unchanged');
  });

  it('refuses a key without a namespace or with an invalid name, and a provider without load balancers', async () => {
    await assert.rejects(fn.reconcileOne({ kind: 'Service', name: 'web' }, run), { name: 'InvalidRequestError' });
    await assert.rejects(fn.reconcileOne({ kind: 'Service', namespace, name: 'Web_1' }, run), {
      name: 'InvalidRequestError',
    });
    const bare = new FakeCloud();
    bare.disabled.add('loadBalancer');
    await assert.rejects(loadFunction('service-lb', { core: lean, cloud: bare }), {
      message: 'service-lb: cloud provider "fake" does not support load balancers',
    });
  });
});
