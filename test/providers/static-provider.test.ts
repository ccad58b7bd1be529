import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { setTimeout as sleep } from 'node:timers/promises';
import { after, before, describe, it } from 'node:test';
import { KubeConfig, type V1Node } from '@kubernetes/client-node';
import { load } from 'js-yaml';
import { pino, type Logger } from 'pino';
import { CloudConfigError, findCause, InstanceNotFoundError } from '../../shared/cloud/errors.ts';
import type { CloudProvider, InstanceMetadata, InstancesV2 } from '../../shared/cloud/provider.ts';
import { createStaticProvider, parseInventory, type StaticProviderOptions } from '../../providers/static/index.ts';
import { deploymentNamespace, SERVICE_ACCOUNT_NAMESPACE_FILE } from '../../providers/static/namespace.ts';
import { initCloudProvider } from '../../shared/cloud/registry.ts';
import '../../app/root.ts'; // registers the built-in providers, as the command line does

const silent = pino({ level: 'silent' });
const never = new AbortController().signal;

interface LogEntry {
  readonly level: number;
  readonly msg: string;
  readonly [key: string]: unknown;
}

function capturingLog(): { log: Logger; entries: LogEntry[] } {
  const entries: LogEntry[] = [];
  const log = pino(
    { level: 'info' },
    {
      write: (line: string) => {
        entries.push(JSON.parse(line) as LogEntry);
      },
    },
  );
  return { log, entries };
}

function node(name: string, providerID?: string): V1Node {
  return { metadata: { name }, spec: providerID === undefined ? {} : { providerID } };
}

/** A client configuration for a cluster that is never called: building a provider makes no request. */
function offlineKubeConfig(): KubeConfig {
  const config = new KubeConfig();
  config.loadFromOptions({
    clusters: [{ name: 'c', server: 'https://127.0.0.1:1', skipTLSVerify: false }],
    users: [{ name: 'u' }],
    contexts: [{ name: 'x', cluster: 'c', user: 'u' }],
    currentContext: 'x',
  });
  return config;
}

async function fromYaml(yaml: string, kubeConfig?: KubeConfig): Promise<InstancesV2> {
  return instancesOf(
    await createStaticProvider({ config: yaml, configPath: undefined, signal: never, log: silent, kubeConfig }),
  );
}

function instancesOf(provider: CloudProvider): InstancesV2 {
  const instances = provider.instancesV2();
  assert.ok(instances, 'instancesV2() is supported');
  return instances;
}

async function metadata(instances: InstancesV2, of: V1Node): Promise<InstanceMetadata> {
  const answer = await instances.instanceMetadata(of);
  assert.ok(answer, 'instanceMetadata() answers metadata');
  return answer;
}

function isNotFound(error: unknown): boolean {
  return findCause(error, InstanceNotFoundError) !== undefined;
}

/** Replaces `file` at once, as a careful writer does: a reader never sees it half written. */
async function replaceFile(file: string, contents: string): Promise<void> {
  await writeFile(`${file}.tmp`, contents);
  await rename(`${file}.tmp`, file);
}

/** Resolves once `check` holds; fails after `timeoutMs`. */
async function eventually(what: string, check: () => boolean | Promise<boolean>, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) assert.fail(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(10);
  }
}

const FULL = `
instances:
  - name: worker-1
    providerID: static://rack-a/worker-1
    instanceType: m1.large
    zone: rack-a
    region: dc-1
    addresses:
      - { type: InternalIP, address: 10.0.0.11 }
      - { type: InternalIP, address: "fd00::11" }
      - { type: Hostname, address: worker-1 }
    labels: { example.com/rack: a, tier: "" }
  - name: worker-2
    state: shutdown
  - providerID: aws:///us-east-1a/i-0abc
`;

