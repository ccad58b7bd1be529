// Access to the run's control plane (started by test/global-setup.ts) from a test file.

import { randomBytes } from 'node:crypto';
import { after, before } from 'node:test';
import { KubeConfig, CoreV1Api } from '@kubernetes/client-node';
import {
  attachControlPlane,
  ControlPlane,
  resolveAssets,
  kubeconfigFor,
  kubeconfigWithToken,
  type ControlPlaneInfo,
  type Identity,
} from '../../tools/control-plane/index.ts';

/**
 * False when the control plane runs; otherwise the reason integration suites skip, for
 * `describe(name, { skip: controlPlaneSkip }, …)`.
 */
export const controlPlaneSkip: string | false =
  process.env['CIRRUS_TEST_CLUSTER'] === undefined
    ? `no control plane: ${process.env['CIRRUS_TEST_CLUSTER_SKIP'] ?? 'run through npm test (test/global-setup.ts starts it)'}`
    : false;

/** The control plane and ways to act on it as different identities. */
export interface TestCluster {
  readonly info: ControlPlaneInfo;
  /** A client configuration for the admin (group system:masters). */
  readonly admin: KubeConfig;
  /** A client configuration for a user authenticated by certificate, with only the rights RBAC gives it. */
  as(identity: Identity): Promise<KubeConfig>;
  /** A client configuration holding a token for ServiceAccount `namespace/name`, created if missing. */
  asServiceAccount(namespace: string, name: string): Promise<KubeConfig>;
}

let cluster: Promise<TestCluster> | undefined;

/** The run's control plane; throws when there is none (guard suites with controlPlaneSkip). */
export function testCluster(): Promise<TestCluster> {
  cluster ??= connect();
  return cluster;
}

async function connect(): Promise<TestCluster> {
  const file = process.env['CIRRUS_TEST_CLUSTER'];
  if (file === undefined) throw new Error(String(controlPlaneSkip));
  const info = await attachControlPlane(file);
  const admin = loadKubeConfig(info.adminKubeconfig);
  return {
    info,
    admin,
    as: async (identity) => loadKubeConfig(await kubeconfigFor(info, identity)),
    asServiceAccount: async (namespace, name) => {
      const core = admin.makeApiClient(CoreV1Api);
      await core.createNamespacedServiceAccount({ namespace, body: { metadata: { name } } }).catch(ignoreConflict);
      const review = await core.createNamespacedServiceAccountToken({
        name,
        namespace,
        body: { spec: { audiences: [], expirationSeconds: 3600 } },
      });
      const token = review.status?.token;
      if (!token) throw new Error(`TokenRequest for ${namespace}/${name} returned no token`);
      return loadKubeConfig(await kubeconfigWithToken(info, `${namespace}-${name}`, token));
    },
  };
}

function loadKubeConfig(path: string): KubeConfig {
  const config = new KubeConfig();
  config.loadFromFile(path);
  return config;
}

function ignoreConflict(error: unknown): void {
  if ((error as { code?: number }).code !== 409) throw error;
}

/** A name no other test uses: `prefix-` and 8 hex digits. */
export function uniqueName(prefix: string): string {
  return `${prefix}-${randomBytes(4).toString('hex')}`;
}

/** A control plane of one suite's own: its admin client, set once the suite's `before` ran. */
export interface OwnControlPlane {
  admin: KubeConfig;
  core: CoreV1Api;
}

/**
 * Starts a control plane of the calling suite's own before its tests and stops it after them, for
 * suites that watch the whole cluster (on the shared one, other test files' objects would reach
 * them, or theirs others'). Call it inside `describe`.
 */
export function ownControlPlane(): OwnControlPlane {
  const own = {} as OwnControlPlane;
  let plane: ControlPlane | undefined;
  before(async () => {
    plane = await ControlPlane.start({ assets: await resolveAssets({ build: false }) });
    own.admin = loadKubeConfig(plane.info.adminKubeconfig);
    own.core = own.admin.makeApiClient(CoreV1Api);
  });
  after(() => plane?.stop());
  return own;
}

/**
 * A client of an API server that is not there (a closed port): any request through it fails, so a
 * reconcile that succeeds with it made none.
 */
export function offlineCore(): CoreV1Api {
  const config = new KubeConfig();
  config.loadFromClusterAndUser({ name: 'offline', server: 'http://127.0.0.1:9', skipTLSVerify: true }, { name: 'u' });
  return config.makeApiClient(CoreV1Api);
}
