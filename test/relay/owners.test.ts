// Routing by owner in a split hybrid deployment (relay/owners.ts, ADR 0026): destinations that
// name the providers they serve, how the routing file and --to give them and refuse them, and what
// each one receives of a Node's and a Service's changes. The relay against a real API server is in
// ./hybrid.test.ts.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { usageExitCode } from '../../app/cli/main.ts';
import { catalogue } from '../../functions/catalogue.ts';
import { nodes, services, type KubeObject, type ResourceChange } from '../../relay/resources.ts';
import { buildRoutingTable, route, RoutingError, type Known, type RoutingTable } from '../../relay/routing.ts';
import { providerLabel, type Ownership } from '../../shared/cloud/ownership.ts';
import type { ChangeType } from '../../shared/catalogue.ts';
import { runCommandLine } from '../harness/command-line.ts';

// static for bare metal (its Services carry example.com/metal), aws the default.
const ownership: Ownership = {
  providers: ['static', 'aws'],
  defaultProvider: 'aws',
  classes: new Map([['example.com/metal', 'static']]),
};
// A kubeconfig that is not there: a command that got past its options stops at it, reaching no cluster.
const noCluster = ['--kubeconfig', '/nonexistent/kubeconfig'];

// The same without a default: a Node with neither provider ID nor label is nobody's.
const noDefault: Ownership = { ...ownership, defaultProvider: undefined };

const uninitialized = { taints: [{ key: 'node.cloudprovider.kubernetes.io/uninitialized', effect: 'NoSchedule' }] };

function node(name: string, fields: { label?: string; providerID?: string } = {}): KubeObject {
  return {
    metadata: {
      name,
      uid: `uid-${name}`,
      resourceVersion: '1',
      labels: fields.label === undefined ? {} : { [providerLabel]: fields.label },
    },
    spec: { ...uninitialized, ...(fields.providerID === undefined ? {} : { providerID: fields.providerID }) },
    status: { conditions: [{ type: 'Ready', status: 'True' }] },
  };
}

function service(name: string, loadBalancerClass?: string): KubeObject {
  return {
    metadata: { name, namespace: 'default', uid: `uid-${name}`, resourceVersion: '1' },
    spec: { type: 'LoadBalancer', ...(loadBalancerClass === undefined ? {} : { loadBalancerClass }) },
  };
}

function change(type: ChangeType, object: KubeObject, previous?: KubeObject): ResourceChange {
  const isService = object.metadata?.namespace !== undefined;
  return {
    resource: isService ? services : nodes,
    type,
    key: isService ? `Service/default/${object.metadata.name ?? ''}` : `Node/${object.metadata?.name ?? ''}`,
    object,
    previous,
    observedAt: 1_700_000_000_000,
  };
}

// One destination per function and provider, as `--to <function>@<provider>=<url>` gives them.
function splitTable(rules: Ownership = ownership): RoutingTable {
  const to = ['static', 'aws'].flatMap((provider) =>
    ['node-init', 'node-lifecycle', 'service-lb', 'routes'].map((fn) => `${fn}@${provider}=http://${fn}-${provider}/`),
  );
  return buildRoutingTable(catalogue, { to, ownership: rules, periods: {} });
}

// What a change makes: `destination key` per delivery.
function deliveries(table: RoutingTable, c: ResourceChange, known?: Known): string[] {
  return route(table, c, known).map((r) => `${r.destination.name} ${r.key}`);
}

const lbServices: Known = (kind) =>
  kind === 'Service'
    ? {
        resource: services,
        objects: [
          ['Service/default/web-aws', service('web-aws')],
          ['Service/default/web-metal', service('web-metal', 'example.com/metal')],
          ['Service/default/web-other', service('web-other', 'example.com/other')],
        ],
      }
    : undefined;

