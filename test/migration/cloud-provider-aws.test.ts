// A cluster moves between kubernetes/cloud-provider-aws and cirrus, both ways, with nothing of its
// cloud re-created: the real aws-cloud-controller-manager (built from its Go module,
// tools/cloud-provider-aws/) makes the load balancers of one Service of every kind it supports on a
// control plane of this file's own (both CCMs watch every Node and Service) and a world of the run's
// AWS emulator; it stops; `cirrus start --cloud-provider aws` takes over with the same cloud.conf;
// a fourth Node joins. Then the same the other way: cirrus first, cloud-provider-aws after.
// Each assertion compares a snapshot of the cloud and the cluster taken before the take-over with
// one taken after, and prints exactly what differs (test/migration/snapshot.ts).

import assert from 'node:assert/strict';
import { cp, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import type { TestContext } from 'node:test';
import { cacheRoot } from '../../tools/control-plane/index.ts';
import { awsEmulatorSkip, awsWorld, type AwsWorld, type WorldInstance } from '../harness/aws.ts';
import { controlPlaneSkip, ownControlPlane } from '../harness/cluster.ts';
import { startCirrusCommand, startCloudProviderAws, type Ccm, type CcmSetting } from './ccm.ts';
import { joinNode, namespace, podCidr, requestCertificate, services, writeSettings } from './cluster.ts';
import { incumbent } from './incumbent.ts';
import { diffSnapshots, takeSnapshot, without, type NodeFields, type Snapshot } from './snapshot.ts';
import { settle } from './settle.ts';

type Side = 'cloud-provider-aws' | 'cirrus';

const found = await incumbent();
const skip = controlPlaneSkip || awsEmulatorSkip || found.skip;

describe('cloud-provider-aws is built for the migration test', { skip: controlPlaneSkip || awsEmulatorSkip }, () => {
  it(
    'has aws-cloud-controller-manager (CIRRUS_TEST_REQUIRE_CONTROL_PLANE=1 requires it)',
    { skip: found.checkSkip },
    () => {
      assert.equal(found.missing, undefined, found.missing);
    },
  );
});

/** What one direction's run found: the snapshots around the take-over and the Nodes' instances. */
interface Run {
  first: Side;
  /** Why a CCM did not start, when one did not (the run goes on: what it did not do shows in the diffs). */
  notStarted: string[];
  /** Conditions the first CCM left unmet (a Service without a load balancer, a Node not initialized, …). */
  firstUnmet: string[];
  before: Snapshot;
  after: Snapshot;
  /** `after` without what the fourth Node adds: its Node, its route, its registrations. */
  afterSansFourth: Snapshot;
  instances: WorldInstance[];
}

for (const [first, second] of [
  ['cloud-provider-aws', 'cirrus'],
  ['cirrus', 'cloud-provider-aws'],
] as const) {
  describe(`from ${first} to ${second}, on one cluster and one cloud`, { skip }, () => {
    const cluster = ownControlPlane();
    const run = { first, notStarted: [] as string[] } as Run;
    let world: AwsWorld | undefined;
    let dir = '';
    const running = new Set<Ccm>();
    /** Where the CCMs' logs, the kubeconfig and the cloud.conf are kept after the run. */
    const logs = join(cacheRoot(), 'last-migration-logs', `from-${first}`);
    const report = (t: TestContext, lines: readonly string[], title: string): void => {
      reportLines(t, lines, `${title} (the CCMs' logs: ${logs})`);
    };

    before(
      async () => {
        world = await awsWorld('migration');
        dir = await mkdtemp(join(tmpdir(), 'cirrus-migration-'));
        const files = await writeSettings(dir, cluster.admin, world);
        const setting: CcmSetting = { world, ...files, dir };
        const start = async (side: Side): Promise<Ccm | undefined> => {
          try {
            const ccm = await (side === 'cirrus'
              ? startCirrusCommand(setting)
              : startCloudProviderAws(found.binary ?? '', setting));
            running.add(ccm);
            return ccm;
          } catch (error) {
            run.notStarted.push((error as Error).message);
            return undefined;
          }
        };
        Object.assign(run, await migrate(cluster.core, world, { first, second, start }));
      },
      { timeout: 300_000 },
    );
    after(async () => {
      for (const ccm of running) await ccm.stop();
      world?.close();
      if (dir === '') return;
      await rm(logs, { recursive: true, force: true });
      await cp(dir, logs, { recursive: true });
      await rm(dir, { recursive: true, force: true });
    });

    it(`${first} and ${second} start with the cluster's cloud.conf`, (t) => {
      report(t, run.notStarted, 'not started');
    });

    it(`${first} makes a load balancer for every Service and initializes every Node`, (t) => {
      report(t, run.firstUnmet, `${first} left these unmet`);
    });

    it(`${second} creates and deletes no load balancer and no target group`, (t) => {
      report(t, diffSnapshots(run.before, run.afterSansFourth, isBalancer), 'load balancers created or deleted');
    });

    it(`${second} changes no setting of a load balancer, listener or target group`, (t) => {
      const kept = (key: string): boolean => isBalancerPart(key) && both(run, balancerOf(key));
      report(t, diffSnapshots(run.before, run.afterSansFourth, kept), 'load balancer settings changed');
    });

    it(`${second} keeps every Service's status.loadBalancer`, (t) => {
      report(t, diffSnapshots(run.before, run.after, prefixed('service ')), 'status.loadBalancer changed');
    });

    it(`${second} loses no security group rule and adds none`, (t) => {
      report(t, diffSnapshots(run.before, run.after, prefixed('security-group ')), 'security groups changed');
    });

    it(`${second} registers the fourth Node on every load balancer`, (t) => {
      const fourth = (run.instances[3] as WorldInstance).instanceId;
      const lists = [...run.before.keys()].filter((k) => k.endsWith(' instances') || k.endsWith(' targets'));
      const missing = lists.filter((k) => !(JSON.parse(run.after.get(k) ?? '[]') as string[]).some(on(fourth)));
      report(t, missing, `${fourth} is not registered on`);
    });

    it(`${second} keeps the Nodes and routes, and initializes and routes the fourth Node alike`, (t) => {
      const kept = diffSnapshots(run.before, run.afterSansFourth, prefixed('node ', 'route '));
      report(t, [...kept, ...fourthNodeDifferences(run)], 'Nodes or routes differ');
    });
  });
}

interface Sides {
  first: Side;
  second: Side;
  /** Starts a CCM; undefined when it did not start (start() records why). */
  start(side: Side): Promise<Ccm | undefined>;
}

// The whole run: the first CCM makes everything, stops; the second takes over; a fourth Node joins.
async function migrate(core: ClusterCore, world: AwsWorld, sides: Sides): Promise<Omit<Run, 'first' | 'notStarted'>> {
  const certificate = await requestCertificate(world, 'migration.example.com');
  const instances: WorldInstance[] = [];
  for (const az of [0, 1, 0, 1].map((i) => world.publicSubnets[i]?.az))
    instances.push(await world.runInstance(az === undefined ? {} : { az }));
  const [one, two, three, fourth] = instances as [WorldInstance, WorldInstance, WorldInstance, WorldInstance];
  const firstCcm = await sides.start(sides.first);
  for (const [index, instance] of [one, two, three].entries()) await joinNode(core, instance, index + 1);
  for (const body of services(certificate)) await core.createNamespacedService({ namespace, body });
  const expected = { nodes: [one, two, three], services: services(certificate).length };
  const firstUnmet = await settle(core, world, expected, 45_000);
  await firstCcm?.stop();
  const beforeSnapshot = await takeSnapshot(world, { core, namespace });

  const secondCcm = await sides.start(sides.second);
  await joinNode(core, fourth, 4);
  await settle(core, world, { nodes: instances, services: expected.services }, 30_000);
  const afterSnapshot = await takeSnapshot(world, { core, namespace });
  await secondCcm?.stop();
  const fourthKey = (key: string): boolean => key === `node ${fourth.privateDnsName}` || key === `route ${podCidr(4)}`;
  return {
    firstUnmet,
    before: beforeSnapshot,
    after: afterSnapshot,
    afterSansFourth: without(afterSnapshot, fourthKey, fourth.instanceId),
    instances,
  };
}

type ClusterCore = Parameters<typeof takeSnapshot>[1]['core'];

// The fourth Node as the first three: the same provider ID form, label keys, address types and
// NetworkUnavailable, no taint of a CCM left, and a route to its instance.
function fourthNodeDifferences(run: Run): string[] {
  const [one, , , fourth] = run.instances as [WorldInstance, WorldInstance, WorldInstance, WorldInstance];
  const node = (snapshot: Snapshot, name: string): Partial<NodeFields> =>
    JSON.parse(snapshot.get(`node ${name}`) ?? '{}') as Partial<NodeFields>;
  const reference = node(run.before, one.privateDnsName);
  const joined = node(run.after, fourth.privateDnsName);
  const shape = (fields: Partial<NodeFields>): string =>
    JSON.stringify({
      labels: Object.keys(fields.labels ?? {}).sort(),
      addresses: (fields.addresses ?? []).map((a) => a.split('=')[0]),
      taints: fields.taints,
      networkUnavailable: fields.networkUnavailable,
    });
  const differences: string[] = [];
  if (joined.providerID !== fourth.providerId)
    differences.push(`fourth Node providerID: ${String(joined.providerID)}, not ${fourth.providerId}`);
  if (shape(joined) !== shape(reference))
    differences.push(`fourth Node ${shape(joined)} is not shaped as the first ${shape(reference)}`);
  const route = run.after.get(`route ${podCidr(4)}`);
  if (route !== JSON.stringify(fourth.instanceId))
    differences.push(`route ${podCidr(4)}: ${route ?? 'none'}, not to ${fourth.instanceId}`);
  return differences;
}

const isBalancer = (key: string): boolean => /^(classic-elb|network|application|target-group) \S+$/.test(key);
const isBalancerPart = (key: string): boolean => /^(classic-elb|network|application|target-group) /.test(key);
const balancerOf = (key: string): string => key.split(' ').slice(0, 2).join(' ');
const both = (run: Run, balancer: string): boolean => run.before.has(balancer) && run.afterSansFourth.has(balancer);
const prefixed =
  (...prefixes: string[]) =>
  (key: string): boolean =>
    prefixes.some((p) => key.startsWith(p));
const on =
  (instanceId: string) =>
  (registered: string): boolean =>
    registered.split(':')[0] === instanceId;

/** Fails with `lines` under `title` when there are any, and prints them either way. */
function reportLines(t: TestContext, lines: readonly string[], title: string): void {
  for (const line of lines) t.diagnostic(line);
  assert.deepEqual(lines, [], `${title}:\n${lines.join('\n')}`);
}
