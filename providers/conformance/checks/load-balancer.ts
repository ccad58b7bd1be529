// Load balancers: what the service controller relies on. ensure is idempotent (the controller
// re-ensures on every resync and after every failure), update keeps the address, delete of a load
// balancer that is not there succeeds (cleanup runs after partial failures and for Services that
// never got one), getLoadBalancer agrees with both, and Services do not share one load balancer.
// Every load balancer a check makes is deleted when it ends, whatever happened.

import type { V1LoadBalancerIngress, V1LoadBalancerStatus, V1Node, V1Service } from '@kubernetes/client-node';
import { findCause, ImplementedElsewhereError } from '../../../shared/cloud/errors.ts';
import type { LoadBalancer } from '../../../shared/cloud/provider.ts';
import {
  ConformanceFailure,
  describeError,
  expect,
  expectEqual,
  frozen,
  show,
  skip,
  succeedsWithRetries,
  type Check,
  type CheckContext,
  type Skip,
} from '../check.ts';
import { nodeOf, resolveNode, serviceOf } from '../fixture.ts';

const unsupported = skip('the provider does not support loadBalancer() (it answers undefined)');

function nodesOf(context: CheckContext, which: 'nodes' | 'updateNodes'): V1Node[] {
  const { fixture } = context;
  const refs =
    which === 'nodes'
      ? fixture.loadBalancer.nodes
      : (fixture.loadBalancer.updateNodes ?? fixture.loadBalancer.nodes.slice(1));
  return refs.map((ref) => frozen(nodeOf(resolveNode(fixture, ref))));
}

function service(context: CheckContext, suffix: string, index = 0): V1Service {
  return frozen(serviceOf(context.fixture, context.name(suffix), index));
}

function who(service: V1Service): string {
  return `Service ${service.metadata?.namespace ?? ''}/${service.metadata?.name ?? ''}`;
}

/** The ingress as the service controller compares it (LoadBalancerStatusEqual): fields that are set. */
function ingressOf(status: V1LoadBalancerStatus | undefined): V1LoadBalancerIngress[] {
  return (status?.ingress ?? []).map((i) =>
    Object.fromEntries(Object.entries(i).filter(([, v]) => v !== undefined && v !== null)),
  );
}

const elsewhere =
  "threw ImplementedElsewhereError: this provider leaves Services like the kit's to another controller; shape them (loadBalancer.service in the fixture) so that it implements them";

/** Runs `body` with the load balancer API, deleting the load balancers of `services` afterwards. */
async function withCleanup(
  context: CheckContext,
  services: readonly V1Service[],
  body: (api: LoadBalancer) => Promise<Skip | undefined>,
): Promise<Skip | undefined> {
  const api = context.provider.loadBalancer();
  if (api === undefined) return unsupported;
  try {
    return await body(api);
  } catch (error) {
    if (findCause(error, ImplementedElsewhereError) && !(error instanceof ConformanceFailure))
      return skip(`ensureLoadBalancer ${elsewhere}`);
    throw error;
  } finally {
    await Promise.allSettled(services.map((s) => api.ensureLoadBalancerDeleted(context.clusterName, s)));
  }
}

async function ensure(
  context: CheckContext,
  api: LoadBalancer,
  svc: V1Service,
  nodes: V1Node[],
): Promise<V1LoadBalancerStatus> {
  const status = await succeedsWithRetries(
    `ensureLoadBalancer(${who(svc)}, ${nodes.length} nodes)`,
    () => api.ensureLoadBalancer(context.clusterName, svc, nodes),
    context.signal,
  ).catch((error: unknown) => {
    if (findCause(error, ImplementedElsewhereError)) throw (error as Error).cause ?? error;
    throw error;
  });
  expect(
    typeof status === 'object' && (status as unknown) !== null,
    `ensureLoadBalancer(${who(svc)}) answered ${show(status)}; the service controller fails on a nil status`,
  );
  const ingress = ingressOf(status);
  expect(ingress.length > 0, `ensureLoadBalancer(${who(svc)}) answered no ingress: ${show(status)}`);
  ingress.forEach((i, n) => {
    expect(
      typeof i.ip === 'string' || typeof i.hostname === 'string',
      `ensureLoadBalancer(${who(svc)}): ingress[${n}] has neither ip nor hostname: ${show(i)}`,
    );
  });
  return status;
}

function get(context: CheckContext, api: LoadBalancer, svc: V1Service): Promise<V1LoadBalancerStatus | undefined> {
  return succeedsWithRetries(
    `getLoadBalancer(${who(svc)})`,
    () => api.getLoadBalancer(context.clusterName, svc),
    context.signal,
  );
}

