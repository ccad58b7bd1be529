// Routes to pod CIDRs in the cluster's VPC route table: `RouteTableID` from the cloud-config, or
// the one table in the VPC tagged for the cluster. A route's target is an instance; a Node's
// instance is the one its provider ID names, and an instance's Node the one whose provider ID
// names it (./node-names.ts, as upstream's node informer); a Node without a provider ID is found by
// its name as upstream falls back to it (a resource name `i-…`, or the private DNS name). A route
// whose instance is gone is reported as a blackhole, whatever state EC2 gives it yet, so that the
// routes function deletes it when it is in the cluster CIDR. IPv4 only, as upstream.

import {
  CreateRouteCommand,
  DeleteRouteCommand,
  DescribeRouteTablesCommand,
  ModifyInstanceAttributeCommand,
  type Instance,
  type Route as Ec2Route,
  type RouteTable,
} from '@aws-sdk/client-ec2';
import { InstanceNotFoundError } from '../../shared/cloud/errors.ts';
import type { Route, Routes } from '../../shared/cloud/provider.ts';
import { abortable, errorCode, required, type AwsApi } from './api.ts';
import type { AwsConfig } from './config.ts';
import type { AwsInstances } from './instances.ts';
import type { NodeNames } from './node-names.ts';
import { clusterTagKey, hasClusterTag } from './tags.ts';

export class AwsRoutes implements Routes {
  readonly #api: AwsApi;
  readonly #config: AwsConfig;
  readonly #instances: AwsInstances;
  readonly #nodes: NodeNames;

  constructor(api: AwsApi, config: AwsConfig, instances: AwsInstances, nodes: NodeNames) {
    this.#api = api;
    this.#config = config;
    this.#instances = instances;
    this.#nodes = nodes;
  }

  async listRoutes(clusterName: string, signal?: AbortSignal): Promise<Route[]> {
    const table = await this.#table(signal);
    const routes = (table.Routes ?? []).filter(isInstanceRoute);
    const names = routes.length === 0 ? new Map<string, string>() : await this.#nodes.byInstanceId();
    const instances = await Promise.all(
      routes.map(async (r) =>
        r.State === 'blackhole' || r.InstanceId === undefined
          ? undefined
          : this.#instances.find({ spec: { providerID: r.InstanceId } }, signal),
      ),
    );
    return routes.map((r, i) => {
      const instance = instances[i];
      const gone = instance === undefined || instance.State?.Name === 'terminated';
      return {
        name: `${clusterName}-${r.DestinationCidrBlock}`,
        targetNode: gone ? '' : (names.get(instance.InstanceId ?? '') ?? instance.PrivateDnsName ?? ''),
        enableNodeAddresses: false,
        targetNodeAddresses: [],
        destinationCidr: r.DestinationCidrBlock,
        blackhole: gone,
      };
    });
  }

