// A kept run folder (`cirrus cluster --data-dir`, `cirrus start --data-dir`) started again keeps
// its CA, its ServiceAccount keys and its API server's port, so that the clients of the run before
// (a cirrus start's relay, a kubeconfig written then) reconnect to the same address and trust it.

import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { writeServiceAccountKeys } from './components.ts';
import { createCa, createClientCert, createServingCert, type KeyPair } from './pki.ts';
import { freePort, portIsFree } from './processes.ts';

/** What a kept run folder holds of its last run: its CA and the API server's port. */
export interface PreviousRun {
  readonly ca: KeyPair;
  readonly port: number;
}

/** The certificates of a start: the last run's CA (and ServiceAccount keys) in a kept folder, else new ones. */
export async function credentials(
  dir: string,
  ownsDir: boolean,
): Promise<{ previous: PreviousRun | undefined; ca: KeyPair; serving: KeyPair; admin: KeyPair }> {
  const pki = join(dir, 'pki');
  const previous = ownsDir ? undefined : await previousRun(dir);
  const ca = previous?.ca ?? (await createCa(pki));
  const [serving, admin] = await Promise.all([
    createServingCert(ca, pki),
    createClientCert(ca, pki, 'admin', { user: 'cirrus-admin', groups: ['system:masters'] }),
    previous === undefined ? writeServiceAccountKeys(pki) : undefined,
  ]);
  return { previous, ca, serving, admin };
}

// The last run in a kept folder, when its cluster.json, CA and ServiceAccount keys are there.
async function previousRun(dir: string): Promise<PreviousRun | undefined> {
  const text = await readFile(join(dir, 'cluster.json'), 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const info = JSON.parse(text) as { server: string; ca: KeyPair };
  const files = [info.ca.cert, info.ca.key, join(dir, 'pki', 'sa.key'), join(dir, 'pki', 'sa.pub')];
  const present = await Promise.all(
    files.map((file) =>
      readFile(file).then(
        () => true,
        () => false,
      ),
    ),
  );
  const port = Number(new URL(info.server).port);
  return present.every(Boolean) && port > 0 ? { ca: info.ca, port } : undefined;
}

/** The last run's port when it is free again, else one free now. */
export async function portFor(previous: PreviousRun | undefined): Promise<number> {
  if (previous !== undefined && (await portIsFree(previous.port))) return previous.port;
  return freePort();
}