describe('parseInventory: invalid files', () => {
  const entry = (fields: string): string => `instances:\n  - ${fields}\n`;
  const cases: { name: string; yaml: string; field: string; problem: RegExp }[] = [
    { name: 'not YAML', yaml: 'instances: [', field: '', problem: /^is not valid YAML: .*\(line 1, column \d+\)$/ },
    {
      name: 'an empty file',
      yaml: '# nothing\n',
      field: '',
      problem: /^must be a YAML mapping with an "instances" list; it is empty$/,
    },
    { name: 'a list', yaml: '- name: a\n', field: '', problem: /mapping .*; found a list$/ },
    { name: 'a scalar', yaml: 'hello\n', field: '', problem: /mapping .*; found "hello"$/ },
    {
      name: 'two documents',
      yaml: 'instances: []\n---\ninstances: []\n',
      field: '',
      problem: /^must hold a single YAML document$/,
    },
    { name: 'no instances', yaml: '{}\n', field: 'instances', problem: /^is required$/ },
    { name: 'instances left empty', yaml: 'instances:\n', field: 'instances', problem: /^must be a list, not null$/ },
    {
      name: 'an unknown top-level field',
      yaml: 'instances: []\nmachines: []\n',
      field: 'machines',
      problem: /^is not a known field; the fields here are instances, loadBalancers$/,
    },
    {
      name: 'a misspelt field',
      yaml: entry('{ name: a, providerId: static://a }'),
      field: 'instances[0].providerId',
      problem: /^is not a known field; the fields here are name, providerID, /,
    },
    {
      name: 'an entry with neither name nor providerID',
      yaml: entry('{ zone: a }'),
      field: 'instances[0]',
      problem: /^needs a name or a providerID/,
    },
    {
      name: 'a name that is not a Node name',
      yaml: entry('{ name: Worker_1 }'),
      field: 'instances[0].name',
      problem: /must be a DNS subdomain/,
    },
    {
      name: 'an empty name',
      yaml: entry('{ name: "" }'),
      field: 'instances[0].name',
      problem: /must be 1 to 253 characters/,
    },
    {
      name: 'a duplicate name',
      yaml: 'instances: [{ name: a }, { name: b }, { name: a, providerID: x://a }]',
      field: 'instances[2].name',
      problem: /^"a" is also the name of instances\[0\]$/,
    },
    {
      name: 'a duplicate providerID',
      yaml: 'instances: [{ name: a, providerID: x://1 }, { name: b, providerID: x://1 }]',
      field: 'instances[1].providerID',
      problem: /^"x:\/\/1" is also the provider ID of instances\[0\]$/,
    },
    {
      name: 'a default providerID taken by another entry',
      yaml: 'instances: [{ name: a, providerID: static://b }, { name: b }]',
      field: 'instances[1].name',
      problem: /^gives the default providerID "static:\/\/b", which is also the provider ID of instances\[0\]$/,
    },
    {
      name: 'a providerID without a scheme',
      yaml: entry('{ providerID: worker-1 }'),
      field: 'instances[0].providerID',
      problem: /<scheme>:\/\/<id>/,
    },
    {
      name: 'a providerID without an id',
      yaml: entry('{ providerID: "static://" }'),
      field: 'instances[0].providerID',
      problem: /<scheme>:\/\/<id>/,
    },
    {
      name: 'an unknown address type',
      yaml: entry('{ name: a, addresses: [{ type: PublicIP, address: 192.0.2.1 }] }'),
      field: 'instances[0].addresses[0].type',
      problem: /^must be one of Hostname, ExternalIP, InternalIP, ExternalDNS, InternalDNS, not "PublicIP"$/,
    },
    {
      name: 'an InternalIP that is no IP address',
      yaml: entry(
        '{ name: a, addresses: [{ type: Hostname, address: a }, { type: InternalIP, address: 10.0.0.300 }] }',
      ),
      field: 'instances[0].addresses[1].address',
      problem: /^must be an IPv4 or IPv6 address, as the type is InternalIP$/,
    },
    {
      name: 'an ExternalIP given as a host name',
      yaml: entry('{ name: a, addresses: [{ type: ExternalIP, address: example.com }] }'),
      field: 'instances[0].addresses[0].address',
      problem: /IPv4 or IPv6 address, as the type is ExternalIP/,
    },
    {
      name: 'an empty address',
      yaml: entry('{ name: a, addresses: [{ type: Hostname, address: "" }] }'),
      field: 'instances[0].addresses[0].address',
      problem: /^must not be empty$/,
    },
    {
      name: 'an address without type',
      yaml: entry('{ name: a, addresses: [{ address: 10.0.0.1 }] }'),
      field: 'instances[0].addresses[0].type',
      problem: /^is required$/,
    },
    {
      name: 'an unknown address field',
      yaml: entry('{ name: a, addresses: [{ type: Hostname, address: a, ip: 10.0.0.1 }] }'),
      field: 'instances[0].addresses[0].ip',
      problem: /^is not a known field; the fields here are type, address$/,
    },
    {
      name: 'addresses as a mapping',
      yaml: entry('{ name: a, addresses: { InternalIP: 10.0.0.1 } }'),
      field: 'instances[0].addresses',
      problem: /^must be a list, not a mapping$/,
    },
    {
      name: 'a label key starting with "-"',
      yaml: entry('{ name: a, labels: { "-rack": a } }'),
      field: 'instances[0].labels["-rack"]',
      problem: /^is not a valid label key: its name must be letters/,
    },
    {
      name: 'a label key with an upper-case prefix',
      yaml: entry('{ name: a, labels: { Example.com/rack: a } }'),
      field: 'instances[0].labels["Example.com/rack"]',
      problem: /^is not a valid label key: its prefix must be a DNS subdomain/,
    },
    {
      name: 'a label key with two slashes',
      yaml: entry('{ name: a, labels: { a.com/b/c: a } }'),
      field: 'instances[0].labels["a.com/b/c"]',
      problem: /^is not a valid label key: its name must be/,
    },
    {
      name: 'a label key with an empty prefix',
      yaml: entry('{ name: a, labels: { /rack: a } }'),
      field: 'instances[0].labels["/rack"]',
      problem: /its prefix must be 1 to 253 characters/,
    },
    {
      name: 'a label name of 64 characters',
      yaml: entry(`{ name: a, labels: { ${'n'.repeat(64)}: a } }`),
      field: `instances[0].labels.${'n'.repeat(64)}`,
      problem: /its name must be 1 to 63 characters/,
    },
    {
      name: 'a label value with a space',
      yaml: entry('{ name: a, labels: { rack: "a b" } }'),
      field: 'instances[0].labels.rack',
      problem: /^is not a valid label value: it must be empty or letters/,
    },
    {
      name: 'a label value of 64 characters',
      yaml: entry(`{ name: a, labels: { rack: ${'v'.repeat(64)} } }`),
      field: 'instances[0].labels.rack',
      problem: /at most 63 characters/,
    },
    {
      name: 'a label value that YAML reads as a number',
      yaml: entry('{ name: a, labels: { rack: 1 } }'),
      field: 'instances[0].labels.rack',
      problem: /^must be a string, not the number 1 \(quote it: "1"\)$/,
    },
    {
      name: 'labels as a list',
      yaml: entry('{ name: a, labels: [a] }'),
      field: 'instances[0].labels',
      problem: /^must be a mapping, not a list$/,
    },
    {
      name: 'an instanceType that is no label value',
      yaml: entry('{ name: a, instanceType: m1 large }'),
      field: 'instances[0].instanceType',
      problem: /not a valid label value/,
    },
    {
      name: 'a zone of 64 characters',
      yaml: entry(`{ name: a, zone: ${'z'.repeat(64)} }`),
      field: 'instances[0].zone',
      problem: /at most 63 characters/,
    },
    {
      name: 'a region that is no string',
      yaml: entry('{ name: a, region: [dc-1] }'),
      field: 'instances[0].region',
      problem: /^must be a string, not a list$/,
    },
    {
      name: 'an unknown state',
      yaml: entry('{ name: a, state: off }'),
      field: 'instances[0].state',
      problem: /^must be one of running, shutdown, not "off"$/,
    },
  ];
  for (const reserved of ['kubernetes.io/role', 'k8s.io/x', 'topology.kubernetes.io/zone', 'node.k8s.io/x']) {
    cases.push({
      name: `a label in a reserved domain (${reserved})`,
      yaml: entry(`{ name: a, labels: { ${reserved}: x } }`),
      field: `instances[0].labels[${JSON.stringify(reserved)}]`,
      problem: /^is in the kubernetes.io or k8s.io domain, which the node controller never applies/,
    });
  }
  for (const { name, yaml, field, problem } of cases) {
    it(`rejects ${name}`, () => {
      assert.throws(
        () => parseInventory(yaml, 'inventory.yaml'),
        (error) => {
          const invalid = findCause(error, CloudConfigError);
          assert.ok(invalid, `a CloudConfigError, not ${String(error)}`);
          assert.equal(invalid.file, 'inventory.yaml');
          assert.equal(invalid.field, field);
          assert.match(invalid.problem, problem);
          return true;
        },
      );
    });
  }
});

