// A target group's targets brought to the node set: deregister those that should not be there,
// then register the missing ones that AWS accepts (running or pending instances); nothing when
// they match.

import {
  DeregisterTargetsCommand,
  DescribeTargetHealthCommand,
  RegisterTargetsCommand,
} from '@aws-sdk/client-elastic-load-balancing-v2';
import { abortable, type AwsApi } from './api.ts';
import type { AwsInstances } from './instances.ts';

/** ELBv2 takes at most this many targets per Register/DeregisterTargets. */
const TARGETS_PER_CALL = 100;

/** What syncTargets needs to know of a target group. */
export interface TargetSync {
  readonly groupArn: string;
  /** The NodePort the targets listen on. */
  readonly port: number;
  /** The instance IDs that should be targets. */
  readonly wanted: readonly string[];
  /** The registered targets when known without asking (a group just created has none). */
  readonly current?: ReadonlySet<string>;
}

export class TargetSyncer {
  readonly #api: AwsApi;
  readonly #instances: AwsInstances;

  constructor(api: AwsApi, instances: AwsInstances) {
    this.#api = api;
    this.#instances = instances;
  }

  /** `group.current` is given for a target group just created (known empty: no DescribeTargetHealth). */
  async sync(group: TargetSync, signal: AbortSignal | undefined): Promise<void> {
    const { groupArn, port } = group;
    const current = group.current ?? (await this.#registered(groupArn, signal));
    const want = new Set(group.wanted);
    const stale = [...current].filter((id) => !want.has(id));
    for (let i = 0; i < stale.length; i += TARGETS_PER_CALL) {
      await this.#api.elbv2.send(
        new DeregisterTargetsCommand({
          TargetGroupArn: groupArn,
          Targets: stale.slice(i, i + TARGETS_PER_CALL).map((Id) => ({ Id, Port: port })),
        }),
        abortable(signal),
      );
    }
    const missing = await this.#registrable(
      [...want].filter((id) => !current.has(id)),
      signal,
    );
    for (let i = 0; i < missing.length; i += TARGETS_PER_CALL) {
      await this.#api.elbv2.send(
        new RegisterTargetsCommand({
          TargetGroupArn: groupArn,
          Targets: missing.slice(i, i + TARGETS_PER_CALL).map((Id) => ({ Id, Port: port })),
        }),
        abortable(signal),
      );
    }
  }

  async #registered(groupArn: string, signal: AbortSignal | undefined): Promise<Set<string>> {
    const health = await this.#api.elbv2.send(
      new DescribeTargetHealthCommand({ TargetGroupArn: groupArn }),
      abortable(signal),
    );
    return new Set(
      (health.TargetHealthDescriptions ?? [])
        .filter((d) => d.TargetHealth?.Reason !== 'Target.DeregistrationInProgress')
        .map((d) => d.Target?.Id ?? ''),
    );
  }

  /**
   * The instances among `ids` that AWS lets be registered: running or pending ones (a stopped
   * node's Node is still in the node set; AWS refuses its instance as a new target). One
   * DescribeInstances for all of them, through the instances' batcher.
   */
  async #registrable(ids: readonly string[], signal: AbortSignal | undefined): Promise<string[]> {
    if (ids.length === 0) return [];
    const instances = await Promise.all(ids.map((id) => this.#instances.find({ spec: { providerID: id } }, signal)));
    return ids.filter((_, i) => ['running', 'pending'].includes(instances[i]?.State?.Name ?? ''));
  }
}
