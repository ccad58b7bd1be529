// Runs the CLI in this process: real stdio and environment, SIGINT/SIGTERM turned into a clean
// stop (a second signal exits at once), and the exit status set from the command's result.

import { main } from './main.ts';

/** Runs `cirrus` with `process.argv` and sets `process.exitCode`. */
export async function runFromProcess(): Promise<void> {
  const controller = new AbortController();
  const onSignal = (signal: NodeJS.Signals): void => {
    if (controller.signal.aborted) process.exit(128 + (signal === 'SIGINT' ? 2 : 15));
    controller.abort(signal);
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
  try {
    process.exitCode = await main(process.argv.slice(2), {
      stdout: process.stdout,
      stderr: process.stderr,
      env: process.env,
      signal: controller.signal,
    });
  } finally {
    process.off('SIGINT', onSignal);
    process.off('SIGTERM', onSignal);
  }
}
