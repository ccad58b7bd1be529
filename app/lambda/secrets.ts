// Secrets on AWS Lambda: read from Secrets Manager through the AWS Parameters and Secrets Lambda
// Extension (a layer serving http://localhost:2773, caching what it fetched), so that no AWS SDK
// is loaded into the function. A caller proves it runs in the function's sandbox with the
// sandbox's session token in X-Aws-Parameters-Secrets-Token.
//
// The values are written to files in a private folder, so that the rest of cirrus reads them as
// it reads --kubeconfig, --cloud-config and --signing-secret-file anywhere else.

import { chmod, mkdtemp, writeFile } from 'node:fs/promises';
import { get } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { z } from 'zod';
import { ConfigError, envName, type OptionName } from '../config.ts';

/** Where secrets come from: the value of secret `id`, or a rejection that names it and why. */
export interface SecretStore {
  read(id: string): Promise<string>;
}

/** The extension's default port (PARAMETERS_SECRETS_EXTENSION_HTTP_PORT changes it). */
export const defaultExtensionPort = 2773;

// Attempts per secret: the extension answers "not ready" for a moment after the sandbox starts.
const attempts = 4;
const firstDelayMs = 50;
const requestTimeoutMs = 10_000;

// What GET /secretsmanager/get answers: Secrets Manager's GetSecretValue output.
const secretValue = z.union([z.object({ SecretString: z.string() }), z.object({ SecretBinary: z.base64() })]);

/** The extension of the sandbox that `env` describes (AWS_SESSION_TOKEN, PARAMETERS_SECRETS_EXTENSION_HTTP_PORT). */
export function extensionSecretStore(env: NodeJS.ProcessEnv): SecretStore {
  const port = env['PARAMETERS_SECRETS_EXTENSION_HTTP_PORT'] ?? String(defaultExtensionPort);
  const token = env['AWS_SESSION_TOKEN'];
  return {
    async read(id) {
      if (token === undefined || token === '') {
        throw new Error(
          'AWS_SESSION_TOKEN is not set: the secrets extension only answers a caller in a Lambda sandbox',
        );
      }
      const url = new URL(`http://localhost:${port}/secretsmanager/get`);
      url.searchParams.set('secretId', id);
      const text = await fetchWithRetry(url, { 'X-Aws-Parameters-Secrets-Token': token });
      let answer: unknown;
      try {
        answer = JSON.parse(text);
      } catch {
        throw new Error(`the secrets extension answered something other than JSON: ${text.slice(0, 80)}`);
      }
      const parsed = secretValue.safeParse(answer);
      if (!parsed.success) throw new Error('the secrets extension answered without SecretString or SecretBinary');
      return 'SecretString' in parsed.data
        ? parsed.data.SecretString
        : Buffer.from(parsed.data.SecretBinary, 'base64').toString('utf8');
    },
  };
}

async function fetchWithRetry(url: URL, headers: Record<string, string>): Promise<string> {
  let last = '';
  for (let attempt = 1; attempt <= attempts; attempt += 1) {
    try {
      const response = await getText(url, headers);
      if (response.status >= 200 && response.status < 300) return response.body;
      last = `${String(response.status)} ${response.body.trim().slice(0, 200)}`;
      // Denied or missing: asking again changes nothing.
      if (response.status === 403 || response.status === 404) break;
    } catch (error) {
      last = (error as { code?: string }).code ?? (error as Error).message;
    }
    if (attempt < attempts) await sleep(firstDelayMs * 2 ** (attempt - 1));
  }
  throw new Error(
    `the secrets extension at ${url.host} answered ${last} (is the AWS Parameters and Secrets Lambda Extension layer attached?)`,
  );
}

// One GET with node:http, not fetch: the first fetch of a process loads Node's own undici, which
// costs a Lambda cold start ~40 ms and 12 MB resident for two requests to localhost (ADR 0011).
async function getText(url: URL, headers: Record<string, string>): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const request = get(url, { headers, timeout: requestTimeoutMs }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('error', reject);
      response.on('end', () => {
        resolve({ status: response.statusCode ?? 0, body: Buffer.concat(chunks).toString('utf8') });
      });
    });
    request.on('timeout', () => request.destroy(new Error(`no answer in ${String(requestTimeoutMs)} ms`)));
    request.on('error', reject);
  });
}

/** The options whose secret is read from the store, and the file option the value stands in for. */
const fromStore = [
  { id: 'kubeconfigSecretId', file: 'kubeconfig', name: 'kubeconfig' },
  { id: 'cloudConfigSecretId', file: 'cloudConfig', name: 'cloud-config' },
  { id: 'signingSecretId', file: 'signingSecretFile', name: 'signing-secret' },
] as const satisfies readonly { id: OptionName; file: OptionName; name: string }[];

type StoreOptions = (typeof fromStore)[number]['id'] | (typeof fromStore)[number]['file'];

/**
 * `config` with each secret that an `…SecretId` option names read from `store` and written to a
 * file (mode 0600, in a new folder of mode 0700 under the system's temporary folder) that the
 * matching file option points to. Throws ConfigError when an option is set both ways, or names a
 * secret the store cannot give.
 */
export async function materializeSecrets<C extends Readonly<Record<StoreOptions, string | undefined>>>(
  config: C,
  store: SecretStore,
): Promise<C> {
  const wanted = fromStore.filter((s) => config[s.id] !== undefined);
  for (const s of wanted) {
    if (config[s.file] !== undefined) throw new ConfigError(`set ${envName(s.id)} or ${envName(s.file)}, not both`);
  }
  if (wanted.length === 0) return config;
  const dir = await mkdtemp(join(tmpdir(), 'cirrus-secrets-'));
  await chmod(dir, 0o700);
  const files: Record<string, string> = {};
  await Promise.all(
    wanted.map(async (s) => {
      const id = config[s.id] ?? '';
      let value: string;
      try {
        value = await store.read(id);
      } catch (error) {
        throw new ConfigError(`${envName(s.id)}: cannot read secret '${id}': ${(error as Error).message}`, {
          cause: error,
        });
      }
      const path = join(dir, s.name);
      await writeFile(path, value, { mode: 0o600 });
      files[s.file] = path;
    }),
  );
  return { ...config, ...files };
}