  async createRoute(_clusterName: string, _nameHint: string, route: Route, signal?: AbortSignal): Promise<void> {
    if (route.destinationCidr.includes(':'))
      throw new Error(`route ${route.destinationCidr}: the aws provider makes IPv4 routes only`);
    const instance = await this.#liveInstance(route.targetNode, signal);
    const instanceId = instance.InstanceId;
    // Pod traffic leaves the instance with addresses that are not its own.
    if (instance.SourceDestCheck !== false) {
      await this.#api.ec2.send(
        new ModifyInstanceAttributeCommand({ InstanceId: instanceId, SourceDestCheck: { Value: false } }),
        abortable(signal),
      );
    }
    const table = await this.#table(signal);
    const tableId = required(table.RouteTableId, "the route table's RouteTableId");
    const existing = table.Routes?.find((r) => r.DestinationCidrBlock === route.destinationCidr);
    if (existing?.InstanceId === instanceId && existing.State !== 'blackhole') return;
    if (existing !== undefined) {
      // A blackhole, or a route to another instance: the CIDR now belongs to this Node.
      await this.#deleteRoute(tableId, route.destinationCidr, signal);
    }
    await this.#createRoute(tableId, route.destinationCidr, instanceId, signal);
  }

  /** The instance of Node `name` (by its provider ID; else a resource name `i-…` or a private DNS name of the cluster's), not terminated. */
  async #liveInstance(name: string, signal: AbortSignal | undefined): Promise<Instance & { InstanceId: string }> {
    const providerId = await this.#nodes.instanceIdOf(name);
    const instance =
      providerId !== undefined
        ? await this.#instances.find({ spec: { providerID: providerId } }, signal)
        : name.startsWith('i-')
          ? await this.#instances.find({ metadata: { name } }, signal)
          : await this.#instances.byPrivateDnsName(name, signal);
    const instanceId = instance?.InstanceId;
    if (instanceId === undefined || instance?.State?.Name === 'terminated') {
      throw new InstanceNotFoundError(`no instance of cluster ${this.#config.clusterId} for Node ${name}`);
    }
    return { ...instance, InstanceId: instanceId };
  }

  /** CreateRoute; a route that appeared meanwhile is fine when it points at the same instance. */
  async #createRoute(
    tableId: string,
    cidr: string,
    instanceId: string,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    try {
      await this.#api.ec2.send(
        new CreateRouteCommand({ RouteTableId: tableId, DestinationCidrBlock: cidr, InstanceId: instanceId }),
        abortable(signal),
      );
    } catch (error) {
      if (errorCode(error) !== 'RouteAlreadyExists') throw error;
      const again = await this.#table(signal);
      const now = again.Routes?.find((r) => r.DestinationCidrBlock === cidr);
      if (now?.InstanceId !== instanceId) {
        throw new Error(
          `route ${cidr} in ${tableId} points at ${now?.InstanceId ?? 'something else'}, not ${instanceId}`,
          { cause: error },
        );
      }
    }
  }

  async deleteRoute(_clusterName: string, route: Route, signal?: AbortSignal): Promise<void> {
    const table = await this.#table(signal);
    await this.#deleteRoute(
      required(table.RouteTableId, "the route table's RouteTableId"),
      route.destinationCidr,
      signal,
    );
  }

  async #deleteRoute(tableId: string, cidr: string, signal: AbortSignal | undefined): Promise<void> {
    try {
      await this.#api.ec2.send(
        new DeleteRouteCommand({ RouteTableId: tableId, DestinationCidrBlock: cidr }),
        abortable(signal),
      );
    } catch (error) {
      if (errorCode(error) !== 'InvalidRoute.NotFound') throw error;
    }
  }

  /** The cluster's route table: the configured one, or the one in the VPC with the cluster's tag. */
  async #table(signal: AbortSignal | undefined): Promise<RouteTable> {
    const { routeTableId, vpc, clusterId } = this.#config;
    const filters =
      routeTableId !== undefined
        ? [{ Name: 'route-table-id', Values: [routeTableId] }]
        : [
            { Name: 'vpc-id', Values: [vpc] },
            { Name: 'tag-key', Values: [clusterTagKey(clusterId)] },
          ];
    const out = await this.#api.ec2.send(new DescribeRouteTablesCommand({ Filters: filters }), abortable(signal));
    const tables = (out.RouteTables ?? []).filter(
      (t) => routeTableId !== undefined || hasClusterTag(t.Tags, clusterId),
    );
    const where = routeTableId ?? `VPC ${vpc} with tag ${clusterTagKey(clusterId)}`;
    const [table] = tables;
    if (table === undefined) throw new Error(`no route table ${where}`);
    if (tables.length > 1) {
      throw new Error(`${tables.length} route tables in ${where}: set RouteTableID in the cloud-config to choose one`);
    }
    return table;
  }
}

/** A route to an instance, or a blackhole: the routes this provider reports (others are the VPC's own). */
function isInstanceRoute(r: Ec2Route): r is Ec2Route & { DestinationCidrBlock: string } {
  return r.DestinationCidrBlock !== undefined && (r.State === 'blackhole' || r.InstanceId !== undefined);
}
