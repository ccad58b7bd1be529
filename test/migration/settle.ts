// Waiting for a CCM to finish its work on the migration test's cluster: every Node initialized and
// routed, every Service given a load balancer, every Node registered on every load balancer. A
// CCM that never gets there (cirrus refusing a Service, say) is a finding, not an error: settle()
// then returns what is still unmet when its time is up, and the assertions say what differs.

import type { AwsWorld, WorldInstance } from '../harness/aws.ts';
import { namespace, podCidr } from './cluster.ts';
import { takeSnapshot, type ClusterSide, type Snapshot } from './snapshot.ts';

export interface Expected {
  /** The Nodes' instances, the `i`th with pod CIDR podCidr(i + 1). */
  readonly nodes: readonly WorldInstance[];
  /** How many Services should have a load balancer's address. */
  readonly services: number;
}

/** Polls until nothing is unmet or `timeoutMs` passed; returns what is unmet then. */
export async function settle(
  core: ClusterSide['core'],
  world: AwsWorld,
  expected: Expected,
  timeoutMs: number,
): Promise<string[]> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const missing = unmet(await takeSnapshot(world, { core, namespace }), expected);
    if (missing.length === 0 || Date.now() > deadline) return missing;
    await new Promise((resolve) => setTimeout(resolve, 1_000));
  }
}

/** What `snapshot` lacks of `expected`, one line each. */
export function unmet(snapshot: Snapshot, expected: Expected): string[] {
  const value = (key: string): unknown => JSON.parse(snapshot.get(key) ?? 'null');
  return [
    ...nodesUnmet(value, expected),
    ...servicesUnmet(snapshot, value, expected),
    ...registrationsUnmet(snapshot, value, expected),
  ];
}

type Read = (key: string) => unknown;

function nodesUnmet(value: Read, expected: Expected): string[] {
  return [...expected.nodes.entries()].flatMap(([index, instance]) => {
    const lines: string[] = [];
    const node = value(`node ${instance.privateDnsName}`) as { providerID?: string; taints?: string[] } | null;
    if (node?.providerID === undefined || (node.taints ?? []).length > 0)
      lines.push(`Node ${instance.privateDnsName} not initialized: ${JSON.stringify(node)}`);
    if (value(`route ${podCidr(index + 1)}`) !== instance.instanceId)
      lines.push(`no route ${podCidr(index + 1)} to ${instance.instanceId}`);
    return lines;
  });
}

function servicesUnmet(snapshot: Snapshot, value: Read, expected: Expected): string[] {
  const services = [...snapshot.keys()].filter((k) => k.startsWith('service '));
  const bare = services.filter((k) => ((value(k) as { ingress?: unknown[] }).ingress ?? []).length === 0);
  const absent = expected.services - services.length;
  return [
    ...bare.map((k) => `${k}: no load balancer address`),
    ...(absent > 0 ? [`${absent} of ${expected.services} Services missing`] : []),
  ];
}

function registrationsUnmet(snapshot: Snapshot, value: Read, expected: Expected): string[] {
  const lists = [...snapshot.keys()].filter((k) => k.endsWith(' instances') || k.endsWith(' targets'));
  return lists.flatMap((key) => {
    const registered = (value(key) as string[]).map((id) => id.split(':')[0]);
    const absent = expected.nodes.filter((i) => !registered.includes(i.instanceId)).map((i) => i.instanceId);
    return absent.length > 0 ? [`${key}: ${absent.join(', ')} not registered`] : [];
  });
}
