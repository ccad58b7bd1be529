// Kubeconfigs for a local control plane: an identity's client certificate from its CA, or a bearer
// token. A kubeconfig is YAML, and JSON is YAML: kubectl and @kubernetes/client-node both read these.

import { randomBytes } from 'node:crypto';
import { readFile, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import { asBase64, createClientCert, type Identity, type KeyPair } from './pki.ts';

/** Where a control plane serves and what it trusts: what a kubeconfig for it needs. */
export interface ClusterAccess {
  /** The API server's URL. */
  readonly server: string;
  readonly ca: KeyPair;
  /** The run folder: written kubeconfigs and certificates go there. */
  readonly dir: string;
}

/**
 * Writes a kubeconfig in which `identity` authenticates by a client certificate from the control
 * plane's CA, and returns its path. The identity has no rights beyond what RBAC grants it.
 */
export async function kubeconfigFor(info: ClusterAccess, identity: Identity): Promise<string> {
  const fileName = `user-${identity.user.replaceAll(':', '_')}-${randomBytes(4).toString('hex')}`;
  const pair = await createClientCert(info.ca, join(info.dir, 'pki'), fileName, identity);
  const path = join(info.dir, `${fileName}.kubeconfig`);
  await writeKubeconfig(info, pair, path);
  return path;
}

/** Writes a kubeconfig that authenticates with a bearer token (a ServiceAccount token, say). */
export async function kubeconfigWithToken(info: ClusterAccess, name: string, token: string): Promise<string> {
  const path = join(info.dir, `token-${name.replaceAll(':', '_')}-${randomBytes(4).toString('hex')}.kubeconfig`);
  const ca = (await readFile(info.ca.cert)).toString('base64');
  await writeFile(path, JSON.stringify(kubeconfigDocument(info.server, ca, name, { token })), { mode: 0o600 });
  return path;
}

export async function writeKubeconfig(
  info: Pick<ClusterAccess, 'server' | 'ca'>,
  pair: KeyPair,
  path: string,
  cluster = 'cirrus',
): Promise<void> {
  const ca = (await readFile(info.ca.cert)).toString('base64');
  const { cert, key } = await asBase64(pair);
  const user = { 'client-certificate-data': cert, 'client-key-data': key };
  await writeFile(path, JSON.stringify(kubeconfigDocument(info.server, ca, cluster, user)), { mode: 0o600 });
}

// A kubeconfig is YAML, and JSON is YAML: kubectl and @kubernetes/client-node both read this.
function kubeconfigDocument(server: string, caData: string, name: string, user: Record<string, string>): object {
  return {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name, cluster: { server, 'certificate-authority-data': caData } }],
    users: [{ name, user }],
    contexts: [{ name, context: { cluster: name, user: name } }],
    'current-context': name,
  };
}
