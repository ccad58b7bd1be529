// Which provider a Node or a Service belongs to (ADR 0026). The rules are pure and cheap: the relay
// runs them for every change it routes in a hybrid cluster, and every function again before it
// acts, with one provider as with several, so that no provider is ever asked about, and no
// function ever writes to, an object another provider (or another CCM) owns.
//
// A Node's provider, in this order — the first of these that the Node carries decides:
//   1. the scheme of its spec.providerID (`aws://…` is aws's): set once, by whoever initialized it;
//   2. else cirrus's label node.cirrus-ccm.dev/cloud-provider, which the kubelet can set at
//      registration (--node-labels) before any provider ID exists;
//   3. else the annotation cloudprovider.kubernetes.io/platform, which the draft of KEP-5778
//      (kubernetes/enhancements#5779, open) has the node lifecycle controller read when a Node has
//      no provider ID;
//   4. else Talos's label node.cloudprovider.kubernetes.io/platform (written by the Talos CCM, or
//      set through a Talos machine config's nodeLabels);
//   5. else the default provider, if one is named (with one provider, that one);
//   6. else nobody: it is left alone (node-init records one Event saying why).
// A scheme, label or annotation naming a provider this deployment does not serve is another CCM's
// Node: nobody here owns it, and nothing falls through to the next rule. A name is compared with
// the providers' names as it is (the provider's name is the scheme of its provider IDs): a Talos
// platform such as `nocloud` or `metal` names no cirrus provider, so such a Node is left alone.
//
// A Service's provider: its spec.loadBalancerClass, through the classes the configuration maps to
// providers; a Service without a class belongs to the default provider. A class no provider here
// has belongs to another controller, as upstream's service controller leaves it
// (k8s.io/cloud-provider controllers/service/controller.go, wantsLoadBalancer).

/** The label that names a Node's provider while its spec.providerID does not (ADR 0026). */
export const providerLabel = 'node.cirrus-ccm.dev/cloud-provider';

/** KEP-5778's draft annotation naming a Node's platform while it has no provider ID. */
export const platformAnnotation = 'cloudprovider.kubernetes.io/platform';

/** The Talos CCM's label naming a Node's platform. */
export const talosPlatformLabel = 'node.cloudprovider.kubernetes.io/platform';

/**
 * Why nobody here owns a Node, as a bounded word (a metric label): the marker that names another
 * provider, or `no-owner` (no marker, no default provider).
 */
export type UnownedReason = 'provider-id' | 'label' | 'platform-annotation' | 'platform-label' | 'no-owner';

/** The ownership rules of one deployment: every provider it serves, whichever instance asks. */
export interface Ownership {
  /** Every provider's name, which is also the scheme of the provider IDs it hands out. */
  readonly providers: readonly string[];
  /** The provider of Nodes with neither a provider ID nor the label, and of Services without a class. */
  readonly defaultProvider?: string | undefined;
  /** spec.loadBalancerClass → the provider whose load balancers serve that class. */
  readonly classes: ReadonlyMap<string, string>;
}

/** How a Node's provider was decided: by whom, or why nobody owns it. */
export type NodeOwner =
  | {
      readonly provider: string;
      readonly by: 'provider-id' | 'label' | 'platform-annotation' | 'platform-label' | 'default';
    }
  | { readonly provider: undefined; readonly reason: UnownedReason; readonly why: string };

/** The parts of a Node the rules read. */
export interface NodeLike {
  readonly metadata?:
    | {
        readonly labels?: Readonly<Record<string, string>> | undefined;
        readonly annotations?: Readonly<Record<string, string>> | undefined;
      }
    | undefined;
  readonly spec?: { readonly providerID?: string | undefined } | undefined;
}

/** The parts of a Service the rules read. */
export interface ServiceLike {
  readonly spec?: { readonly loadBalancerClass?: string | null | undefined } | undefined;
}

/** The scheme of a provider ID (`aws` of `aws:///us-east-1a/i-0abc`); undefined when it has none. */
export function providerIdScheme(providerId: string | undefined): string | undefined {
  if (providerId === undefined || providerId === '') return undefined;
  const at = providerId.indexOf('://');
  return at > 0 ? providerId.slice(0, at) : undefined;
}

