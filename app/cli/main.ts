// The `cirrus` command line: `cirrus <command> [flags]`. The commands, what each takes and its help
// text are in ./commands.ts; here the command line is read, checked and handed to its command.

import { ConfigError, parseCommandLine, type CommandLine, type Config, type OptionName } from '../config.ts';
import { isCloudProvider, registeredCloudProviders } from '../../shared/cloud/registry.ts';
import { didYouMean, hint } from '../suggest.ts';
import { commands, isCommand, type Command, type CommandName } from './commands.ts';
import { commandHelp, overview } from './help.ts';
import type { Io } from './io.ts';
import { shareLibraryWithProviderModules } from './provider-module.ts';
import { catalogue } from '../root.ts';

export type { Io } from './io.ts';

const helpWords = new Set(['help', '--help', '-h']);

/** Exit status for a command line or configuration that cirrus will not run. */
export const usageExitCode = 2;

/** Runs the command line `argv` (without `node` and the script) and resolves with the exit status. */
export async function main(argv: readonly string[], io: Io): Promise<number> {
  const [first, ...rest] = argv;
  if (first === undefined || helpWords.has(first)) return help(rest[0], io);
  if (first === '--version') return run('version', rest, io);
  if (!isCommand(first)) {
    return usageError(
      first.startsWith('-')
        ? `unknown flag '${first}'${hint(first, ['--help', '--version'])}`
        : `unknown command '${first}'${hint(first, Object.keys(commands))}`,
      io,
    );
  }
  if (rest.some((arg) => helpWords.has(arg) && arg !== 'help')) {
    io.stdout.write(commandHelp(first));
    return 0;
  }
  return run(first, rest, io);
}

// A ConfigError is a usage error, whether the parser or the command found it; any other error
// stops the command with its message (start-up failures: unknown provider, bad cloud-config).
async function run(name: CommandName, args: readonly string[], io: Io): Promise<number> {
  const cmd: Command<OptionName> = commands[name];
  try {
    const line = parseCommandLine(cmd, args, io.env);
    checkNames(cmd, line);
    if (line.config.providerModule !== undefined) shareLibraryWithProviderModules();
    else if (cmd.options.includes('providerModule')) checkProvider(line.config.cloudProvider);
    return await cmd.run(line, io);
  } catch (error) {
    if (error instanceof ConfigError) return usageError(error.message, io, name);
    io.stderr.write(`cirrus ${name}: ${error instanceof Error ? error.message : String(error)}\n`);
    return 1;
  }
}

// The names a command line gives that must be among known ones: a positional with a fixed set of
// values (a shell), and --controllers. Functions are checked by their commands (functionNamed).
function checkNames(cmd: Command<OptionName>, line: CommandLine<OptionName>): void {
  (cmd.positionals ?? []).forEach((arg, i) => {
    const value = line.positionals[i];
    const known = cmd.positionalValues?.[i];
    if (value === undefined || known === undefined || arg === 'function' || known.includes(value)) return;
    throw new ConfigError(`unknown ${arg} '${value}'${hint(value, known)} (one of ${known.join(', ')})`);
  });
  // Only the commands that take --controllers have it (the type says every command's config has every option).
  const controllers = (line.config as Partial<Config<'controllers'>>).controllers;
  if (controllers === undefined) return;
  const known = catalogue.flatMap((e) => [e.controller.name, e.controller.alias, e.name]);
  for (const entry of controllers) {
    const name = entry.startsWith('-') ? entry.slice(1) : entry;
    if (entry === '*' || known.includes(name)) continue;
    throw new ConfigError(
      `--controllers: "${entry}" is not in the list of known controllers${hint(name, known)} ` +
        `(${catalogue.map((e) => e.controller.name).join(', ')}, or their aliases ` +
        `${catalogue.flatMap((e) => [e.controller.alias, e.name]).join(', ')})`,
    );
  }
}

// An unknown --cloud-provider (each of several) stops a command that builds providers before it
// starts anything, naming the closest registered name (a start-up failure, exit 1, as the
// registry's own refusal). With a --provider-module the name may be the module's, so the registry
// decides once it is imported; without one, a name like no built-in one is most likely an
// out-of-tree provider whose module was forgotten, and the message says how to give it. The relay
// builds none: it reads only the names (its ownership rules).
function checkProvider(names: string | undefined): void {
  const name = names?.split(',').find((one) => one !== '' && one !== 'external' && !isCloudProvider(one));
  if (name === undefined) return;
  const known = registeredCloudProviders();
  const question = didYouMean(name, known);
  const module =
    question === ''
      ? `; an out-of-tree provider is registered by its module: give it with --provider-module <file or package> (CIRRUS_PROVIDER_MODULE)`
      : '';
  throw new Error(
    `unknown cloud provider "${name}"${question === '' ? '' : ` (${question})`}; registered: ${known.join(', ') || 'none'}${module}`,
  );
}

function help(topic: string | undefined, io: Io): number {
  if (topic === undefined) {
    io.stdout.write(overview());
    return 0;
  }
  if (!isCommand(topic)) return usageError(`unknown command '${topic}'${hint(topic, Object.keys(commands))}`, io);
  io.stdout.write(commandHelp(topic));
  return 0;
}

function usageError(message: string, io: Io, cmd?: CommandName): number {
  const hint = cmd === undefined ? 'cirrus --help' : `cirrus ${cmd} --help`;
  io.stderr.write(`cirrus${cmd === undefined ? '' : ` ${cmd}`}: ${message}\nRun '${hint}' for usage.\n`);
  return usageExitCode;
}