describe('parseInventory: valid files', () => {
  const cases: { name: string; yaml: string; count: number }[] = [
    { name: 'an empty list', yaml: 'instances: []\n', count: 0 },
    { name: 'the full example', yaml: FULL, count: 3 },
    {
      name: 'an empty label value and a k8s-like but unreserved domain',
      yaml: 'instances: [{ name: a, labels: { app.k8snio/x: "", k8s.io.example.com/y: z } }]',
      count: 1,
    },
    {
      name: 'DNS addresses',
      yaml: 'instances: [{ name: a, addresses: [{ type: InternalDNS, address: a.internal }, { type: ExternalDNS, address: a.example.com }] }]',
      count: 1,
    },
    {
      name: 'an explicit providerID equal to the default',
      yaml: 'instances: [{ name: a, providerID: static://a }]',
      count: 1,
    },
  ];
  for (const { name, yaml, count } of cases) {
    it(`accepts ${name}`, () => {
      assert.equal(parseInventory(yaml, 'inventory.yaml').instances.length, count);
    });
  }

  it('returns a frozen snapshot', () => {
    const inventory = parseInventory(FULL, undefined);
    assert.ok(Object.isFrozen(inventory));
    assert.ok(Object.isFrozen(inventory.instances));
    for (const instance of inventory.instances) {
      assert.ok(Object.isFrozen(instance) && Object.isFrozen(instance.labels) && Object.isFrozen(instance.addresses));
    }
  });
});

