// The ApiServerSource wiring runs the functions unsigned, so its NetworkPolicy is what keeps other
// pods from calling them: it must select every function's pods, and admit the sources' adapters
// (by the labels Knative gives them) and Knative Serving's data plane, and no one else.

import assert from 'node:assert/strict';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { build, knativeRoot, type KubeObject } from './kustomize.ts';

interface Selector {
  readonly matchLabels?: Record<string, string>;
  readonly matchExpressions?: readonly { key: string; operator: string; values?: readonly string[] }[];
}

interface Peer {
  readonly podSelector?: Selector;
  readonly namespaceSelector?: Selector;
}

interface Policy {
  readonly podSelector: Selector;
  readonly policyTypes: readonly string[];
  readonly ingress: readonly { from?: readonly Peer[]; ports?: unknown }[];
}

/** A pod somewhere: its namespace's labels and its own. */
interface Pod {
  readonly namespace: string;
  readonly labels: Record<string, string>;
}

// As the API server reads a label selector; an operator this test does not know fails it.
function matches(selector: Selector, labels: Record<string, string>): boolean {
  const byLabel = Object.entries(selector.matchLabels ?? {}).every(([key, value]) => labels[key] === value);
  return (
    byLabel &&
    (selector.matchExpressions ?? []).every(({ key, operator, values = [] }) => {
      const value = labels[key];
      if (operator === 'In') return value !== undefined && values.includes(value);
      if (operator === 'Exists') return value !== undefined;
      throw new Error(`operator ${operator} not read by this test`);
    })
  );
}

// A peer without namespaceSelector is the policy's own namespace; with one, the namespaces it selects.
function admits(policy: Policy, policyNamespace: string, pod: Pod): boolean {
  const namespaceLabels = { 'kubernetes.io/metadata.name': pod.namespace };
  return policy.ingress.some((rule) =>
    (rule.from ?? []).some((peer) => {
      const inNamespace =
        peer.namespaceSelector === undefined
          ? pod.namespace === policyNamespace
          : matches(peer.namespaceSelector, namespaceLabels);
      return inNamespace && matches(peer.podSelector ?? {}, pod.labels);
    }),
  );
}

describe('deploy/knative/apiserversource: the NetworkPolicy', () => {
  const objects = build(join(knativeRoot, 'apiserversource'));
  const policies = objects.filter((object) => object.kind === 'NetworkPolicy');
  const only = policies[0] as (KubeObject & { spec: Policy }) | undefined;
  const namespace = only?.metadata.namespace ?? '';
  const policy = (): Policy => {
    assert.equal(policies.length, 1, 'one NetworkPolicy');
    assert.ok(only);
    return only.spec;
  };
  const ofKind = (kind: string): KubeObject[] => objects.filter((object) => object.kind === kind);

  it('selects the pods of every function, for ingress, in their namespace', () => {
    const functions = ofKind('Service').filter((object) => object.apiVersion === 'serving.knative.dev/v1');
    assert.equal(functions.length, 4);
    for (const service of functions) {
      const template = (service['spec'] as { template: { metadata: { labels: Record<string, string> } } }).template;
      assert.equal(service.metadata.namespace, namespace, service.metadata.name);
      assert.ok(matches(policy().podSelector, template.metadata.labels), `selects ${service.metadata.name}`);
    }
    assert.deepEqual(policy().policyTypes, ['Ingress']);
    assert.ok(
      policy().ingress.every((rule) => (rule.from ?? []).length > 0),
      'no rule admits every source (a rule without from)',
    );
  });

  it("admits each ApiServerSource's adapter, labelled as Knative labels it, and the PingSource adapter", () => {
    const sources = ofKind('ApiServerSource');
    assert.equal(sources.length, 4);
    for (const source of sources) {
      const adapter = {
        namespace: source.metadata.namespace ?? '',
        labels: {
          'eventing.knative.dev/source': 'apiserver-source-controller',
          'eventing.knative.dev/sourceName': source.metadata.name,
        },
      };
      assert.ok(admits(policy(), namespace, adapter), `admits the adapter of ${source.metadata.name}`);
    }
    assert.ok(ofKind('PingSource').length > 0);
    const ping = {
      namespace: 'knative-eventing',
      labels: {
        'eventing.knative.dev/source': 'ping-source-controller',
        'sources.knative.dev/role': 'adapter',
        'app.kubernetes.io/component': 'pingsource-mt-adapter',
      },
    };
    assert.ok(admits(policy(), namespace, ping), 'admits pingsource-mt-adapter');
  });

  it("admits Knative Serving's data plane, which carries the sources' requests", () => {
    for (const pod of [
      { namespace: 'knative-serving', labels: { app: 'activator', role: 'activator' } },
      { namespace: 'knative-serving', labels: { app: 'autoscaler' } },
      { namespace: 'kourier-system', labels: { app: '3scale-kourier-gateway' } },
    ]) {
      assert.ok(admits(policy(), namespace, pod), `admits ${pod.namespace} ${pod.labels.app}`);
    }
  });

  it('admits no one else: other sources, other pods, the same labels in other namespaces', () => {
    const strangers: Pod[] = [
      // Someone else's ApiServerSource in the same namespace, watching what they like.
      {
        namespace,
        labels: {
          'eventing.knative.dev/source': 'apiserver-source-controller',
          'eventing.knative.dev/sourceName': 'x',
        },
      },
      // An ApiServerSource adapter of another namespace, named like one of cirrus's.
      {
        namespace: 'mallory',
        labels: {
          'eventing.knative.dev/source': 'apiserver-source-controller',
          'eventing.knative.dev/sourceName': 'cirrus-node-init-nodes',
        },
      },
      // Pods copying the PingSource adapter's or Knative's labels outside their namespaces.
      {
        namespace: 'mallory',
        labels: { 'eventing.knative.dev/source': 'ping-source-controller', 'sources.knative.dev/role': 'adapter' },
      },
      { namespace: 'mallory', labels: { app: 'activator' } },
      { namespace: 'mallory', labels: { app: '3scale-kourier-gateway' } },
      // Other pods of Knative's namespaces, and the functions themselves.
      { namespace: 'knative-eventing', labels: { app: 'eventing-controller' } },
      { namespace: 'knative-serving', labels: { app: 'controller' } },
      { namespace, labels: { 'app.kubernetes.io/component': 'service-lb', 'app.kubernetes.io/name': 'cirrus' } },
      { namespace: 'default', labels: {} },
    ];
    for (const pod of strangers) {
      assert.equal(admits(policy(), namespace, pod), false, `admits ${JSON.stringify(pod)}`);
    }
  });
});
