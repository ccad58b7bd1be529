// The fault suite's cloud: the `fake` provider (providers/fake) as an out-of-tree provider named
// `chaos`, for cirrus processes the suite kills and restarts: `cirrus serve|start --provider-module
// test/faults/provider.ts --cloud-provider chaos --cloud-config <file>`. What it adds to FakeCloud:
//
// - a machine for every Node name with the configured prefix (FakeCloud.instanceFor), so node-init finds them;
// - every cloud call, and every load-balancer mutation that succeeded (with the Service's uid,
//   ports and the node names), appended as one JSON line to the configured file, synchronously,
//   so that a SIGKILL loses nothing the cloud did;
// - the load balancers read back from that file at start-up: the cloud outlives the process, as a
//   real one does, and every process serving the same file sees the same cloud;
// - the fake's throttling (FakeCloud.throttle) when the cloud-config asks for it;
// - machines that are gone: the Node names listed in the `gone` file (one a line), read at every
//   call, so that a row can take a machine away from every process at once.
//
//   {"log": "/tmp/x/cloud.jsonl", "nodePrefix": "chaos-", "throttle": {"perSecond": 20, "retryAfterMs": 200}}

import { appendFileSync, existsSync, readFileSync } from 'node:fs';
import type { V1Node, V1Service } from '@kubernetes/client-node';
import { CloudConfigError } from '../../shared/cloud/errors.ts';
import type { LoadBalancer } from '../../shared/cloud/provider.ts';
import { registerCloudProvider } from '../../shared/cloud/registry.ts';
import { FakeCloud, type FakeInstance } from '../../providers/fake/index.ts';
import { parseRecords, replayLoadBalancers, type CloudRecord, type LbRecord } from './records.ts';

export const chaosProviderName = 'chaos';

/** The cloud-config of the `chaos` provider. */
export interface ChaosCloudConfig {
  /** The JSON-lines file of calls and mutations (shared by every process of a run). */
  readonly log: string;
  /** Nodes whose name starts with this have a machine. */
  readonly nodePrefix: string;
  /** Passed to FakeCloud.throttle. */
  readonly throttle?: { readonly perSecond: number; readonly retryAfterMs: number };
  /** A file listing the Node names whose machines are gone, one a line (absent: none is). */
  readonly gone?: string;
}

registerCloudProvider(chaosProviderName, ({ config, configPath }) => {
  const settings = parse(config, configPath);
  const cloud = new FakeCloud();
  const write = (record: CloudRecord): void => {
    appendFileSync(settings.log, `${JSON.stringify(record)}\n`);
  };
  // Every call FakeCloud records, timed, before its latency and errors: what the cloud was asked.
  const calls = cloud.calls;
  calls.push = (...items) => {
    for (const item of items) write({ kind: 'call', method: item.method, at: Date.now(), pid: process.pid });
    return Array.prototype.push.apply(calls, items);
  };
  if (settings.throttle !== undefined) Object.assign(cloud, { throttle: { ...settings.throttle } });
  // A machine for every Node of the run.
  cloud.instanceFor = (name) =>
    name.startsWith(settings.nodePrefix) && !goneMachines(settings.gone).has(name) ? machineFor(name) : undefined;
  // The cloud as the file says it is: every load balancer a process of this run made.
  if (existsSync(settings.log)) {
    const records = parseRecords(readFileSync(settings.log, 'utf8'));
    for (const [key, lb] of replayLoadBalancers(records)) {
      const [namespace = '', name = ''] = key.split('/');
      cloud.loadBalancers.set(key, {
        status: { ingress: [{ ip: cloud.loadBalancerIp }] },
        nodes: [...lb.nodes],
        service: { namespace, name, uid: lb.uid },
      });
    }
  }
  const lb = cloud.loadBalancer();
  if (lb !== undefined) recordMutations(lb, write);
  return cloud;
});

// The Node names whose machines are gone, as the `gone` file lists them now.
function goneMachines(file: string | undefined): Set<string> {
  if (file === undefined || !existsSync(file)) return new Set();
  return new Set(
    readFileSync(file, 'utf8')
      .split('\n')
      .filter((line) => line !== ''),
  );
}

function machineFor(name: string): FakeInstance {
  return {
    id: name,
    nodeName: name,
    instanceType: 'chaos.small',
    zone: 'chaos-a',
    region: 'chaos',
    addresses: [{ type: 'InternalIP', address: '10.1.0.1' }],
  };
}

// Wraps the three mutating methods: a call that returned is appended with what it made.
function recordMutations(lb: LoadBalancer, write: (record: LbRecord) => void): void {
  const ensure = lb.ensureLoadBalancer.bind(lb);
  const update = lb.updateLoadBalancer.bind(lb);
  const remove = lb.ensureLoadBalancerDeleted.bind(lb);
  const describe = (service: V1Service, nodes?: readonly V1Node[]) => ({
    key: `${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`,
    uid: service.metadata?.uid ?? '',
    ports: (service.spec?.ports ?? []).map((p) => `${p.protocol ?? 'TCP'}/${p.port}`).sort(),
    ...(nodes === undefined
      ? {}
      : {
          nodes: nodes.map((n) => String(n.metadata?.name)).sort(),
          targets: nodes.map((n) => `${String(n.metadata?.name)}=${n.spec?.providerID ?? ''}`).sort(),
        }),
    at: Date.now(),
    pid: process.pid,
  });
  Object.assign(lb, {
    ensureLoadBalancer: async (...args: Parameters<LoadBalancer['ensureLoadBalancer']>) => {
      const status = await ensure(...args);
      write({ kind: 'ensure', ...describe(args[1], args[2]) });
      return status;
    },
    updateLoadBalancer: async (...args: Parameters<LoadBalancer['updateLoadBalancer']>) => {
      await update(...args);
      write({ kind: 'update', ...describe(args[1], args[2]) });
    },
    ensureLoadBalancerDeleted: async (...args: Parameters<LoadBalancer['ensureLoadBalancerDeleted']>) => {
      await remove(...args);
      write({ kind: 'delete', ...describe(args[1]) });
    },
  });
}

function parse(text: string | undefined, file: string | undefined): ChaosCloudConfig {
  if (text === undefined) throw new CloudConfigError(file, '', 'the chaos provider needs --cloud-config');
  const raw = JSON.parse(text) as Partial<Record<keyof ChaosCloudConfig, unknown>>;
  if (typeof raw.log !== 'string' || raw.log === '') throw new CloudConfigError(file, 'log', 'must be a file path');
  if (typeof raw.nodePrefix !== 'string' || raw.nodePrefix === '')
    throw new CloudConfigError(file, 'nodePrefix', 'must be a non-empty string');
  if (!optionalPath(raw.gone)) throw new CloudConfigError(file, 'gone', 'must be a file path');
  if (raw.throttle !== undefined && !validThrottle(raw.throttle))
    throw new CloudConfigError(file, 'throttle', 'must be {"perSecond": n > 0, "retryAfterMs": n ≥ 0}');
  return raw as ChaosCloudConfig;
}

function optionalPath(value: unknown): boolean {
  return value === undefined || (typeof value === 'string' && value !== '');
}

function validThrottle(value: unknown): boolean {
  const t = value as { perSecond?: unknown; retryAfterMs?: unknown };
  return (
    typeof t.perSecond === 'number' && t.perSecond > 0 && typeof t.retryAfterMs === 'number' && t.retryAfterMs >= 0
  );
}