describe('examples/static', () => {
  const example = (name: string) => readFile(new URL(`../../examples/static/${name}`, import.meta.url), 'utf8');

  it('has a valid inventory with a shut-down machine, and a tainted Node that one of its machines matches', async () => {
    const inventory = parseInventory(await example('inventory.yaml'), 'inventory.yaml');
    assert.ok(inventory.instances.some((instance) => instance.state === 'shutdown'));
    const exampleNode = load(await example('node.yaml')) as V1Node;
    assert.ok(
      exampleNode.spec?.taints?.some(
        (taint) => taint.key === 'node.cloudprovider.kubernetes.io/uninitialized' && taint.effect === 'NoSchedule',
      ),
    );
    const instances = await fromYaml(await example('inventory.yaml'), offlineKubeConfig());
    const found = await metadata(instances, exampleNode);
    // The node controller refuses metadata whose addresses do not hold the kubelet's --node-ip.
    const nodeIp = exampleNode.metadata?.annotations?.['alpha.kubernetes.io/provided-node-ip'];
    assert.ok(found.nodeAddresses.some((address) => address.address === nodeIp));
  });

  it('has an example with load balancer pools of both families, a default and a namespace pool', async () => {
    const pools = parseInventory(await example('inventory.yaml'), 'inventory.yaml').loadBalancers;
    assert.ok(pools);
    assert.ok(pools.defaultPool?.blocks.some((block) => block.family === 'IPv6'));
    assert.ok(pools.byNamespace.size > 0);
    // `cirrus start` creates the namespace cirrus runs in outside a pod, cirrus-system, and no other.
    assert.deepEqual(pools.allocations, { namespace: undefined, configMap: 'cirrus-lb-ipam' });
  });
});