/** The provider that owns `node` under `ownership`, or why none does. */
export function nodeOwner(ownership: Ownership, node: NodeLike): NodeOwner {
  const providerId = node.spec?.providerID;
  if (providerId !== undefined && providerId !== '') return byProviderId(ownership, providerId);
  const labels = node.metadata?.labels;
  const marker =
    named(labels, providerLabel, 'label') ??
    named(node.metadata?.annotations, platformAnnotation, 'platform-annotation') ??
    named(labels, talosPlatformLabel, 'platform-label');
  if (marker !== undefined) return byMarker(ownership, marker);
  if (ownership.defaultProvider !== undefined) return { provider: ownership.defaultProvider, by: 'default' };
  return {
    provider: undefined,
    reason: 'no-owner',
    why:
      `it has no spec.providerID, no label ${providerLabel}, and no default provider is configured ` +
      `(--default-provider); label it with one of ${ownership.providers.join(', ')}`,
  };
}

interface Marker {
  readonly key: string;
  readonly value: string;
  readonly by: 'label' | 'platform-annotation' | 'platform-label';
}

function named(from: Readonly<Record<string, string>> | undefined, key: string, by: Marker['by']): Marker | undefined {
  const value = from?.[key];
  return value === undefined ? undefined : { key, value, by };
}

function byProviderId(ownership: Ownership, providerId: string): NodeOwner {
  const scheme = providerIdScheme(providerId);
  if (scheme !== undefined && ownership.providers.includes(scheme)) return { provider: scheme, by: 'provider-id' };
  return {
    provider: undefined,
    reason: 'provider-id',
    why: `its spec.providerID "${providerId}" is not of a provider served here (${ownership.providers.join(', ')})`,
  };
}

function byMarker(ownership: Ownership, { key, value, by }: Marker): NodeOwner {
  if (ownership.providers.includes(value)) return { provider: value, by };
  const what = by === 'platform-annotation' ? 'annotation' : 'label';
  return {
    provider: undefined,
    reason: by,
    why: `its ${what} ${key}=${value} names no provider served here (${ownership.providers.join(', ')})`,
  };
}

/** The provider that serves `service`'s load balancer under `ownership`; undefined for another controller's. */
export function serviceOwner(ownership: Ownership, service: ServiceLike): string | undefined {
  const loadBalancerClass = service.spec?.loadBalancerClass ?? undefined;
  if (loadBalancerClass === undefined) return ownership.defaultProvider;
  return ownership.classes.get(loadBalancerClass);
}

/** The class a provider's Services carry; undefined when it serves only Services without one. */
export function classOf(ownership: Ownership, provider: string): string | undefined {
  for (const [loadBalancerClass, owner] of ownership.classes) if (owner === provider) return loadBalancerClass;
  return undefined;
}

/**
 * Checks `ownership` and returns it: no provider named twice, the default one of them, each class
 * given to one of them, the default given none (it serves the Services without a class) and no
 * provider given two. Throws an Error naming
 * what is wrong.
 */
export function validOwnership(ownership: Ownership): Ownership {
  const { providers, defaultProvider, classes } = ownership;
  const problems: string[] = [];
  const twice = providers.filter((name, i) => providers.indexOf(name) !== i);
  if (twice.length > 0) problems.push(`provider ${twice.join(', ')} named twice`);
  if (defaultProvider !== undefined && !providers.includes(defaultProvider))
    problems.push(`the default provider ${defaultProvider} is not one of ${providers.join(', ')}`);
  const seen = new Map<string, string>();
  for (const [loadBalancerClass, provider] of classes) {
    if (!providers.includes(provider))
      problems.push(`class ${loadBalancerClass} is given to ${provider}, which is not one of ${providers.join(', ')}`);
    if (provider === defaultProvider)
      problems.push(
        `class ${loadBalancerClass} is given to ${provider}, the default provider, which serves the Services without a class`,
      );
    const other = seen.get(provider);
    if (other !== undefined)
      problems.push(`provider ${provider} is given two classes, ${other} and ${loadBalancerClass}`);
    seen.set(provider, loadBalancerClass);
  }
  if (problems.length > 0) throw new Error(problems.join('; '));
  return ownership;
}
