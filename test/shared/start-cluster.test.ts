// Which cluster `cirrus start` acts on (app/cli/start-cluster.ts), decided from its command line and
// environment as the command parses them: whatever the provider, an existing cluster only with
// --use-existing-cluster (issue 38, finding 5: `--cloud-provider fake` with KUBECONFIG set acted on
// that cluster). The deployments run `cirrus start` in a pod with CIRRUS_USE_EXISTING_CLUSTER=true.

import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { commands } from '../../app/cli/commands.ts';
import { planCluster, type ClusterPlan } from '../../app/cli/start-cluster.ts';
import { ConfigError, parseConfig } from '../../app/config.ts';

const inPod = { KUBERNETES_SERVICE_HOST: '10.96.0.1', KUBERNETES_SERVICE_PORT: '443' };
const shell = { KUBECONFIG: '/home/me/.kube/config' };

// The plan for `cirrus start <argv>` with `env`, or the ConfigError's message.
function plan(argv: readonly string[], env: NodeJS.ProcessEnv): ClusterPlan | string {
  const io = {
    stdout: { write: () => true },
    stderr: { write: () => true },
    env,
    signal: new AbortController().signal,
  };
  try {
    const config = parseConfig(commands.start, argv, env);
    return planCluster(config, config.cloudConfig, io);
  } catch (error) {
    if (error instanceof ConfigError) return error.message;
    throw error;
  }
}

// The ConfigError's message, or the plan as JSON where there was none.
function refusal(argv: readonly string[], env: NodeJS.ProcessEnv): string {
  const chosen = plan(argv, env);
  return typeof chosen === 'string' ? chosen : JSON.stringify(chosen);
}

const local = { existing: undefined, leftAlone: undefined };
const providers = [
  ['--cloud-provider', 'fake'],
  ['--cloud-provider', 'static', '--cloud-config', 'inventory.yaml'],
  ['--cloud-provider', 'aws', '--cloud-config', 'cloud.conf'],
  [], // the demo
];

describe('the cluster cirrus start acts on', () => {
  for (const provider of providers) {
    const named = provider.length === 0 ? 'the demo' : provider.slice(0, 2).join(' ');

    it(`${named}: leaves an operator's KUBECONFIG alone without --use-existing-cluster, and says so`, () => {
      const chosen = plan(provider, shell);
      assert.equal(typeof chosen, 'object', JSON.stringify(chosen));
      const { existing, leftAlone } = chosen as ClusterPlan;
      assert.equal(existing, undefined, 'the local control plane');
      assert.match(leftAlone ?? '', /^KUBECONFIG=\/home\/me\/\.kube\/config is not used: .*--use-existing-cluster/);
    });

    it(`${named}: refuses --kubeconfig, and a pod's ServiceAccount, without --use-existing-cluster`, () => {
      assert.match(
        refusal([...provider, '--kubeconfig', '/etc/k'], shell),
        /^--kubeconfig \/etc\/k: .* acts on an existing cluster only with --use-existing-cluster; .*CIRRUS_USE_EXISTING_CLUSTER=true/,
      );
      assert.match(
        refusal(provider, inPod),
        /^this pod's ServiceAccount: .* acts on an existing cluster only with --use-existing-cluster; /,
      );
    });

    it(`${named}: acts on the configured cluster with --use-existing-cluster, or its variable, as deployed`, () => {
      assert.deepEqual(plan([...provider, '--use-existing-cluster'], shell), {
        existing: 'KUBECONFIG=/home/me/.kube/config',
        leftAlone: undefined,
      });
      assert.deepEqual(plan([...provider, '--use-existing-cluster', '--kubeconfig', '/etc/k'], {}), {
        existing: '--kubeconfig /etc/k',
        leftAlone: undefined,
      });
      // deploy/standalone, deploy/knative/bootstrap and the chart: in a pod, the flag from the environment.
      assert.deepEqual(plan(provider, { ...inPod, CIRRUS_USE_EXISTING_CLUSTER: 'true' }), {
        existing: "this pod's ServiceAccount",
        leftAlone: undefined,
      });
    });

    it(`${named}: runs on the local control plane when no cluster is configured`, () => {
      assert.deepEqual(plan(provider, {}), local);
    });
  }
});