async function remove(context: CheckContext, api: LoadBalancer, svc: V1Service, state: string): Promise<void> {
  try {
    await succeedsWithRetries(
      `ensureLoadBalancerDeleted(${who(svc)}) ${state}`,
      () => api.ensureLoadBalancerDeleted(context.clusterName, svc),
      context.signal,
    );
  } catch (error) {
    if (findCause(error, ImplementedElsewhereError))
      throw new ConformanceFailure(
        `ensureLoadBalancerDeleted(${who(svc)}) ${state} threw ImplementedElsewhereError, which delete must never throw`,
        { cause: error },
      );
    throw error;
  }
}

const name: Check = {
  id: 'load-balancer.name',
  rule: 'getLoadBalancerName() is a non-empty name, the same for the same Service on every call, and different for two Services.',
  source:
    'shared/cloud/provider.ts LoadBalancer.getLoadBalancerName, defaultLoadBalancerName; k8s.io/cloud-provider cloud.go GetLoadBalancerName, DefaultLoadBalancerName',
  run: (context) => {
    const api = context.provider.loadBalancer();
    if (api === undefined) return Promise.resolve(unsupported);
    const [a, b] = [service(context, 'name-a'), service(context, 'name-b')];
    const first = api.getLoadBalancerName(context.clusterName, a);
    expect(typeof first === 'string' && first !== '', `getLoadBalancerName(${who(a)}) answered ${show(first)}`);
    expectEqual(api.getLoadBalancerName(context.clusterName, a), first, `getLoadBalancerName(${who(a)}) is not stable`);
    const other = api.getLoadBalancerName(context.clusterName, b);
    expect(other !== first, `getLoadBalancerName() answered "${first}" for two different Services`);
    return Promise.resolve(undefined);
  },
};

const idempotent: Check = {
  id: 'load-balancer.ensure-idempotent',
  rule: 'ensureLoadBalancer() is idempotent: a second call with the same Service and nodes answers the same status and makes no second load balancer (one delete removes it).',
  source:
    'shared/cloud/provider.ts LoadBalancer.ensureLoadBalancer; k8s.io/cloud-provider controllers/service/controller.go syncLoadBalancerIfNeeded (every sync ensures again; a failed one is retried)',
  run: async (context) => {
    const svc = service(context, 'idem');
    return withCleanup(context, [svc], async (api) => {
      const nodes = nodesOf(context, 'nodes');
      const first = await ensure(context, api, svc, nodes);
      const second = await ensure(context, api, svc, nodes);
      expectEqual(
        ingressOf(second),
        ingressOf(first),
        `a second ensureLoadBalancer(${who(svc)}) answered another ingress`,
      );
      await remove(context, api, svc, 'after two ensures');
      const left = await get(context, api, svc);
      expect(
        left === undefined,
        `getLoadBalancer(${who(svc)}) still finds ${show(left)} after two ensures and one delete: the second ensure made a second load balancer`,
      );
      return undefined;
    });
  },
};

const agrees: Check = {
  id: 'load-balancer.get-agrees',
  rule: 'getLoadBalancer() agrees with ensure and delete: nothing before ensure, the ensured status after it, nothing after delete.',
  source:
    'shared/cloud/provider.ts LoadBalancer.getLoadBalancer; k8s.io/cloud-provider cloud.go LoadBalancer, controllers/service/controller.go syncLoadBalancerIfNeeded',
  run: async (context) => {
    const svc = service(context, 'get');
    return withCleanup(context, [svc], async (api) => {
      const before = await get(context, api, svc);
      expect(before === undefined, `getLoadBalancer(${who(svc)}) before any ensure answered ${show(before)}`);
      const status = await ensure(context, api, svc, nodesOf(context, 'nodes'));
      const found = await get(context, api, svc);
      expect(found !== undefined, `getLoadBalancer(${who(svc)}) after ensure answered undefined (no load balancer)`);
      expectEqual(
        ingressOf(found),
        ingressOf(status),
        `getLoadBalancer(${who(svc)}) disagrees with ensureLoadBalancer`,
      );
      await remove(context, api, svc, 'of an existing load balancer');
      const after = await get(context, api, svc);
      expect(after === undefined, `getLoadBalancer(${who(svc)}) after delete answered ${show(after)}`);
      return undefined;
    });
  },
};