describe('relay routing by owner: destinations serving providers', () => {
  it('come from the routing file (providers:) and --to <function>@<provider>=<url>, named <function>-<provider>', () => {
    const table = buildRoutingTable(catalogue, {
      file: {
        destinations: {
          'lb-metal': { url: 'http://lb-metal/', feed: 'service-lb', providers: ['static'] },
          'node-init': 'http://node-init/',
        },
      },
      to: ['service-lb@aws=http://lb-aws/', 'all@static=http://broker/'],
      ownership,
    });
    assert.deepEqual(
      table.destinations.map((d) => [d.name, d.feed, d.providers]),
      [
        ['lb-metal', 'service-lb', ['static']],
        ['node-init', 'node-init', undefined],
        ['service-lb-aws', 'service-lb', ['aws']],
        ['all-static', 'all', ['static']],
      ],
    );
    assert.equal(table.ownership, ownership);
  });

  it('are refused, each problem named: no ownership rules, a provider not among them, a malformed --to', () => {
    const problems = (sources: Parameters<typeof buildRoutingTable>[1]): readonly string[] => {
      try {
        buildRoutingTable(catalogue, sources);
      } catch (error) {
        assert.ok(error instanceof RoutingError);
        return error.problems;
      }
      return assert.fail('expected a RoutingError');
    };
    assert.deepEqual(problems({ to: ['node-init@aws=http://a/'] }), [
      "--to node-init-aws: serves providers aws, but the relay has no ownership rules: give it the deployment's " +
        '--cloud-provider (several), --default-provider and --load-balancer-class, as the functions get them',
    ]);
    assert.deepEqual(
      problems({
        file: { destinations: { lb: { url: 'http://lb/', feed: 'service-lb', providers: ['gcp', 'aws', 'aws'] } } },
        to: [
          'node-init@azure=http://a/',
          'nope@aws=http://b/',
          '@aws=http://c/',
          'routes@=http://d/',
          'a@b@c=http://e/',
        ],
        ownership,
      }),
      [
        'routing file lb: provider gcp is not one of --cloud-provider static,aws',
        '--to node-init-azure: provider azure is not one of --cloud-provider static,aws',
        '--to nope@aws=http://b/: nope is not a function (node-init, node-lifecycle, service-lb, routes) or "all"',
        '--to @aws=http://c/: expected <function>=<url> or <function>@<provider>=<url>, e.g. node-init=http://node-init.cirrus.svc',
        '--to routes@=http://d/: expected <function>=<url> or <function>@<provider>=<url>, e.g. node-init=http://node-init.cirrus.svc',
        '--to a@b@c=http://e/: expected <function>=<url> or <function>@<provider>=<url>, e.g. node-init=http://node-init.cirrus.svc',
      ],
    );
    assert.deepEqual(
      problems({ file: { destinations: { lb: { url: 'http://lb/', providers: ['aws', 'aws'] } } }, ownership }),
      [
        'routing file lb: not a function (node-init, node-lifecycle, service-lb, routes) or "all"; give a feed for other names',
      ],
    );
    assert.deepEqual(
      problems({
        file: { destinations: { lb: { url: 'http://lb/', feed: 'service-lb', providers: ['aws', 'aws'] } } },
        ownership,
      }),
      ['routing file lb: provider aws named twice'],
    );
  });
});

