// The aws provider through the conformance kit, against the run's AWS emulator, once with each
// kind of load balancer a Service without a type annotation gets (DefaultLoadBalancerType: NLB, and
// Classic ELB, upstream's default): a world of each run's own with running, stopped and terminated
// instances, and a route left to a terminated instance (a blackhole), described in a fixture as a
// provider author would write it.

import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { createAwsProvider } from '../../providers/aws/index.ts';
import { formatResult, runConformance, type FixtureInput } from '../../providers/conformance/index.ts';
import { awsEmulatorSkip, awsTestEnv, awsWorld, type AwsWorld } from '../harness/aws.ts';

for (const kind of ['nlb', 'classic'] as const) {
  describe(`cirrus conformance: the aws provider against the emulator, ${kind}`, { skip: awsEmulatorSkip }, () => {
    let world: AwsWorld | undefined;
    after(() => world?.close());

    before(async () => {
      world = await awsWorld(`aws-conformance-${kind}`);
      Object.assign(process.env, awsTestEnv(world));
    });

    it('passes every check it can be asked (the legacy Instances interface is not offered)', async () => {
      assert.ok(world);
      const here = world;
      const [a, b, stopped, gone, doomed] = await Promise.all([1, 2, 3, 4, 5].map(() => here.runInstance()));
      assert.ok(a && b && stopped && gone && doomed);
      await world.stopInstance(stopped.instanceId);
      await world.terminateInstance(gone.instanceId);
      const cloud = createAwsProvider({
        config: world.cloudConfig({ DefaultLoadBalancerType: kind }),
        configPath: 'cloud.conf',
        signal: new AbortController().signal,
        log: pino({ level: 'silent' }),
        kubeConfig: undefined,
      });
      // A route to an instance that is then terminated: the blackhole the kit expects listed as such.
      const routes = cloud.routes();
      assert.ok(routes);
      await routes.createRoute('kubernetes', 'uid', {
        name: '',
        targetNode: doomed.privateDnsName,
        enableNodeAddresses: false,
        targetNodeAddresses: [],
        destinationCidr: '10.244.99.0/24',
        blackhole: false,
      });
      await world.terminateInstance(doomed.instanceId);
      const fixture: FixtureInput = {
        instances: {
          known: [
            {
              name: a.privateDnsName,
              expect: { providerID: a.providerId, instanceType: a.instanceType, zone: a.az, region: world.region },
            },
            { name: b.privateDnsName, providerID: b.providerId },
          ],
          shutdown: [{ name: stopped.privateDnsName, providerID: stopped.providerId }],
          gone: [{ name: gone.privateDnsName, providerID: gone.providerId }, { name: 'ip-10-254-0-9.ec2.internal' }],
        },
        loadBalancer: {
          nodes: [
            { name: a.privateDnsName, providerID: a.providerId },
            { name: b.privateDnsName, providerID: b.providerId },
          ],
          service: { ports: [{ name: 'http', protocol: 'TCP', port: 80, nodePort: 30080 }] },
        },
        routes: {
          clusterCidr: '10.244.0.0/16',
          targets: [
            { node: a.privateDnsName, podCidr: '10.244.1.0/24' },
            { node: b.privateDnsName, podCidr: '10.244.2.0/24' },
          ],
          blackholes: [{ destinationCidr: '10.244.99.0/24' }],
        },
      };
      const report = await runConformance(cloud, fixture);
      const lines = report.results.map(formatResult).join('');
      assert.equal(report.failed, 0, lines);
      assert.deepEqual(
        report.results
          .filter((r) => r.outcome === 'skip')
          .map((r) => r.id)
          .sort(),
        ['errors.retry-delay', 'instances.legacy-known', 'instances.legacy-not-found'],
        lines,
      );
    });
  });
}
