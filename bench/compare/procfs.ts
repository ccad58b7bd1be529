// What the comparison reads about a process from /proc: CPU time (utime + stime of
// /proc/<pid>/stat), the resident set now (VmRSS) and at its peak (VmHWM), and the reset of that
// peak between scenarios (writing 5 to /proc/<pid>/clear_refs, which the owner of the process may).

import { spawnSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';

const ticksPerSecond = Number(spawnSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).stdout.trim()) || 100;

/** CPU time the process has used, user and system, in ms. */
export function cpuMs(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  // Fields after the command name (which may hold spaces): state is field 3, utime 14, stime 15.
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / ticksPerSecond;
}

/** VmRSS and VmHWM in MB. */
export function memoryMb(pid: number): { rss: number; peak: number } {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  const kb = (field: string): number => Number(new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { rss: kb('VmRSS') / 1024, peak: kb('VmHWM') / 1024 };
}

/** Resets VmHWM to the current resident set; false where the kernel does not allow it. */
export function resetPeak(pid: number): boolean {
  try {
    writeFileSync(`/proc/${pid}/clear_refs`, '5');
    return true;
  } catch {
    return false;
  }
}

/** The process's name (/proc/<pid>/comm). */
export function commandName(pid: number): string {
  return readFileSync(`/proc/${pid}/comm`, 'utf8').trim();
}

/** Samples VmRSS every `everyMs` until stopped; stop() returns the largest sample in MB. */
export function sampleRss(pid: number, everyMs = 100): { stop: () => number } {
  let largest = memoryMb(pid).rss;
  const timer = setInterval(() => {
    try {
      largest = Math.max(largest, memoryMb(pid).rss);
    } catch {
      // the process is gone: keep what was seen
    }
  }, everyMs);
  return {
    stop: () => {
      clearInterval(timer);
      return largest;
    },
  };
}