describe('createStaticProvider', () => {
  it('needs a cloud-config', async () => {
    await assert.rejects(
      createStaticProvider({
        config: undefined,
        configPath: undefined,
        signal: never,
        log: silent,
        kubeConfig: undefined,
      }),
      (error) => {
        const invalid = findCause(error, CloudConfigError);
        assert.ok(invalid);
        assert.equal(invalid.field, '');
        assert.match(invalid.problem, /^the static provider needs --cloud-config with an inventory file$/);
        return true;
      },
    );
  });

  it('is registered as "static" and reports a bad file through the registry', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'cirrus-static-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const controller = new AbortController();
    t.after(() => {
      controller.abort();
    });
    const options = { signal: controller.signal, log: silent };
    await assert.rejects(
      initCloudProvider('static', undefined, options),
      (error) => findCause(error, CloudConfigError) !== undefined,
    );
    const file = join(dir, 'inventory.yaml');
    await writeFile(file, 'instances: [{ name: a, state: off }]\n');
    await assert.rejects(
      initCloudProvider('static', file, options),
      (error) => findCause(error, CloudConfigError)?.field === 'instances[0].state',
    );
    await writeFile(file, FULL);
    const provider = await initCloudProvider('static', file, options);
    assert.equal(provider.providerName(), 'static');
    assert.equal(await instancesOf(provider).instanceExists(node('worker-2')), true);
  });

  it('supports loadBalancer when the file has pools, given a kubeconfig', async (t) => {
    const dir = await mkdtemp(join(tmpdir(), 'cirrus-static-'));
    t.after(() => rm(dir, { recursive: true, force: true }));
    const yaml = 'instances: []\nloadBalancers: { pools: [{ name: a, default: true, addresses: [192.0.2.0/28] }] }\n';
    const context = { config: yaml, configPath: undefined, signal: never, log: silent };
    const outside = { namespaceFile: join(dir, 'absent') };
    const provider = await createStaticProvider({ ...context, kubeConfig: offlineKubeConfig() }, outside);
    assert.ok(provider.loadBalancer());
    const noCluster = (namespace: string) => (error: unknown) => {
      assert.ok(error instanceof Error);
      assert.equal(
        error.message,
        "the static provider's loadBalancers need a connection to the cluster (a kubeconfig), " +
          `to record allocations in ConfigMap ${namespace}/cirrus-lb-ipam; none was given (cirrus conformance: give ` +
          'one with --kubeconfig; cirrus cluster starts a local control plane and prints its KUBECONFIG; or check an ' +
          'inventory without loadBalancers)',
      );
      return true;
    };
    await assert.rejects(
      createStaticProvider({ ...context, kubeConfig: undefined }, outside),
      noCluster('cirrus-system'),
    );
    const namespaceFile = join(dir, 'namespace');
    await writeFile(namespaceFile, 'team-ops');
    await assert.rejects(
      createStaticProvider({ ...context, kubeConfig: undefined }, { namespaceFile }),
      noCluster('team-ops'),
    );
  });

  it('supports instancesV2 only', async () => {
    const provider = await createStaticProvider({
      config: FULL,
      configPath: undefined,
      signal: never,
      log: silent,
      kubeConfig: undefined,
    });
    assert.equal(provider.providerName(), 'static');
    assert.equal(provider.hasClusterId(), true);
    assert.ok(provider.instancesV2());
    assert.equal(provider.instances(), undefined);
    assert.equal(provider.zones(), undefined);
    assert.equal(provider.clusters(), undefined);
    assert.equal(provider.routes(), undefined);
    assert.equal(provider.loadBalancer(), undefined);
  });
});

