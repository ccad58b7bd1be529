// The static provider's cloud-config: a YAML inventory of machines, read into an immutable
// snapshot. The format is documented for users in docs/providers/static.md; keep the two in step.
//
// Validation is strict (unknown fields are errors) because a typo such as `providerId` would
// otherwise be silently ignored and the machine would come up without what the user wrote.

import type { V1NodeAddress } from '@kubernetes/client-node';
import { loadAll, YAMLException } from 'js-yaml';
import { z } from 'zod';
import { CloudConfigError } from '../../shared/cloud/errors.ts';
import { parseIp, type IpSyntax } from '../../shared/net/ip.ts';
import {
  allocationsSchema,
  buildLoadBalancers,
  loadBalancersSchema,
  poolSchema,
  type LoadBalancerConfig,
} from './pools.ts';
import { dnsSubdomainProblem, labelKeyProblem, labelValueProblem, providerIdProblem } from './syntax.ts';

/** The address types of a Node's `status.addresses`. */
export const ADDRESS_TYPES = ['Hostname', 'ExternalIP', 'InternalIP', 'ExternalDNS', 'InternalDNS'] as const;

/** A machine's power state: a shut-down machine still exists (its Node is kept and tainted). */
export type InstanceState = 'running' | 'shutdown';

/** One machine of the inventory, with defaults applied. Frozen. */
export interface StaticInstance {
  /** The Node name it matches; absent for an entry matched by provider ID only. */
  readonly name?: string;
  /** As written, else `static://<name>`. */
  readonly providerID: string;
  /** '' when not given; likewise zone and region. */
  readonly instanceType: string;
  readonly zone: string;
  readonly region: string;
  readonly addresses: readonly Readonly<V1NodeAddress>[];
  readonly labels: Readonly<Record<string, string>>;
  readonly state: InstanceState;
}

/** A validated inventory: an immutable snapshot, replaced whole (never changed) on reload. */
export interface Inventory {
  /** In file order. */
  readonly instances: readonly StaticInstance[];
  readonly byProviderId: ReadonlyMap<string, StaticInstance>;
  readonly byName: ReadonlyMap<string, StaticInstance>;
  /** The address pools for Services of type LoadBalancer; undefined when the file has no `loadBalancers`. */
  readonly loadBalancers: LoadBalancerConfig | undefined;
}

type Check = (value: string) => string | undefined;

// A zod refinement reporting `check`'s problem at the current path.
function refineWith(check: Check) {
  return (value: string, context: z.RefinementCtx): void => {
    const problem = check(value);
    if (problem !== undefined) context.addIssue({ code: 'custom', message: problem });
  };
}

const labelValue = z.string().superRefine(refineWith(labelValueProblem));

// Node addresses as Node.js's net.isIP reads them: no leading zeros in IPv4 octets, a zone allowed.
const INVENTORY_IP: IpSyntax = { leadingZeros: false, zone: true };

const addressSchema = z
  .strictObject({
    type: z.enum(ADDRESS_TYPES),
    address: z.string().min(1, 'must not be empty'),
  })
  .superRefine((address, context) => {
    if (address.type.endsWith('IP') && parseIp(address.address, INVENTORY_IP) === undefined) {
      context.addIssue({
        code: 'custom',
        path: ['address'],
        message: `must be an IPv4 or IPv6 address, as the type is ${address.type}`,
      });
    }
  });

const labelsSchema = z.record(z.string(), labelValue).superRefine((labels, context) => {
  for (const key of Object.keys(labels)) {
    const problem = labelKeyProblem(key);
    if (problem !== undefined) context.addIssue({ code: 'custom', path: [key], message: problem });
  }
});

// instanceType, zone and region become label values on the Node, so they share that syntax.
const instanceSchema = z
  .strictObject({
    name: z.string().superRefine(refineWith(dnsSubdomainProblem)).optional(),
    providerID: z.string().superRefine(refineWith(providerIdProblem)).optional(),
    instanceType: labelValue.optional(),
    zone: labelValue.optional(),
    region: labelValue.optional(),
    addresses: z.array(addressSchema).optional(),
    labels: labelsSchema.optional(),
    state: z.enum(['running', 'shutdown']).optional(),
  })
  .superRefine((entry, context) => {
    if (entry.name === undefined && entry.providerID === undefined) {
      context.addIssue({ code: 'custom', message: 'needs a name or a providerID (or both)' });
    }
  });

