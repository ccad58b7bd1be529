// `cirrus completion bash|zsh|fish`: a shell completion script, generated from the commands and the
// option table (commands.ts, options.ts), the catalogue of functions and the providers registered, so
// that it completes exactly what the command line takes.

import { registeredCloudProviders } from '../../shared/cloud/registry.ts';
import { flagName, optionSpec, type CommandLine, type OptionName } from '../config.ts';
import { catalogue } from '../root.ts';
import type { Io } from './io.ts';
import { importProviderModule } from './provider-module.ts';

/** The shells a script is made for. */
export const shells = ['bash', 'zsh', 'fish'] as const;
export type Shell = (typeof shells)[number];

/** What shell completion reads of a command (commands.ts `commandShapes` gives them all). */
export interface CommandShape {
  readonly name: string;
  readonly summary: string;
  readonly options: readonly OptionName[];
  readonly positionals: readonly string[];
  readonly positionalValues: readonly (readonly string[])[];
  /** The first line of each option's help in this command. */
  readonly optionHelp: (option: OptionName) => string;
}

/**
 * Prints the script for the shell named, completing `commands`; exit status 0. (main.ts has
 * refused any other shell.)
 */
export async function runCompletion(
  line: CommandLine<'providerModule'>,
  io: Io,
  commands: readonly CommandShape[],
): Promise<number> {
  if (line.config.providerModule !== undefined) await importProviderModule(line.config.providerModule);
  const shell = line.positionals[0] as Shell;
  io.stdout.write(completionScript(shell, commands));
  return 0;
}

/** What a flag's value completes to: some words, file or folder names, or nothing (a free value). */
type ValueCompletion = { readonly words: readonly string[] } | { readonly path: 'file' | 'dir' } | undefined;

function valueCompletion(option: OptionName): ValueCompletion {
  const spec = optionSpec(option);
  if (spec.choices !== undefined) return { words: spec.choices };
  if (option === 'cloudProvider') return { words: registeredCloudProviders() };
  if (option === 'controllers')
    return { words: ['*', ...catalogue.flatMap((e) => [e.controller.name, e.controller.alias, e.name])] };
  if (spec.path !== undefined) return { path: spec.path === 'dir' ? 'dir' : 'file' };
  return undefined;
}

/** The completion script for `shell`. */
export function completionScript(shell: Shell, commands: readonly CommandShape[]): string {
  if (shell === 'fish') return fishScript(commands);
  const script = bashScript(commands);
  // zsh runs the bash function through its bash compatibility layer.
  return shell === 'zsh' ? `#compdef cirrus\nautoload -U +X bashcompinit && bashcompinit\n${script}` : script;
}

// Every option of any command, once.
function allOptions(commands: readonly CommandShape[]): OptionName[] {
  return [...new Set(commands.flatMap((c) => c.options))];
}

function flagsOf(command: CommandShape): string[] {
  return command.options.flatMap((option) => {
    const { short } = optionSpec(option);
    return [`--${flagName(option)}`, ...(short === undefined ? [] : [`-${short}`])];
  });
}

// A flag and its one-letter form as a case pattern: `--output|-o`.
function pattern(option: OptionName): string {
  const { short } = optionSpec(option);
  return [`--${flagName(option)}`, ...(short === undefined ? [] : [`-${short}`])].join('|');
}