describe('static InstancesV2', () => {
  let instances: InstancesV2;
  before(async () => {
    instances = await fromYaml(FULL);
  });

  it('answers the metadata of the entry named like the Node', async () => {
    assert.deepEqual(await instances.instanceMetadata(node('worker-1')), {
      providerId: 'static://rack-a/worker-1',
      instanceType: 'm1.large',
      nodeAddresses: [
        { type: 'InternalIP', address: '10.0.0.11' },
        { type: 'InternalIP', address: 'fd00::11' },
        { type: 'Hostname', address: 'worker-1' },
      ],
      zone: 'rack-a',
      region: 'dc-1',
      additionalLabels: { 'example.com/rack': 'a', tier: '' },
    });
  });

  it('fills in defaults: static://<name>, empty strings, no addresses or labels, running', async () => {
    assert.deepEqual(await instances.instanceMetadata(node('worker-2')), {
      providerId: 'static://worker-2',
      instanceType: '',
      nodeAddresses: [],
      zone: '',
      region: '',
      additionalLabels: {},
    });
    const running = await fromYaml('instances: [{ name: a }]');
    assert.equal(await running.instanceShutdown(node('a')), false);
  });

  it('matches by providerID before the name', async () => {
    const twoWays = await fromYaml(
      'instances: [{ name: n1, providerID: x://1, zone: z1 }, { name: n2, providerID: x://2, zone: z2 }]',
    );
    assert.equal((await metadata(twoWays, node('n1', 'x://2'))).zone, 'z2');
    assert.equal((await metadata(twoWays, node('n1'))).zone, 'z1');
  });

  it('matches an entry without a name by providerID only', async () => {
    const id = 'aws:///us-east-1a/i-0abc';
    assert.equal(await instances.instanceExists(node('ip-10-0-0-1', id)), true);
    assert.equal((await metadata(instances, node('ip-10-0-0-1', id))).providerId, id);
    assert.equal(await instances.instanceExists(node('i-0abc')), false);
  });

  it('falls back to the name when the providerID matches no entry', async () => {
    assert.equal(
      (await metadata(instances, node('worker-1', 'static://renamed'))).providerId,
      'static://rack-a/worker-1',
    );
  });

  it('treats a Node with no entry as a machine that does not exist', async () => {
    for (const unknown of [node('worker-9'), node('worker-9', 'static://worker-9'), { metadata: {} }]) {
      assert.equal(await instances.instanceExists(unknown), false);
      await assert.rejects(instances.instanceShutdown(unknown), isNotFound);
      await assert.rejects(instances.instanceMetadata(unknown), isNotFound);
    }
  });

  it('reports a shut-down machine as existing and shut down, a running one as not', async () => {
    assert.equal(await instances.instanceExists(node('worker-2')), true);
    assert.equal(await instances.instanceShutdown(node('worker-2')), true);
    assert.equal(await instances.instanceShutdown(node('worker-1')), false);
  });

  it('hands out copies that callers may change', async () => {
    const first = await metadata(instances, node('worker-1'));
    const addresses = first.nodeAddresses as { type: string; address: string }[];
    const [address] = addresses;
    assert.ok(address);
    address.address = '192.0.2.1';
    addresses.push({ type: 'ExternalIP', address: '192.0.2.2' });
    (first.additionalLabels as Record<string, string>)['example.com/rack'] = 'z';
    const second = await metadata(instances, node('worker-1'));
    assert.equal(second.nodeAddresses.length, 3);
    assert.equal(second.nodeAddresses[0]?.address, '10.0.0.11');
    assert.equal(second.additionalLabels['example.com/rack'], 'a');
  });

  it('rejects when the signal is already aborted', async () => {
    const controller = new AbortController();
    controller.abort(new Error('gone'));
    await assert.rejects(instances.instanceExists(node('worker-1'), controller.signal), /gone/);
  });
});