const inventorySchema = z.strictObject({
  instances: z.array(instanceSchema),
  loadBalancers: loadBalancersSchema.optional(),
});

type InstanceEntry = z.output<typeof instanceSchema>;

/**
 * Parses and validates an inventory. Throws CloudConfigError naming `file`, the first invalid
 * field (like `instances[2].addresses[0].address`, '' for the whole file) and the problem.
 */
export function parseInventory(text: string, file: string | undefined): Inventory {
  const result = inventorySchema.safeParse(loadMapping(text, file), { reportInput: true });
  if (!result.success) throw issueError(result.error.issues, file);
  const { instances, loadBalancers } = result.data;
  return buildInventory(
    instances,
    loadBalancers === undefined ? undefined : buildLoadBalancers(loadBalancers, file),
    file,
  );
}

function loadMapping(text: string, file: string | undefined): unknown {
  let documents: unknown[];
  try {
    documents = loadAll(text, { filename: file ?? 'cloud-config' });
  } catch (error) {
    throw new CloudConfigError(file, '', `is not valid YAML: ${yamlProblem(error)}`);
  }
  const [document] = documents;
  if (documents.length > 1) throw new CloudConfigError(file, '', 'must hold a single YAML document');
  if (typeof document !== 'object' || document === null || Array.isArray(document)) {
    const found = documents.length === 0 ? 'it is empty' : `found ${describe(document)}`;
    throw new CloudConfigError(file, '', `must be a YAML mapping with an "instances" list; ${found}`);
  }
  return document;
}

function yamlProblem(error: unknown): string {
  if (!(error instanceof YAMLException)) return String(error);
  const mark = error.mark;
  return mark === undefined ? error.reason : `${error.reason} (line ${mark.line + 1}, column ${mark.column + 1})`;
}

// The first issue, in the order zod found them (document order, then cross-field checks).
function issueError(issues: readonly z.core.$ZodIssue[], file: string | undefined): CloudConfigError {
  const issue = issues[0];
  if (issue === undefined) return new CloudConfigError(file, '', 'is invalid');
  if (issue.code === 'unrecognized_keys') {
    const known = knownFields(issue.path);
    const hint = known === undefined ? '' : `; the fields here are ${known.join(', ')}`;
    return new CloudConfigError(file, fieldPath([...issue.path, issue.keys[0] ?? '']), `is not a known field${hint}`);
  }
  return new CloudConfigError(file, fieldPath(issue.path), problemOf(issue));
}

// YAML has no undefined: an undefined input is a field left out.
function problemOf(issue: z.core.$ZodIssue): string {
  if (issue.input === undefined && (issue.code === 'invalid_type' || issue.code === 'invalid_value'))
    return 'is required';
  if (issue.code === 'invalid_type') {
    const hint = issue.expected === 'string' && isScalar(issue.input) ? ` (quote it: "${String(issue.input)}")` : '';
    return `must be ${EXPECTED[issue.expected] ?? issue.expected}, not ${describe(issue.input)}${hint}`;
  }
  if (issue.code === 'invalid_value') {
    return `must be one of ${issue.values.map(String).join(', ')}, not ${describe(issue.input)}`;
  }
  return issue.message;
}

const EXPECTED: Partial<Record<string, string>> = {
  string: 'a string',
  array: 'a list',
  object: 'a mapping',
  record: 'a mapping',
  boolean: 'true or false',
};

function isScalar(value: unknown): value is number | boolean {
  return typeof value === 'number' || typeof value === 'boolean';
}

function describe(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'a list';
  if (typeof value === 'object') return 'a mapping';
  if (typeof value === 'string') return JSON.stringify(value);
  return isScalar(value) ? `the ${typeof value} ${String(value)}` : typeof value;
}

