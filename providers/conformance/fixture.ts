// The conformance fixture: what only the provider's author knows — which instances exist, which
// are shut down, which are gone, and which Nodes and pod CIDRs to use for load balancers and
// routes — as a small YAML or JSON file (format: docs/conformance.md). The kit builds the Node
// and Service objects it passes in from it; it needs no cluster.

import { randomUUID } from 'node:crypto';
import type { V1Node, V1NodeAddress, V1Service, V1ServicePort } from '@kubernetes/client-node';
import { load } from 'js-yaml';
import { z } from 'zod';

const addressTypes = ['Hostname', 'ExternalIP', 'InternalIP', 'ExternalDNS', 'InternalDNS'] as const;

const address = z.strictObject({ type: z.enum(addressTypes), address: z.string().min(1, 'must not be empty') });
const stringMap = z.record(z.string(), z.string());
const cidr = z.string().regex(/^[0-9a-fA-F:.]+\/\d{1,3}$/, 'must be a CIDR like 10.244.1.0/24');

/** A Node as the kit passes it in: what the provider looks at to find the instance. */
const nodeSpec = z.strictObject({
  /** metadata.name: for many clouds the instance's private DNS name. */
  name: z.string().min(1, 'must not be empty'),
  /** spec.providerID, as the kubelet's --provider-id or an earlier initialization set it. */
  providerID: z.string().min(1, 'must not be empty').optional(),
  labels: stringMap.optional(),
  annotations: stringMap.optional(),
  /** status.addresses, as the kubelet reports them. */
  addresses: z.array(address).optional(),
});

/** What instanceMetadata() must answer for a known instance; each field is optional. */
const expectation = z.strictObject({
  providerID: z.string().optional(),
  instanceType: z.string().optional(),
  zone: z.string().optional(),
  region: z.string().optional(),
  addresses: z.array(address).optional(),
  labels: stringMap.optional(),
});

const knownInstance = nodeSpec.extend({ expect: expectation.optional() });

/** A Node named here, or the name of one given under instances (or a bare Node of that name). */
const nodeRef = z.union([z.string().min(1, 'must not be empty'), nodeSpec]);

const servicePort = z.strictObject({
  name: z.string().optional(),
  protocol: z.enum(['TCP', 'UDP', 'SCTP']).default('TCP'),
  port: z.number().int().min(1).max(65535),
  targetPort: z.number().int().min(1).max(65535).optional(),
  nodePort: z.number().int().min(1).max(65535).optional(),
});

const fixtureSchema = z.strictObject({
  instances: z
    .strictObject({
      /** Instances that exist and run. */
      known: z.array(knownInstance).default([]),
      /** Instances that exist but are shut down (stopped). */
      shutdown: z.array(knownInstance).default([]),
      /** Nodes whose instances do not exist; default: one Node with a name no cloud has. */
      gone: z.array(nodeSpec).default([]),
    })
    .prefault({}),
  loadBalancer: z
    .strictObject({
      /** The Nodes to pass as load balancer targets. */
      nodes: z.array(nodeRef).default([]),
      /** Another node set for updateLoadBalancer; default: the first of `nodes` dropped. */
      updateNodes: z.array(nodeRef).optional(),
      /** The namespace of the Services the kit makes. */
      namespace: z.string().min(1).default('cirrus-conformance'),
      /** What the Services look like, beyond type LoadBalancer. */
      service: z
        .strictObject({
          annotations: stringMap.default({}),
          ports: z
            .array(servicePort)
            .min(1)
            .default([{ name: 'http', protocol: 'TCP', port: 80, targetPort: 8080 }]),
          ipFamilies: z
            .array(z.enum(['IPv4', 'IPv6']))
            .min(1)
            .max(2)
            .default(['IPv4']),
          externalTrafficPolicy: z.enum(['Cluster', 'Local']).default('Cluster'),
        })
        .prefault({}),
      /** How many Services the concurrency check ensures at once. */
      concurrency: z.number().int().min(2).max(50).default(4),
      /** The cloud may give two Services the same ingress (shared addresses); default: each its own. */
      ingressMayRepeat: z.boolean().default(false),
    })
    .prefault({}),
  routes: z
    .strictObject({
      /** --cluster-cidr: the pod CIDRs are inside it. */
      clusterCidr: cidr.optional(),
      /** Nodes to route to, each with the pod CIDR the kit creates a route for. */
      targets: z.array(z.strictObject({ node: nodeRef, podCidr: cidr })).default([]),
      /** Routes that already exist in the cloud and whose target is gone: listRoutes must flag them. */
      blackholes: z.array(z.strictObject({ destinationCidr: cidr })).default([]),
    })
    .prefault({}),
  cancellation: z
    .strictObject({
      /** How long after its signal aborts a call may take to settle, in milliseconds. */
      boundMs: z.number().int().min(1).max(60_000).default(1000),
    })
    .prefault({}),
});

