// Which provider a Node or a Service belongs to, when one cirrus serves several providers (a
// hybrid cluster: bare metal beside a cloud, or two clouds; ADR 0026). The rules are pure and
// cheap: the relay runs them for every change it routes, and every function again before it acts,
// so that no provider is ever asked about, and no function ever writes to, an object another
// provider owns.
//
// A Node's provider, in this order (as KEP-5778, kubernetes/enhancements#5779, proposes explicit
// ownership so that several CCMs can share a cluster):
//   1. the scheme of its spec.providerID (`aws://…` is aws's): set once, by whoever initialized it;
//   2. else the label node.cirrus-ccm.dev/cloud-provider, which the kubelet can set at registration
//      (--node-labels) before any provider ID exists;
//   3. else the default provider, if one is named;
//   4. else nobody: it is left alone (node-init records one Event saying why).
// A scheme or label naming a provider this deployment does not serve is another CCM's Node: nobody
// here owns it, and nothing falls through to the next rule.
//
// A Service's provider: its spec.loadBalancerClass, through the classes the configuration maps to
// providers; a Service without a class belongs to the default provider. A class no provider here
// has belongs to another controller, as upstream's service controller leaves it
// (k8s.io/cloud-provider controllers/service/controller.go, wantsLoadBalancer).

/** The label that names a Node's provider while its spec.providerID does not (ADR 0026). */
export const providerLabel = 'node.cirrus-ccm.dev/cloud-provider';

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
  | { readonly provider: string; readonly by: 'provider-id' | 'label' | 'default' }
  | { readonly provider: undefined; readonly why: string };

/** The parts of a Node the rules read. */
export interface NodeLike {
  readonly metadata?: { readonly labels?: Readonly<Record<string, string>> | undefined } | undefined;
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
  const label = node.metadata?.labels?.[providerLabel];
  if (label !== undefined) return byLabel(ownership, label);
  if (ownership.defaultProvider !== undefined) return { provider: ownership.defaultProvider, by: 'default' };
  return {
    provider: undefined,
    why:
      `it has no spec.providerID, no label ${providerLabel}, and no default provider is configured ` +
      `(--default-provider); label it with one of ${ownership.providers.join(', ')}`,
  };
}

function byProviderId(ownership: Ownership, providerId: string): NodeOwner {
  const scheme = providerIdScheme(providerId);
  if (scheme !== undefined && ownership.providers.includes(scheme)) return { provider: scheme, by: 'provider-id' };
  return {
    provider: undefined,
    why: `its spec.providerID "${providerId}" is not of a provider served here (${ownership.providers.join(', ')})`,
  };
}

function byLabel(ownership: Ownership, label: string): NodeOwner {
  if (ownership.providers.includes(label)) return { provider: label, by: 'label' };
  return {
    provider: undefined,
    why: `its label ${providerLabel}=${label} names no provider served here (${ownership.providers.join(', ')})`,
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
