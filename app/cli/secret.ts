// The shared signing secret, read from a file (never from the command line, which `ps` shows).

import { readFile } from 'node:fs/promises';
import { ConfigError } from '../config.ts';

/** The secret in `path` without its trailing newline; undefined when no file is configured. */
export async function readSecret(path: string | undefined): Promise<string | undefined> {
  if (path === undefined) return undefined;
  let text: string;
  try {
    text = await readFile(path, 'utf8');
  } catch (error) {
    throw new ConfigError(
      `--signing-secret-file: cannot read ${path}: ${(error as NodeJS.ErrnoException).code ?? (error as Error).message}`,
    );
  }
  const secret = text.replace(/\r?\n$/, '');
  if (secret.trim() === '') throw new ConfigError(`--signing-secret-file: ${path} is empty`);
  return secret;
}