const update: Check = {
  id: 'load-balancer.update-keeps-address',
  rule: 'updateLoadBalancer() with another node set succeeds and keeps the address: getLoadBalancer() and a new ensure answer the same ingress.',
  source:
    'shared/cloud/provider.ts LoadBalancer.updateLoadBalancer; k8s.io/cloud-provider controllers/service/controller.go nodeSyncService, stableNodeSetPredicates',
  run: async (context) => {
    if (context.fixture.loadBalancer.nodes.length === 0)
      return skip('the fixture names no load balancer nodes (loadBalancer.nodes), so there is no other node set');
    const svc = service(context, 'update');
    return withCleanup(context, [svc], async (api) => {
      const status = await ensure(context, api, svc, nodesOf(context, 'nodes'));
      const others = nodesOf(context, 'updateNodes');
      await succeedsWithRetries(
        `updateLoadBalancer(${who(svc)}, ${others.length} nodes)`,
        () => api.updateLoadBalancer(context.clusterName, svc, others),
        context.signal,
      );
      const found = await get(context, api, svc);
      expectEqual(ingressOf(found), ingressOf(status), `getLoadBalancer(${who(svc)}) after updateLoadBalancer`);
      const again = await ensure(context, api, svc, others);
      expectEqual(ingressOf(again), ingressOf(status), `ensureLoadBalancer(${who(svc)}) with the updated node set`);
      return undefined;
    });
  },
};

const deleteMissing: Check = {
  id: 'load-balancer.delete-missing',
  rule: 'ensureLoadBalancerDeleted() of a load balancer that does not exist succeeds (twice in a row too), and never throws ImplementedElsewhereError.',
  source:
    'shared/cloud/provider.ts LoadBalancer.ensureLoadBalancerDeleted; k8s.io/cloud-provider cloud.go LoadBalancer, controllers/service/controller.go syncLoadBalancerIfNeeded',
  run: async (context) => {
    const svc = service(context, 'absent');
    return withCleanup(context, [], async (api) => {
      await remove(context, api, svc, 'of a load balancer that never existed');
      await remove(context, api, svc, 'a second time');
      return undefined;
    });
  },
};

const concurrent: Check = {
  id: 'load-balancer.concurrent',
  rule: 'N concurrent ensureLoadBalancer() calls for N Services give N load balancers: each Service gets its own status (distinct ingress, unless the fixture allows sharing), and deleting one leaves the others.',
  source: 'shared/cloud/provider.ts (safe to call from many stateless instances at once)',
  run: async (context) => {
    const { concurrency, ingressMayRepeat } = context.fixture.loadBalancer;
    const services = Array.from({ length: concurrency }, (_, i) => service(context, `many-${i}`, i));
    return withCleanup(context, services, async (api) => {
      const nodes = nodesOf(context, 'nodes');
      const settled = await Promise.allSettled(services.map((svc) => ensure(context, api, svc, nodes)));
      const failed = settled.findIndex((s) => s.status === 'rejected');
      if (failed >= 0) {
        const reason = (settled[failed] as PromiseRejectedResult).reason as unknown;
        if (reason instanceof ConformanceFailure) throw reason;
        throw new ConformanceFailure(
          `concurrent ensureLoadBalancer of ${concurrency} Services: ${describeError(reason)}`,
        );
      }
      const statuses = settled.map((s) => ingressOf((s as PromiseFulfilledResult<V1LoadBalancerStatus>).value));
      if (!ingressMayRepeat) {
        const seen = new Map<string, number>();
        statuses.forEach((ingress, i) => {
          const key = JSON.stringify(ingress);
          const earlier = seen.get(key);
          expect(
            earlier === undefined,
            `${who(services[earlier ?? 0] as V1Service)} and ${who(services[i] as V1Service)} got the same ingress ${key} (set loadBalancer.ingressMayRepeat if the cloud shares addresses)`,
          );
          seen.set(key, i);
        });
      }
      for (const [i, svc] of services.entries())
        expectEqual(
          ingressOf(await get(context, api, svc)),
          statuses[i],
          `getLoadBalancer(${who(svc)}) after the concurrent ensures`,
        );
      const [first, ...rest] = services;
      if (first !== undefined) await remove(context, api, first, 'of one of the concurrent load balancers');
      for (const [i, svc] of rest.entries())
        expectEqual(
          ingressOf(await get(context, api, svc)),
          statuses[i + 1],
          `getLoadBalancer(${who(svc)}) after deleting another Service's load balancer`,
        );
      return undefined;
    });
  },
};

/** The load balancer checks, in order. */
export const loadBalancerChecks: readonly Check[] = [name, idempotent, agrees, update, deleteMissing, concurrent];
