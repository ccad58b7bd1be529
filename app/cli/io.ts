// What a command runs with: where it writes, what environment it reads, and the signal that asks it to stop.

/** Where a command writes, what environment it reads, and the signal that asks it to stop. */
export interface Io {
  readonly stdout: { write(text: string): unknown };
  readonly stderr: { write(text: string): unknown };
  readonly env: NodeJS.ProcessEnv;
  /** Aborted on SIGINT or SIGTERM: long-running commands stop cleanly and return. */
  readonly signal: AbortSignal;
}