function bashScript(commands: readonly CommandShape[]): string {
  const options = allOptions(commands);
  const valued = options.filter((o) => optionSpec(o).kind !== 'boolean');
  const valueCases = valued.map((option) => {
    const completion = valueCompletion(option);
    const action =
      completion === undefined
        ? 'return 0'
        : 'words' in completion
          ? `_cirrus_reply -W ${quote(completion.words.join(' '))} -- "$cur"; return 0`
          : `_cirrus_reply -${completion.path === 'dir' ? 'd' : 'f'} -- "$cur"; return 0`;
    return `    ${pattern(option)}) ${action} ;;`;
  });
  const flagCases = commands.map((c) => `    ${c.name}) words=${quote([...flagsOf(c), '--help'].join(' '))} ;;`);
  const positionalCases = commands.flatMap((c) =>
    c.positionalValues.map((values, i) => `    ${c.name}:${i}) words=${quote(values.join(' '))} ;;`),
  );
  const names = commands.map((c) => c.name);
  return `# cirrus shell completion (bash): source <(cirrus completion bash)
# Sets COMPREPLY to what compgen prints, a word a line, each quoted for the command line: \`$(compgen …)\`
# unquoted would expand the controllers' "*" to the files of the current folder, and split a file name
# at its spaces.
_cirrus_reply() {
  local w
  COMPREPLY=()
  while IFS= read -r w; do
    printf -v w '%q' "$w"
    COMPREPLY+=("$w")
  done < <(compgen "$@")
}
_cirrus() {
  local cur prev cmd words i n=0
  cur="\${COMP_WORDS[COMP_CWORD]}"
  prev="\${COMP_WORDS[COMP_CWORD-1]}"
  cmd="\${COMP_WORDS[1]}"
  if [[ $COMP_CWORD -eq 1 ]]; then
    _cirrus_reply -W ${quote([...names, 'help', '--help', '--version'].join(' '))} -- "$cur"; return 0
  fi
  if [[ $cmd == help ]]; then
    [[ $COMP_CWORD -eq 2 ]] && _cirrus_reply -W ${quote(names.join(' '))} -- "$cur"; return 0
  fi
  case "$prev" in
${valueCases.join('\n')}
  esac
  if [[ $cur == -* ]]; then
    case "$cmd" in
${flagCases.join('\n')}
      *) words="" ;;
    esac
    _cirrus_reply -W "$words" -- "$cur"; return 0
  fi
  # Which positional argument this is: the words so far that are neither flags nor their values.
  for ((i = 2; i < COMP_CWORD; i++)); do
    case "\${COMP_WORDS[i]}" in
      --*=*) ;;
      ${valued.map(pattern).join('|')}) ((i++)) ;;
      -*) ;;
      *) ((n++)) ;;
    esac
  done
  case "$cmd:$n" in
${positionalCases.join('\n')}
    *) return 0 ;;
  esac
  _cirrus_reply -W "$words" -- "$cur"
}
complete -F _cirrus cirrus
`;
}

function fishScript(commands: readonly CommandShape[]): string {
  const names = commands.map((c) => c.name);
  const lines = [
    '# cirrus shell completion (fish): cirrus completion fish | source',
    'complete -c cirrus -f',
    `complete -c cirrus -n __fish_use_subcommand -l help -d ${quote('Show help')}`,
    `complete -c cirrus -n __fish_use_subcommand -l version -d ${quote('Show the versions')}`,
    `complete -c cirrus -n __fish_use_subcommand -a help -d ${quote("Show a command's help")}`,
    ...commands.map(
      (c) => `complete -c cirrus -n __fish_use_subcommand -a ${c.name} -d ${quote(firstSentence(c.summary))}`,
    ),
    `complete -c cirrus -n ${quote('__fish_seen_subcommand_from help')} -a ${quote(names.join(' '))}`,
  ];
  for (const command of commands) {
    const when = `__fish_seen_subcommand_from ${command.name}`;
    lines.push(`complete -c cirrus -n ${quote(when)} -l help -d ${quote('Show help')}`);
    for (const option of command.options) {
      const spec = optionSpec(option);
      const completion = spec.kind === 'boolean' ? undefined : valueCompletion(option);
      const value =
        spec.kind === 'boolean'
          ? ''
          : completion === undefined
            ? ' -x'
            : 'words' in completion
              ? ` -x -a ${quote(completion.words.map(fishWord).join(' '))}`
              : ' -r -F';
      const short = spec.short === undefined ? '' : ` -s ${spec.short}`;
      lines.push(
        `complete -c cirrus -n ${quote(when)} -l ${flagName(option)}${short}${value} -d ${quote(firstSentence(command.optionHelp(option)))}`,
      );
    }
    // The first positional argument's values (a function, a shell).
    const first = command.positionalValues[0];
    if (first !== undefined) {
      lines.push(
        `complete -c cirrus -n ${quote(`${when}; and not __fish_seen_subcommand_from ${first.join(' ')}`)} -a ${quote(first.join(' '))}`,
      );
    }
  }
  return `${lines.join('\n')}\n`;
}

// A word of `complete -a`, which fish expands as a command line's: the controllers' `*` escaped, or it
// would complete to the files of the current folder.
function fishWord(word: string): string {
  return word.replace(/[*?[\]{}()$~#;&|<> \\]/g, '\\$&');
}

function firstSentence(text: string): string {
  const sentence = /^.*?[.:;](\s|$)/.exec(text)?.[0] ?? text;
  return sentence.replace(/[.:;]\s*$/, '').trim();
}

// Single-quoted for sh and fish: `'` itself becomes `'\''`. (fish reads `\'` inside quotes; both read the sh form.)
function quote(text: string): string {
  return `'${text.replaceAll("'", "'\\''")}'`;
}
