// The `fake` provider (the package's `cirrus-ccm/fake`): the recording cloud (./cloud.ts) and the
// registry's factory, which reads its cloud-config.

import { load, YAMLException } from 'js-yaml';
import { z } from 'zod';
import { CloudConfigError } from '../../shared/cloud/errors.ts';
import type { ProviderContext } from '../../shared/cloud/registry.ts';
import { FakeCloud } from './cloud.ts';

export { FakeCloud } from './cloud.ts';
export type { FakeCall, FakeCapability, FakeInstance, FakeLoadBalancer, FakeThrottle } from './types.ts';

function parseYaml(text: string, file: string | undefined): unknown {
  try {
    return load(text);
  } catch (error) {
    const reason = error instanceof YAMLException ? error.message : String(error);
    throw new CloudConfigError(file, '', `not YAML: ${reason}`);
  }
}

const throttleSchema = z.strictObject({
  perSecond: z.number().int().min(1, 'must be at least 1'),
  retryAfterMs: z.number().int().min(0, 'must be 0 or more'),
});
const fakeConfigSchema = z.strictObject({ throttle: throttleSchema.optional() });

/**
 * The registry's factory: an empty FakeCloud whose load balancers each get an address of their
 * own ({@link distinctIngress}), as a cloud's do. The cloud-config is optional; it may set the
 * throttle (YAML or JSON): `throttle: { perSecond: 20, retryAfterMs: 1000 }`. Throws
 * CloudConfigError naming the field for anything else.
 */
export function fakeFromConfig(context: ProviderContext): FakeCloud {
  const cloud = new FakeCloud();
  cloud.ingressFor = distinctIngress();
  if (context.config === undefined || context.config.trim() === '') return cloud;
  const result = fakeConfigSchema.safeParse(parseYaml(context.config, context.configPath) ?? {});
  if (!result.success) {
    const issue = result.error.issues[0];
    throw new CloudConfigError(
      context.configPath,
      issue?.path.join('.') ?? '',
      `${issue?.message ?? 'invalid'} (the fake provider's cloud-config takes only throttle: { perSecond, retryAfterMs })`,
    );
  }
  cloud.throttle = result.data.throttle;
  return cloud;
}

/**
 * Ingress for FakeCloud.ingressFor: a new address for every load balancer made, never one handed
 * out before (a load balancer keeps its own through later ensures; one deleted does not give its
 * address back, so no two live load balancers share one). From 198.18.0.0/15 (RFC 2544, set aside
 * for benchmarks and tests): 131,070 addresses, then an error naming the limit.
 */
export function distinctIngress(): () => { ip: string; ipMode: 'VIP' } {
  const first = 0xc6120001; // 198.18.0.1
  const last = 0xc613fffe; // 198.19.255.254
  let next = first;
  return () => {
    if (next > last) throw new Error('the fake cloud has handed out every address of 198.18.0.0/15');
    const n = next;
    next += 1;
    return { ip: [n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255].join('.'), ipMode: 'VIP' };
  };
}