describe('static inventory reload', () => {
  const fast: StaticProviderOptions = { pollIntervalMs: 25, debounceMs: 10 };
  // Only the folder watch (and the check at start) can notice a change.
  const watchOnly: StaticProviderOptions = { pollIntervalMs: 3_600_000, debounceMs: 10 };
  let root: string;
  let count = 0;
  before(async () => {
    root = await mkdtemp(join(tmpdir(), 'cirrus-static-'));
  });
  after(() => rm(root, { recursive: true, force: true }));

  async function folder(): Promise<string> {
    count += 1;
    const dir = join(root, String(count));
    await mkdir(dir);
    return dir;
  }

  async function start(file: string, options: StaticProviderOptions, log: Logger = silent) {
    const controller = new AbortController();
    const config = await readFile(file, 'utf8');
    const provider = await createStaticProvider(
      { config, configPath: file, signal: controller.signal, log, kubeConfig: undefined },
      options,
    );
    return { instances: instancesOf(provider), controller };
  }

  const exists = (instances: InstancesV2, name: string) => () => instances.instanceExists(node(name));

  it('applies a valid change and logs the instance count', async (t) => {
    const file = join(await folder(), 'inventory.yaml');
    await writeFile(file, 'instances: [{ name: a }]\n');
    const { log, entries } = capturingLog();
    const { instances, controller } = await start(file, watchOnly, log);
    t.after(() => {
      controller.abort();
    });
    assert.equal(await instances.instanceExists(node('b')), false);
    await writeFile(file, 'instances: [{ name: a }, { name: b, state: shutdown }]\n');
    await eventually('machine b', exists(instances, 'b'));
    assert.equal(await instances.instanceShutdown(node('b')), true);
    await eventually('the info log', () =>
      entries.some((e) => e.level === 30 && e['instances'] === 2 && e['file'] === file),
    );
  });

  it('keeps the last good inventory when a change does not validate, and logs why', async (t) => {
    const file = join(await folder(), 'inventory.yaml');
    await writeFile(file, 'instances: [{ name: a }]\n');
    const { log, entries } = capturingLog();
    const { instances, controller } = await start(file, fast, log);
    t.after(() => {
      controller.abort();
    });
    await replaceFile(file, 'instances: [{ name: b, state: off }]\n');
    await eventually('the error log', () => entries.some((e) => e.level === 50));
    const logged = entries.find((e) => e.level === 50);
    assert.equal(logged?.['file'], file);
    assert.equal(logged['field'], 'instances[0].state');
    assert.match(String(logged['problem']), /must be one of running, shutdown/);
    assert.match(logged.msg, /keeping the last good one/);
    assert.equal(await instances.instanceExists(node('a')), true);
    assert.equal(await instances.instanceExists(node('b')), false);
    await writeFile(file, 'instances: [{ name: b }]\n');
    await eventually('machine b after the fix', exists(instances, 'b'));
    assert.equal(await instances.instanceExists(node('a')), false);
  });

  it('picks up a ConfigMap update (an atomic swap of the ..data symlink)', async (t) => {
    const dir = await folder();
    await mkdir(join(dir, '..2026_01_01_00_00_00.1'));
    await writeFile(join(dir, '..2026_01_01_00_00_00.1', 'config.yaml'), 'instances: [{ name: a }]\n');
    await symlink('..2026_01_01_00_00_00.1', join(dir, '..data'));
    await symlink('..data/config.yaml', join(dir, 'config.yaml'));
    const { instances, controller } = await start(join(dir, 'config.yaml'), watchOnly);
    t.after(() => {
      controller.abort();
    });
    assert.equal(await instances.instanceExists(node('a')), true);
    // What the kubelet's atomic writer does: a new folder, a new symlink renamed over ..data, the old folder removed.
    await mkdir(join(dir, '..2026_01_01_00_01_00.2'));
    await writeFile(join(dir, '..2026_01_01_00_01_00.2', 'config.yaml'), 'instances: [{ name: a }, { name: c }]\n');
    await symlink('..2026_01_01_00_01_00.2', join(dir, '..data_tmp'));
    await rename(join(dir, '..data_tmp'), join(dir, '..data'));
    await rm(join(dir, '..2026_01_01_00_00_00.1'), { recursive: true });
    await eventually('machine c', exists(instances, 'c'));
  });

  it('polls for changes the folder watch cannot see (a symlink into another folder)', async (t) => {
    const [watched, elsewhere] = [await folder(), await folder()];
    const target = join(elsewhere, 'inventory.yaml');
    await writeFile(target, 'instances: [{ name: a }]\n');
    await symlink(target, join(watched, 'inventory.yaml'));
    const { instances, controller } = await start(join(watched, 'inventory.yaml'), fast);
    t.after(() => {
      controller.abort();
    });
    await writeFile(target, 'instances: [{ name: d }]\n');
    await eventually('machine d', exists(instances, 'd'));
  });

  it('logs an unreadable file once, keeps the last good inventory, and recovers', async (t) => {
    const file = join(await folder(), 'inventory.yaml');
    await writeFile(file, 'instances: [{ name: a }]\n');
    const { log, entries } = capturingLog();
    const { instances, controller } = await start(file, fast, log);
    t.after(() => {
      controller.abort();
    });
    await rm(file);
    await eventually('the read error', () => entries.some((e) => e.level === 50));
    await sleep(150);
    assert.equal(entries.filter((e) => e.level === 50).length, 1);
    assert.equal(await instances.instanceExists(node('a')), true);
    await writeFile(file, 'instances: [{ name: e }]\n');
    await eventually('machine e', exists(instances, 'e'));
  });

  it('stops watching when the signal aborts', async (t) => {
    // Spies that call through: the poll timer must be cleared, and no debounce timer may be set by
    // folder events after the abort (the guard on aborted reads alone would hide a live watch).
    const setIntervalSpy = t.mock.method(globalThis, 'setInterval');
    const clearIntervalSpy = t.mock.method(globalThis, 'clearInterval');
    const setTimeoutSpy = t.mock.method(globalThis, 'setTimeout');
    const file = join(await folder(), 'inventory.yaml');
    await writeFile(file, 'instances: [{ name: a }]\n');
    const { log, entries } = capturingLog();
    const { instances, controller } = await start(file, fast, log);
    const [poller] = setIntervalSpy.mock.calls.map((call) => call.result);
    assert.ok(poller);
    controller.abort();
    assert.ok(
      clearIntervalSpy.mock.calls.some((call) => call.arguments[0] === poller),
      'the poll timer is cleared',
    );
    const timeoutsBefore = setTimeoutSpy.mock.callCount();
    await writeFile(file, 'instances: [{ name: f }]\n');
    await writeFile(join(file, '..', 'other.yaml'), '');
    await sleep(250); // ten poll intervals: long enough for a live watch to have reloaded
    assert.equal(setTimeoutSpy.mock.callCount(), timeoutsBefore, 'no folder event is handled');
    assert.equal(await instances.instanceExists(node('f')), false);
    assert.deepEqual(entries, []);
  });

  it('does not keep the process alive', async () => {
    const file = join(await folder(), 'inventory.yaml');
    await writeFile(file, 'instances: [{ name: a }]\n');
    const index = new URL('../../providers/static/index.ts', import.meta.url).href;
    const script = `
      import { pino } from 'pino';
      import { createStaticProvider } from ${JSON.stringify(index)};
      const context = { config: 'instances: []', configPath: ${JSON.stringify(file)}, signal: new AbortController().signal, log: pino({ level: 'silent' }) };
      await createStaticProvider(context, { pollIntervalMs: 10 });
      console.log('started');
    `;
    const run = promisify(execFile);
    const { stdout } = await run(process.execPath, ['--input-type=module', '--eval', script], {
      cwd: new URL('../..', import.meta.url),
      timeout: 10_000,
    });
    assert.equal(stdout.trim(), 'started');
  });
});

