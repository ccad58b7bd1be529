// The command line run in this process, as a test reads it: its exit status and what it printed.

import { main } from '../../app/cli/main.ts';

/** Runs `cirrus <argv>` with the environment `env`; resolves with the exit status, stdout and stderr. */
export async function runCommandLine(
  argv: readonly string[],
  env: Record<string, string> = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  let stdout = '';
  let stderr = '';
  const io = {
    stdout: { write: (text: string) => (stdout += text) },
    stderr: { write: (text: string) => (stderr += text) },
    env,
    signal: new AbortController().signal,
  };
  const code = await main(argv, io);
  return { code, stdout, stderr };
}