describe('relay routing by owner: what each destination receives', () => {
  it("a Node's events go to its provider's destinations only: by provider ID, by label, by default", () => {
    const table = splitTable();
    assert.deepEqual(deliveries(table, change('add', node('i-1', { providerID: 'aws:///us-east-1a/i-1' }))), [
      'node-init-aws Node/i-1',
      'service-lb-aws reconcile.all/service-lb',
      'routes-aws Node/i-1',
    ]);
    assert.deepEqual(deliveries(table, change('add', node('metal-1', { label: 'static' }))), [
      'node-init-static Node/metal-1',
      'service-lb-static reconcile.all/service-lb',
      'routes-static Node/metal-1',
    ]);
    assert.deepEqual(deliveries(table, change('add', node('plain'))), [
      'node-init-aws Node/plain',
      'service-lb-aws reconcile.all/service-lb',
      'routes-aws Node/plain',
    ]);
  });

  it("a Node nobody owns goes to every provider's node-init (which records the Event) and routes (whose copy of the Nodes learns it), and starts no service-lb pass", () => {
    for (const nobodys of [node('plain'), node('foreign', { providerID: 'gce://p/z/foreign' })]) {
      const name = nobodys.metadata?.name ?? '';
      assert.deepEqual(deliveries(splitTable(noDefault), change('add', nobodys)), [
        `node-init-static Node/${name}`,
        `routes-static Node/${name}`,
        `node-init-aws Node/${name}`,
        `routes-aws Node/${name}`,
      ]);
    }
  });

  it('a Node relabelled from one provider to another reaches both: the old one lets go, the new one takes it', () => {
    const moved = change('update', node('n', { label: 'aws' }), node('n', { label: 'static' }));
    assert.deepEqual(
      deliveries(splitTable(), moved).filter((d) => d.startsWith('node-init')),
      ['node-init-static Node/n', 'node-init-aws Node/n'],
    );
  });

  it("a Service's events go to its class's provider only, the default's without a class, nobody's to none", () => {
    const table = splitTable();
    assert.deepEqual(deliveries(table, change('add', service('web-metal', 'example.com/metal'))), [
      'service-lb-static Service/default/web-metal',
    ]);
    assert.deepEqual(deliveries(table, change('add', service('web-aws'))), ['service-lb-aws Service/default/web-aws']);
    assert.deepEqual(deliveries(table, change('add', service('web-other', 'example.com/other'))), []);
    // Its previous state's owner still hears of it (the class changed: the old provider lets go).
    const reclassed = change('update', service('web', 'example.com/metal'), service('web'));
    assert.deepEqual(deliveries(table, reclassed), [
      'service-lb-static Service/default/web',
      'service-lb-aws Service/default/web',
    ]);
  });

  it("a node-set fan-out goes only from its provider's Node change, and only for its provider's Services", () => {
    const table = splitTable(noDefault);
    const lb = (c: ResourceChange): string[] =>
      deliveries(table, c, lbServices).filter((d) => d.startsWith('service-lb'));
    assert.deepEqual(lb(change('add', node('i-1', { providerID: 'aws:///us-east-1a/i-1' }))), [
      // web-aws has no class and there is no default here: nobody's, as web-other.
    ]);
    assert.deepEqual(lb(change('add', node('metal-1', { label: 'static' }))), [
      'service-lb-static Service/default/web-metal',
    ]);
    assert.deepEqual(lb(change('add', node('plain'))), []);
    assert.deepEqual(
      deliveries(splitTable(), change('add', node('i-2', { providerID: 'aws:///us-east-1a/i-2' })), lbServices).filter(
        (d) => d.startsWith('service-lb'),
      ),
      ['service-lb-aws Service/default/web-aws'],
    );
    // A Node that leaves a provider (label removed, nobody's now) still changes that provider's node set.
    assert.deepEqual(lb(change('update', node('metal-1'), node('metal-1', { label: 'static' }))), [
      'service-lb-static Service/default/web-metal',
    ]);
  });

  it('a destination naming no providers gets every object, as without ownership rules', () => {
    const rules = ownership;
    const to = ['node-init=http://a/', 'node-init@static=http://b/'];
    const c = change('add', node('i-1', { providerID: 'aws:///us-east-1a/i-1' }));
    assert.deepEqual(deliveries(buildRoutingTable(catalogue, { to, ownership: rules }), c), ['node-init Node/i-1']);
  });

  it('computes no owner without a destination naming providers (the single-provider path)', () => {
    const watched: Ownership = {
      get providers(): readonly string[] {
        throw new Error('ownership read');
      },
      classes: new Map(),
    };
    const table = buildRoutingTable(catalogue, { to: ['node-init=http://a/', 'service-lb=http://b/'] });
    const c = change('add', node('i-1', { providerID: 'aws:///us-east-1a/i-1' }));
    assert.deepEqual(deliveries({ ...table, ownership: watched }, c), deliveries(table, c));
    assert.deepEqual(deliveries(table, c), ['node-init Node/i-1', 'service-lb reconcile.all/service-lb']);
  });
});

describe('cirrus relay: the ownership rules from the provider options', () => {
  const cases: { argv: string[]; code: number; message: RegExp }[] = [
    {
      argv: ['relay', '--cloud-provider', 'static,aws', '--to', 'node-init@gcp=http://a/'],
      code: usageExitCode,
      message: /--to node-init-gcp: provider gcp is not one of --cloud-provider static,aws\n/,
    },
    {
      argv: ['relay', '--to', 'node-init@aws=http://a/'],
      code: usageExitCode,
      message: /--to node-init-aws: serves providers aws, but the relay has no ownership rules/,
    },
    {
      argv: ['relay', '--cloud-provider', 'static,aws', '--load-balancer-class', 'gcp=z.io/w', '--to', 'all=http://a/'],
      code: usageExitCode,
      message: /--load-balancer-class: gcp is not one of --cloud-provider static,aws\n/,
    },
    // The relay builds no provider: a name it does not know of (an out-of-tree one) is only a name.
    {
      argv: ['relay', '--cloud-provider', 'static,nimbus', '--to', 'node-init@nimbus=http://a/', ...noCluster],
      code: 1,
      message: /^cirrus relay: could not load kubeconfig /,
    },
    // A command that builds providers checks each name of several.
    {
      argv: ['serve', 'node-init', '--cloud-provider', 'static,awz'],
      code: 1,
      message: /^cirrus serve: unknown cloud provider "awz" \(did you mean 'aws'\?\)/,
    },
    {
      argv: ['serve', 'node-init', '--cloud-provider', 'static,aws', ...noCluster],
      code: 1,
      message: /^cirrus serve: could not load kubeconfig /,
    },
  ];
  for (const { argv, code, message } of cases)
    it(`cirrus ${argv.join(' ')}`, async () => {
      const result = await runCommandLine(argv);
      assert.equal(result.code, code, result.stderr);
      assert.match(result.stderr, message);
    });
});