describe('deploymentNamespace', () => {
  let dir: string;
  before(async () => {
    dir = await mkdtemp(join(tmpdir(), 'cirrus-namespace-'));
  });
  after(() => rm(dir, { recursive: true, force: true }));

  it("is the pod's namespace, as the kubelet writes it next to the ServiceAccount token", async () => {
    const file = join(dir, 'namespace');
    await writeFile(file, 'cirrus\n');
    assert.deepEqual(await deploymentNamespace(file), {
      namespace: 'cirrus',
      from: `the namespace cirrus runs in, read from ${file}`,
    });
  });

  it('is cirrus-system outside a pod (no such file)', async () => {
    const file = join(dir, 'absent', 'namespace');
    assert.deepEqual(await deploymentNamespace(file), {
      namespace: 'cirrus-system',
      from: `the default outside a pod, as there is no ${file}`,
    });
    assert.equal(SERVICE_ACCOUNT_NAMESPACE_FILE, '/var/run/secrets/kubernetes.io/serviceaccount/namespace');
  });

  it('names the file when it cannot be read or holds no namespace name', async () => {
    await assert.rejects(deploymentNamespace(dir), (error: unknown) => {
      assert.ok(error instanceof Error);
      assert.match(error.message, new RegExp(`^could not read ${dir}, the namespace cirrus runs in: `));
      return true;
    });
    const file = join(dir, 'bad');
    await writeFile(file, 'Cirrus_System');
    await assert.rejects(deploymentNamespace(file), {
      message: `${file} holds "Cirrus_System", which is no namespace name: a namespace name must be a DNS label: lower-case letters, digits and "-", starting and ending with a letter or digit`,
    });
  });
});
