// What `cirrus --help` and `cirrus <command> --help` print, from the command table (./commands.ts)
// and the option table (app/options.ts).

import { envName, flagName, optionSpec, type OptionName } from '../config.ts';
import { formatDuration } from '../../shared/duration.ts';
import { commands, type Command, type CommandName } from './commands.ts';
import { catalogue } from '../root.ts';

/** The overview: every command with its summary. */
export function overview(): string {
  const width = Math.max(...Object.keys(commands).map((n) => n.length));
  const lines = Object.entries(commands).map(([name, c]) => `  ${name.padEnd(width)}  ${c.summary}`);
  return [
    'cirrus: a Kubernetes cloud controller manager cut into stateless HTTP functions.',
    '',
    'Usage: cirrus <command> [flags]',
    '',
    'Commands:',
    ...lines,
    '',
    "Run 'cirrus <command> --help' for a command's flags. Every flag can also be set through an",
    'environment variable: --cluster-name is CIRRUS_CLUSTER_NAME. A flag wins over its variable.',
    'Relative paths are read from the directory cirrus was run in (with npm run, the one npm was run in).',
    '',
  ].join('\n');
}

/** The help text of one command: usage, description and each flag with its variable. */
export function commandHelp(name: CommandName): string {
  const cmd: Command<OptionName> = commands[name];
  const flags = cmd.options.map((option) => {
    const spec = optionSpec(option);
    const value = spec.kind === 'boolean' ? '' : ` <${spec.value ?? 'value'}>`;
    const required = cmd.required?.includes(option) ? ' (required)' : '';
    const short = spec.short === undefined ? '' : `-${spec.short}, `;
    const fallback = shownDefault(cmd, option);
    const shown = fallback === undefined ? '' : ` Default: ${fallback}.`;
    const choices = spec.choices === undefined ? '' : ` One of ${spec.choices.join(', ')}.`;
    const help = `${cmd.help?.[option] ?? spec.help}${choices}`;
    return `  ${short}--${flagName(option)}${value}${required}\n      ${help}${shown}\n      Env: ${envName(option)}`;
  });
  const args = (cmd.positionals ?? [])
    .map((arg, i) => (i < (cmd.minPositionals ?? Infinity) ? ` <${arg}>` : ` [<${arg}>]`))
    .join('');
  return [`Usage: cirrus ${name}${args} [flags]`, '', cmd.description, '', 'Flags:', ...flags, ''].join('\n');
}

/**
 * An option's default in `cmd` as one would type it (`12s`, `*`, `127.0.0.1`), or undefined where
 * there is none to show (unset, false, an empty list).
 */
function shownDefault(cmd: Command<OptionName>, option: OptionName): string | undefined {
  const spec = optionSpec(option);
  const own = cmd.shownDefaults?.[option] ?? cmd.defaults?.[option] ?? spec.shownDefault;
  if (own !== undefined) return own;
  // A period option's default is its function's period.
  const entry = catalogue.find((e) => e.period.option === option);
  if (entry !== undefined)
    return `${formatDuration(entry.period.defaultMs)} (${entry.name}${entry.period.defaultMs === 0 ? ': never' : ''})`;
  const parsed = spec.schema.safeParse(undefined);
  return parsed.success ? typedDefault(parsed.data) : undefined;
}

// A schema's default as typed: a list comma-separated; nothing for none, false or an empty list.
function typedDefault(value: unknown): string | undefined {
  if (Array.isArray(value)) return value.length === 0 ? undefined : value.join(',');
  if (typeof value === 'string' || typeof value === 'number' || value === true) return String(value);
  return undefined;
}
