// Routes: what the route controller relies on (k8s.io/cloud-provider
// controllers/route/route_controller.go, reconcile): a created route is listed with its CIDR and
// target, a deleted one is gone, deleting one that is not there succeeds, and a route whose target
// is gone is flagged blackhole (the controller deletes those in its range). Every route a check
// creates is deleted when it ends.

import type { V1Node } from '@kubernetes/client-node';
import type { Route, Routes } from '../../../shared/cloud/provider.ts';
import { expect, frozen, show, skip, succeeds, type Check, type CheckContext, type Skip } from '../check.ts';
import { nodeOf, resolveNode } from '../fixture.ts';

interface Target {
  readonly node: V1Node;
  readonly route: Route;
}

function api(context: CheckContext): Routes | Skip {
  return context.provider.routes() ?? skip('the provider does not support routes() (it answers undefined)');
}

function targets(context: CheckContext): Target[] {
  return context.fixture.routes.targets.map(({ node: ref, podCidr }) => {
    const node = frozen(nodeOf(resolveNode(context.fixture, ref), podCidr));
    const route: Route = {
      name: '',
      targetNode: node.metadata?.name ?? '',
      enableNodeAddresses: false,
      targetNodeAddresses: node.status?.addresses ?? [],
      destinationCidr: podCidr,
      blackhole: false,
    };
    return { node, route: frozen(route) };
  });
}

const noTargets = skip('the fixture names no route targets (routes.targets: a Node and a pod CIDR each)');

async function list(context: CheckContext, routes: Routes): Promise<Route[]> {
  const listed = await succeeds(`listRoutes(${context.clusterName})`, () => routes.listRoutes(context.clusterName));
  expect(Array.isArray(listed), `listRoutes(${context.clusterName}) answered ${show(listed)}, not a list`);
  return listed;
}

function withCidr(routes: readonly Route[], cidr: string): Route[] {
  return routes.filter((r) => r.destinationCidr === cidr);
}

async function create(context: CheckContext, routes: Routes, target: Target): Promise<Route | Skip> {
  const cidr = target.route.destinationCidr;
  if (withCidr(await list(context, routes), cidr).length > 0)
    return skip(`the cloud already has a route for ${cidr}: give routes.targets a pod CIDR no route uses`);
  const nameHint = target.node.metadata?.uid ?? '';
  await succeeds(`createRoute(${context.clusterName}, ${nameHint}, ${cidr} → ${target.route.targetNode})`, () =>
    routes.createRoute(context.clusterName, nameHint, target.route),
  );
  const found = withCidr(await list(context, routes), cidr);
  expect(
    found.length === 1,
    `after createRoute(${cidr} → ${target.route.targetNode}), listRoutes has ${found.length} routes for ${cidr}`,
  );
  return found[0] as Route;
}

async function withRoutes(
  context: CheckContext,
  body: (routes: Routes, all: Target[]) => Promise<Skip | undefined>,
): Promise<Skip | undefined> {
  const routes = api(context);
  if ('skipped' in routes) return routes;
  const all = targets(context);
  if (all.length === 0) return noTargets;
  try {
    return await body(routes, all);
  } finally {
    const cidrs = new Set(all.map((t) => t.route.destinationCidr));
    const left = await routes.listRoutes(context.clusterName).catch(() => []);
    await Promise.allSettled(
      left.filter((r) => cidrs.has(r.destinationCidr)).map((r) => routes.deleteRoute(context.clusterName, r)),
    );
  }
}

const createList: Check = {
  id: 'routes.create-list',
  rule: 'A route made with createRoute() is listed by listRoutes() with the given destination CIDR and target node, and not as a blackhole.',
  source:
    'shared/cloud/provider.ts Routes.createRoute, listRoutes, Route; k8s.io/cloud-provider cloud.go Routes, controllers/route/route_controller.go reconcile',
  run: (context) =>
    withRoutes(context, async (routes, all) => {
      for (const target of all) {
        const found = await create(context, routes, target);
        if ('skipped' in found) return found;
        const cidr = target.route.destinationCidr;
        expect(
          found.targetNode === target.route.targetNode,
          `listRoutes() has the route for ${cidr} with target "${found.targetNode}", want "${target.route.targetNode}"`,
        );
        const blackhole: unknown = found.blackhole;
        expect(blackhole !== true, `listRoutes() has the new route for ${cidr} to a live Node as a blackhole`);
        expect(typeof found.name === 'string', `listRoutes() has the route for ${cidr} with name ${show(found.name)}`);
      }
      return undefined;
    }),
};

const remove: Check = {
  id: 'routes.delete',
  rule: 'deleteRoute() of a route as listRoutes() answered it removes it: it is no longer listed.',
  source:
    'shared/cloud/provider.ts Routes.deleteRoute; k8s.io/cloud-provider cloud.go Routes, controllers/route/route_controller.go reconcile',
  run: (context) =>
    withRoutes(context, async (routes, all) => {
      const target = all[0] as Target;
      const found = await create(context, routes, target);
      if ('skipped' in found) return found;
      const cidr = target.route.destinationCidr;
      await succeeds(`deleteRoute(${cidr})`, () => routes.deleteRoute(context.clusterName, found));
      const left = withCidr(await list(context, routes), cidr);
      expect(left.length === 0, `after deleteRoute(${cidr}), listRoutes() still has ${show(left)}`);
      return undefined;
    }),
};

const deleteMissing: Check = {
  id: 'routes.delete-missing',
  rule: 'deleteRoute() of a route that does not exist succeeds.',
  source:
    'shared/cloud/provider.ts Routes.deleteRoute; k8s.io/cloud-provider controllers/route/route_controller.go reconcile (deletes race with other reconciles)',
  run: (context) =>
    withRoutes(context, async (routes, all) => {
      const target = all[0] as Target;
      const absent: Route = { ...target.route, name: context.name('absent') };
      const cidr = absent.destinationCidr;
      if (withCidr(await list(context, routes), cidr).length > 0)
        return skip(`the cloud already has a route for ${cidr}: give routes.targets a pod CIDR no route uses`);
      await succeeds(`deleteRoute(${cidr}) of a route that does not exist`, () =>
        routes.deleteRoute(context.clusterName, frozen(absent)),
      );
      await succeeds(`deleteRoute(${cidr}) of a route that does not exist, again`, () =>
        routes.deleteRoute(context.clusterName, frozen(absent)),
      );
      return undefined;
    }),
};

const blackhole: Check = {
  id: 'routes.blackhole',
  rule: 'A route whose target is gone is listed with blackhole: true, so the route controller deletes it.',
  source:
    'shared/cloud/provider.ts Route.blackhole; k8s.io/cloud-provider cloud.go Route, controllers/route/route_controller.go reconcile',
  run: async (context) => {
    const routes = api(context);
    if ('skipped' in routes) return routes;
    const wanted = context.fixture.routes.blackholes;
    if (wanted.length === 0)
      return skip('the fixture names no blackhole route (routes.blackholes: routes whose target is gone)');
    const listed = await list(context, routes);
    for (const { destinationCidr } of wanted) {
      const found = withCidr(listed, destinationCidr);
      expect(
        found.length > 0,
        `listRoutes() has no route for ${destinationCidr}, which the fixture lists as a blackhole`,
      );
      expect(
        found.every((r) => r.blackhole),
        `listRoutes() has the route for ${destinationCidr}, whose target is gone, with blackhole: false`,
      );
    }
    return undefined;
  },
};

/** The route checks, in order. */
export const routeChecks: readonly Check[] = [createList, remove, deleteMissing, blackhole];