/** A parsed fixture, defaults applied. */
export type Fixture = z.output<typeof fixtureSchema>;
/** A fixture as written (every section optional). */
export type FixtureInput = z.input<typeof fixtureSchema>;
/** A Node as a fixture describes it. */
export type NodeSpec = z.output<typeof nodeSpec>;
/** A known or shut-down instance: its Node, and what its metadata must be. */
export type KnownInstance = z.output<typeof knownInstance>;
type NodeRef = z.output<typeof nodeRef>;

/** A fixture that cannot be used: which file, which field, what is wrong. */
export class FixtureError extends Error {
  override readonly name = 'FixtureError';
}

/** Validates a fixture given as an object (programmatic use); throws FixtureError naming the field. */
export function fixtureFrom(input: unknown, file = 'fixture'): Fixture {
  const result = fixtureSchema.safeParse(input ?? {});
  if (!result.success) {
    const issue = result.error.issues[0];
    const path = (issue?.path ?? []).map((p) => (typeof p === 'number' ? `[${p}]` : `.${String(p)}`)).join('');
    throw new FixtureError(`${file}: ${path.replace(/^\./, '') || '(top)'}: ${issue?.message ?? 'invalid'}`);
  }
  return result.data;
}

/** Parses a fixture file's text (YAML or JSON); throws FixtureError naming the file and the field. */
export function parseFixture(text: string, file = 'fixture'): Fixture {
  if (text.trim() === '') return fixtureFrom({}, file);
  let value: unknown;
  try {
    value = load(text);
  } catch (error) {
    throw new FixtureError(`${file}: is not valid YAML: ${(error as Error).message.split('\n')[0] ?? ''}`, {
      cause: error,
    });
  }
  if (value !== undefined && value !== null && (typeof value !== 'object' || Array.isArray(value)))
    throw new FixtureError(`${file}: must be a YAML mapping (instances, loadBalancer, routes, cancellation)`);
  return fixtureFrom(value, file);
}

/** The Node object for `spec`: Ready, with a fresh UID. */
export function nodeOf(spec: NodeSpec, podCidr?: string): V1Node {
  const addresses: V1NodeAddress[] = (spec.addresses ?? []).map((a) => ({ ...a }));
  return {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: {
      name: spec.name,
      uid: randomUUID(),
      labels: { 'kubernetes.io/hostname': spec.name, ...spec.labels },
      ...(spec.annotations === undefined ? {} : { annotations: { ...spec.annotations } }),
    },
    spec: {
      ...(spec.providerID === undefined ? {} : { providerID: spec.providerID }),
      ...(podCidr === undefined ? {} : { podCIDR: podCidr, podCIDRs: [podCidr] }),
    },
    status: { addresses, conditions: [{ type: 'Ready', status: 'True' }] },
  };
}

/** The Node of a known instance: its entry without `expect`. */
export function withoutExpectation(instance: KnownInstance): NodeSpec {
  return Object.fromEntries(Object.entries(instance).filter(([key]) => key !== 'expect')) as NodeSpec;
}

/** A fixture's node reference resolved: a name given under instances is that Node. */
export function resolveNode(fixture: Fixture, ref: NodeRef): NodeSpec {
  if (typeof ref !== 'string') return ref;
  const { known, shutdown } = fixture.instances;
  const found = [...known, ...shutdown].find((i) => i.name === ref);
  if (found === undefined) return { name: ref };
  return withoutExpectation(found);
}

/** A `type: LoadBalancer` Service the kit makes: a fresh name and UID, as the fixture shapes it. */
export function serviceOf(fixture: Fixture, name: string, index = 0): V1Service {
  const shape = fixture.loadBalancer.service;
  const ports: V1ServicePort[] = shape.ports.map((p, i) => ({
    name: p.name ?? `port-${i}`,
    protocol: p.protocol,
    port: p.port,
    targetPort: p.targetPort ?? p.port,
    nodePort: p.nodePort ?? 30000 + ((index * shape.ports.length + i) % 2700),
  }));
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: {
      name,
      namespace: fixture.loadBalancer.namespace,
      uid: randomUUID(),
      annotations: { ...shape.annotations },
    },
    spec: {
      type: 'LoadBalancer',
      ports,
      ipFamilies: [...shape.ipFamilies],
      ipFamilyPolicy: shape.ipFamilies.length > 1 ? 'RequireDualStack' : 'SingleStack',
      externalTrafficPolicy: shape.externalTrafficPolicy,
      selector: { app: name },
    },
    status: { loadBalancer: {} },
  };
}
