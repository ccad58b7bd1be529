// Protocol v1 of the http provider, as zod schemas of what an endpoint answers: one POST per
// contract call, `{ "result": … }` on success, `{ "error": { "code", "message" } }` otherwise.
// The same protocol, for authors of endpoints: docs/http-provider-v1.openapi.yaml.

import { z } from 'zod';

/** The path prefix of every call. */
export const PROTOCOL = 'v1';

const address = z.object({
  type: z.enum(['Hostname', 'ExternalIP', 'InternalIP', 'ExternalDNS', 'InternalDNS']),
  address: z.string().min(1),
});

const metadata = z.object({
  providerId: z.string(),
  instanceType: z.string().default(''),
  nodeAddresses: z.array(address),
  zone: z.string().default(''),
  region: z.string().default(''),
  additionalLabels: z.record(z.string(), z.string()).default({}),
});

const zone = z.object({ failureDomain: z.string(), region: z.string() });

const route = z.object({
  name: z.string(),
  targetNode: z.string(),
  enableNodeAddresses: z.boolean().default(false),
  targetNodeAddresses: z.array(address).default([]),
  destinationCidr: z.string().min(1),
  blackhole: z.boolean().default(false),
});

const portStatus = z.object({ port: z.number().int(), protocol: z.string(), error: z.string().optional() });
const ingress = z.object({
  ip: z.string().optional(),
  hostname: z.string().optional(),
  ipMode: z.enum(['VIP', 'Proxy']).optional(),
  ports: z.array(portStatus).optional(),
});
const status = z.object({ ingress: z.array(ingress).default([]) });

/** The answer to `GET /v1/capabilities`. */
export const capabilitiesAnswer = z.object({
  protocol: z.literal(PROTOCOL, { error: `must be "${PROTOCOL}"` }),
  providerName: z
    .string()
    .regex(
      /^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/,
      'must be lower-case letters, digits, "-" and "." (the provider ID scheme)',
    ),
  hasClusterId: z.boolean().default(true),
  capabilities: z.array(z.enum(['loadBalancer', 'instances', 'instancesV2', 'zones', 'clusters', 'routes'])),
});

/** A capability an endpoint can serve. */
export type CapabilityName = z.output<typeof capabilitiesAnswer>['capabilities'][number];

const none = z.null().optional();

/** The `result` of each call, by call name. */
export const results = {
  instanceExists: z.boolean(),
  instanceShutdown: z.boolean(),
  instanceMetadata: metadata.nullable(),
  nodeAddresses: z.array(address),
  nodeAddressesByProviderId: z.array(address),
  instanceId: z.string(),
  instanceType: z.string(),
  instanceTypeByProviderId: z.string(),
  instanceExistsByProviderId: z.boolean(),
  instanceShutdownByProviderId: z.boolean(),
  getZoneByProviderId: zone,
  getZoneByNodeName: zone,
  listClusters: z.array(z.string()),
  master: z.string(),
  listRoutes: z.array(route),
  createRoute: none,
  deleteRoute: none,
  getLoadBalancer: status.nullable(),
  ensureLoadBalancer: status,
  updateLoadBalancer: none,
  ensureLoadBalancerDeleted: none,
} as const satisfies Record<string, z.ZodType>;

/** A call of protocol v1. */
export type CallName = keyof typeof results;

/** The error codes of protocol v1, and what each becomes (shared/cloud/errors.ts). */
export const errorCodes = ['InstanceNotFound', 'NotImplemented', 'ImplementedElsewhere', 'Retry', 'Failed'] as const;

/** The body of an error answer. */
export const errorAnswer = z.object({
  error: z.object({
    code: z.string().min(1),
    message: z.string().default(''),
    retryAfterSeconds: z.number().min(0).max(86_400).optional(),
  }),
});
