// What an option is (OptionSpec) and the builders the table of options (options.ts) is written with:
// the kinds of value cirrus takes from a flag or variable (a path, one of some choices, a Go
// duration, a whole number in a range, a load balancer class).

import { z } from 'zod';
import { parseDuration } from '../shared/duration.ts';

export interface OptionSpec<S extends z.ZodType = z.ZodType> {
  /**
   * A boolean option is a flag without a value (`--dry-run`); its variable takes true/false/1/0.
   * A list option may be repeated (`--to a=… --to b=…`); its variable is comma-separated.
   */
  readonly kind: 'string' | 'boolean' | 'list';
  readonly help: string;
  readonly schema: S;
  /** Shown in help as the value's placeholder. */
  readonly value?: string;
  /** The environment variable, where a platform convention fixes it (Knative's PORT). */
  readonly env?: string;
  /** The default as help shows it, where the schema's value reads otherwise (a duration's `12s`, not 12000). */
  readonly shownDefault?: string;
  /** The values it takes, for help and shell completion. */
  readonly choices?: readonly string[];
  /** A one-letter flag for it (`-o`). */
  readonly short?: string;
  /**
   * A path (`file`, `dir`) or a module that may be one: resolved against the directory the user ran
   * cirrus from (config.ts), completed as a file name by the shell. `files`: a path, or paths by
   * name (`static=inventory.yaml,aws=aws.conf`), each resolved.
   */
  readonly path?: 'file' | 'dir' | 'module' | 'files';
}

export function option<S extends z.ZodType>(
  kind: OptionSpec['kind'],
  help: string,
  schema: S,
  value?: string | (Pick<OptionSpec, 'shownDefault' | 'choices' | 'short' | 'path'> & { readonly value: string }),
): OptionSpec<S> {
  if (value === undefined) return { kind, help, schema };
  return typeof value === 'string' ? { kind, help, schema, value } : { kind, help, schema, ...value };
}

/** An option naming a file (or folder: `dir`): resolved against the user's directory, completed as a path. */
export function pathOption<S extends z.ZodType>(help: string, schema: S, path: 'file' | 'dir' = 'file'): OptionSpec<S> {
  return option('string', help, schema, { value: 'path', path });
}

/** An option taking one of `choices`, `fallback` by default. */
export function choiceOption<const C extends readonly [string, ...string[]]>(
  help: string,
  choices: C,
  fallback: C[number],
  value: string,
): OptionSpec<z.ZodDefault<z.ZodEnum<{ [K in C[number]]: K }>>> {
  return option('string', help, z.enum(choices).default(fallback), { value, choices });
}

/** A Go duration option (`12s`), in milliseconds, `fallback` by default; help shows the default as typed. */
export function durationOption(help: string, fallback: string): OptionSpec<ReturnType<typeof duration>> {
  return option('string', help, duration(fallback), { value: 'duration', shownDefault: fallback });
}

export const nonEmpty = z.string().trim().min(1, 'must not be empty');

function durationOf(text: string, ctx: z.RefinementCtx): number {
  const ms = parseDuration(text);
  if (ms === undefined) {
    ctx.addIssue({ code: 'custom', message: `'${text}' is not a duration like 5s, 1m30s or 500ms` });
    return z.NEVER;
  }
  return ms;
}

/** A Go duration (`5s`, `1m30s`, `500ms`, `0`) in milliseconds. */
function duration(fallback: string): z.ZodPipe<z.ZodDefault<z.ZodString>, z.ZodTransform<number, string>> {
  return z.string().default(fallback).transform(durationOf);
}

/** A Go duration in milliseconds, undefined when not given (the default is someone else's: a function's period). */
export function optionalDuration(): z.ZodOptional<z.ZodPipe<z.ZodString, z.ZodTransform<number, string>>> {
  return z.string().transform(durationOf).optional();
}

/** A whole number from a flag or variable, within [min, max]. */
export function integer(
  min: number,
  max: number,
): z.ZodPipe<z.ZodPipe<z.ZodString, z.ZodTransform<number, string>>, z.ZodNumber> {
  return z.string().regex(/^\d+$/, 'must be a whole number').transform(Number).pipe(z.number().min(min).max(max));
}

// A load balancer class (the API server's label-style name), and one given to a provider (provider=class).
export const className = String.raw`([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?`;
export const providerClass = String.raw`[a-z0-9]([-a-z0-9]*[a-z0-9])?=${className}`;
