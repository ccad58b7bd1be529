// Notices when a config file's contents change, including when it is a Kubernetes ConfigMap or
// Secret volume. The kubelet updates those by writing a new timestamped folder and atomically
// renaming a `..data` symlink over the old one; the file itself (`config.yaml -> ..data/config.yaml`)
// is never written. So the file cannot be watched directly (an inotify watch follows the symlink
// to the old folder, which is then deleted): instead the folder holding the path is watched, and
// any event in it triggers a re-read. Watches miss things (the path may be a symlink into another
// folder; network and overlay filesystems drop events), so a cheap stat poll backs them up.
//
// Reads are compared with the last contents seen, so a spurious event costs one small read and
// nothing else, and a change is reported once whether it was seen by the watch, the poll or both.

import { watch, type FSWatcher } from 'node:fs';
import { readFile, stat } from 'node:fs/promises';
import { dirname, resolve } from 'node:path';
import type { Logger } from 'pino';

/** How watchFile() watches; see the defaults in the static provider. */
export interface FileWatchOptions {
  /** Called with the new contents after each change (never with contents equal to the last ones). */
  readonly onChange: (contents: string) => void;
  /** Watching stops when this aborts. */
  readonly signal: AbortSignal;
  readonly log: Logger;
  /** How often to stat the file, for changes the folder watch misses. */
  readonly pollIntervalMs: number;
  /** How long a burst of folder events must fall quiet before the file is read. */
  readonly debounceMs: number;
}

/**
 * Watches the file at `path`, whose contents are now `contents`, and calls `options.onChange`
 * when they change, until `options.signal` aborts. Resolves after a first check, which reports a
 * change made since `contents` were read. Never keeps the process alive: the folder watch is not
 * persistent and the timers are unref'd. A file that cannot be read is logged once per error code,
 * and watching goes on.
 */
export async function watchFile(path: string, contents: string, options: FileWatchOptions): Promise<void> {
  if (options.signal.aborted) return;
  await new FileWatch(resolve(path), contents, options).start();
}

class FileWatch {
  readonly #path: string;
  readonly #options: FileWatchOptions;
  /** The contents last seen, valid or not: a change is a difference from these. */
  #contents: string;
  /** The code of the last read error, to log a failing file once, not on every poll. */
  #readError: string | undefined;
  /** The file's identity and times at the last poll. */
  #signature: string | undefined;
  #watcher: FSWatcher | undefined;
  #poller: NodeJS.Timeout | undefined;
  #debounce: NodeJS.Timeout | undefined;
  /** Reads run one at a time; a check asked for during a read makes one more read after it. */
  #reading = false;
  #requested = 0;

  constructor(path: string, contents: string, options: FileWatchOptions) {
    this.#path = path;
    this.#contents = contents;
    this.#options = options;
  }

  async start(): Promise<void> {
    const { signal, pollIntervalMs } = this.#options;
    signal.addEventListener(
      'abort',
      () => {
        this.#stop();
      },
      { once: true },
    );
    this.#watchFolder();
    this.#poller = setInterval(() => {
      this.#run(this.#poll());
    }, pollIntervalMs).unref();
    await this.#poll();
  }

  #watchFolder(): void {
    const { signal, log } = this.#options;
    try {
      const watcher = watch(dirname(this.#path), { persistent: false, signal });
      watcher.on('change', () => {
        this.#schedule();
      });
      watcher.on('error', (error) => {
        log.warn({ err: error, file: this.#path }, 'stopped watching the cloud-config folder; polling only');
        watcher.close();
      });
      this.#watcher = watcher;
    } catch (error) {
      log.warn({ err: error, file: this.#path }, 'cannot watch the cloud-config folder; polling only');
    }
  }

  // Waits for a burst of events (a ConfigMap swap makes several, an editor's save a few) to end.
  #schedule(): void {
    clearTimeout(this.#debounce);
    this.#debounce = setTimeout(() => {
      this.#run(this.#check());
    }, this.#options.debounceMs).unref();
  }

  async #poll(): Promise<void> {
    const signature = await statSignature(this.#path);
    if (signature === this.#signature) return;
    this.#signature = signature;
    await this.#check();
  }

  async #check(): Promise<void> {
    this.#requested += 1;
    if (this.#reading) return;
    this.#reading = true;
    try {
      for (let done = 0; done < this.#requested && !this.#options.signal.aborted;) {
        done = this.#requested;
        await this.#read();
      }
    } finally {
      this.#reading = false;
    }
  }

  async #read(): Promise<void> {
    let contents: string;
    try {
      contents = await readFile(this.#path, 'utf8');
    } catch (error) {
      this.#readFailed(error);
      return;
    }
    this.#readError = undefined;
    if (contents === this.#contents || this.#options.signal.aborted) return;
    this.#contents = contents;
    this.#options.onChange(contents);
  }

  #readFailed(error: unknown): void {
    const code = errorCode(error);
    if (code === this.#readError) return;
    this.#readError = code;
    this.#options.log.error(
      { err: error, file: this.#path },
      'cannot read the cloud-config; keeping the last good one',
    );
  }

  // Timer callbacks cannot return promises: a failure (a bug in onChange) is logged, not dropped.
  #run(work: Promise<void>): void {
    work.catch((error: unknown) => {
      this.#options.log.error({ err: error, file: this.#path }, 'checking the cloud-config for changes failed');
    });
  }

  #stop(): void {
    this.#watcher?.close();
    clearInterval(this.#poller);
    clearTimeout(this.#debounce);
  }
}

// Identity and times: an atomic swap changes the inode, an in-place write the size or mtime.
async function statSignature(path: string): Promise<string> {
  try {
    const { dev, ino, size, mtimeMs, ctimeMs } = await stat(path);
    return `${dev}:${ino}:${size}:${mtimeMs}:${ctimeMs}`;
  } catch (error) {
    return `error:${errorCode(error)}`;
  }
}

function errorCode(error: unknown): string {
  return error instanceof Error && 'code' in error ? String(error.code) : String(error);
}
