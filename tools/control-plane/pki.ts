// The control plane's certificates, minted with the `openssl` CLI (OpenSSL >= 3.0 for `req -CA`):
// one CA that signs the API server's serving certificate and every client certificate, so a test
// can become any user in any groups (user = CN, groups = O) by asking for a certificate.

import { execFile } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

/** A certificate and its private key, as files. */
export interface KeyPair {
  readonly cert: string;
  readonly key: string;
}

/** A user as the API server's X.509 authenticator sees it. */
export interface Identity {
  readonly user: string;
  readonly groups?: readonly string[];
}

const validityDays = '30';
const keyArgs = ['-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:P-256', '-nodes'];

/** Creates a self-signed CA in `dir`. */
export async function createCa(dir: string): Promise<KeyPair> {
  const pair = { cert: join(dir, 'ca.crt'), key: join(dir, 'ca.key') };
  await openssl([
    'req',
    '-x509',
    ...keyArgs,
    '-keyout',
    pair.key,
    '-out',
    pair.cert,
    '-days',
    validityDays,
    '-subj',
    '/CN=cirrus-test-ca',
    '-addext',
    'keyUsage=critical,keyCertSign,cRLSign',
  ]);
  return pair;
}

/** A serving certificate for the API server on loopback. */
export async function createServingCert(ca: KeyPair, dir: string): Promise<KeyPair> {
  return signed(ca, join(dir, 'apiserver'), '/CN=kube-apiserver', [
    'subjectAltName=IP:127.0.0.1,IP:::1,DNS:localhost',
    'extendedKeyUsage=serverAuth',
  ]);
}

/** A client certificate for `identity`, written as `<dir>/<fileName>.{crt,key}`. */
export async function createClientCert(
  ca: KeyPair,
  dir: string,
  fileName: string,
  identity: Identity,
): Promise<KeyPair> {
  return signed(ca, join(dir, fileName), subject(identity), ['extendedKeyUsage=clientAuth']);
}

/** Reads a pair's files as base64, the form kubeconfig `*-data` fields take. */
export async function asBase64(pair: KeyPair): Promise<{ cert: string; key: string }> {
  const [cert, key] = await Promise.all([readFile(pair.cert), readFile(pair.key)]);
  return { cert: cert.toString('base64'), key: key.toString('base64') };
}

async function signed(ca: KeyPair, base: string, subj: string, extensions: string[]): Promise<KeyPair> {
  const pair = { cert: `${base}.crt`, key: `${base}.key` };
  await openssl([
    'req',
    '-x509',
    ...keyArgs,
    '-keyout',
    pair.key,
    '-out',
    pair.cert,
    '-days',
    validityDays,
    '-subj',
    subj,
    '-CA',
    ca.cert,
    '-CAkey',
    ca.key,
    '-addext',
    'basicConstraints=critical,CA:FALSE',
    ...extensions.flatMap((e) => ['-addext', e]),
  ]);
  return pair;
}

// Kubernetes names contain ':' (system:serviceaccount:ns:name) and '.', which `-subj` takes as
// they are; '/', ',', '+', '=' and '\' would need escaping and never occur in user or group names.
const safeName = /^[A-Za-z0-9:._@-]+$/;

/** The `-subj` for an identity; throws on names the subject syntax cannot carry unescaped. */
export function subject(identity: Identity): string {
  const names = [identity.user, ...(identity.groups ?? [])];
  const bad = names.find((n) => !safeName.test(n));
  if (bad !== undefined) throw new Error(`certificate subject: '${bad}' may only contain letters, digits and ":._@-"`);
  return `/CN=${identity.user}${(identity.groups ?? []).map((g) => `/O=${g}`).join('')}`;
}

async function openssl(args: string[]): Promise<void> {
  try {
    await run('openssl', args);
  } catch (error) {
    const stderr = (error as { stderr?: string }).stderr ?? '';
    throw new Error(`openssl ${args.slice(0, 2).join(' ')} failed: ${stderr.trim() || String(error)}`, {
      cause: error,
    });
  }
}