// The fields of each mapping in the file, by its path with list indexes left out.
const FIELDS: ReadonlyMap<string, readonly string[]> = new Map([
  ['', Object.keys(inventorySchema.shape)],
  ['instances[]', Object.keys(instanceSchema.shape)],
  ['instances[].addresses[]', Object.keys(addressSchema.shape)],
  ['loadBalancers', Object.keys(loadBalancersSchema.shape)],
  ['loadBalancers.pools[]', Object.keys(poolSchema.shape)],
  ['loadBalancers.allocations', Object.keys(allocationsSchema.shape)],
]);

// The fields allowed where an unknown one was found, to point at typos like `providerId`.
function knownFields(path: readonly PropertyKey[]): readonly string[] | undefined {
  return FIELDS.get(
    path.map((part, index) => (typeof part === 'number' ? '[]' : `${index === 0 ? '' : '.'}${String(part)}`)).join(''),
  );
}

/** `['instances', 2, 'labels', 'example.com/rack']` → `instances[2].labels["example.com/rack"]`. */
export function fieldPath(path: readonly PropertyKey[]): string {
  return path
    .map((part, index) => {
      if (typeof part === 'number') return `[${part}]`;
      const name = String(part);
      if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) return `[${JSON.stringify(name)}]`;
      return index === 0 ? name : `.${name}`;
    })
    .join('');
}

function buildInventory(
  entries: readonly InstanceEntry[],
  loadBalancers: LoadBalancerConfig | undefined,
  file: string | undefined,
): Inventory {
  const names = new Map<string, number>();
  const providerIds = new Map<string, number>();
  const instances = entries.map((entry, index) => {
    const instance = toInstance(entry);
    const { name, providerID } = instance;
    const sameName = name === undefined ? undefined : names.get(name);
    if (sameName !== undefined) {
      throw new CloudConfigError(
        file,
        `instances[${index}].name`,
        `"${name ?? ''}" is also the name of instances[${sameName}]`,
      );
    }
    const sameProviderId = providerIds.get(providerID);
    if (sameProviderId !== undefined) throw duplicateProviderId(file, { entry, index }, sameProviderId);
    if (name !== undefined) names.set(name, index);
    providerIds.set(providerID, index);
    return instance;
  });
  return Object.freeze({
    instances: Object.freeze(instances),
    byName: new Map(
      instances.flatMap((instance) => (instance.name === undefined ? [] : [[instance.name, instance] as const])),
    ),
    byProviderId: new Map(instances.map((instance) => [instance.providerID, instance] as const)),
    loadBalancers,
  });
}

// Provider IDs may collide through a default (`static://<name>`): say so, or the user looks for a
// providerID the file does not contain.
function duplicateProviderId(
  file: string | undefined,
  later: { entry: InstanceEntry; index: number },
  earlier: number,
): CloudConfigError {
  const { entry, index } = later;
  if (entry.providerID !== undefined) {
    return new CloudConfigError(
      file,
      `instances[${index}].providerID`,
      `"${entry.providerID}" is also the provider ID of instances[${earlier}]`,
    );
  }
  return new CloudConfigError(
    file,
    `instances[${index}].name`,
    `gives the default providerID "${defaultProviderId(entry.name ?? '')}", which is also the provider ID of instances[${earlier}]`,
  );
}

function defaultProviderId(name: string): string {
  return `static://${name}`;
}

function toInstance(entry: InstanceEntry): StaticInstance {
  const common = {
    providerID: entry.providerID ?? defaultProviderId(entry.name ?? ''),
    instanceType: entry.instanceType ?? '',
    zone: entry.zone ?? '',
    region: entry.region ?? '',
    addresses: Object.freeze((entry.addresses ?? []).map(({ type, address }) => Object.freeze({ type, address }))),
    labels: Object.freeze({ ...entry.labels }),
    state: entry.state ?? 'running',
  };
  return Object.freeze(entry.name === undefined ? common : { name: entry.name, ...common });
}
