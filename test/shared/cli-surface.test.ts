// The command line as a user meets it: one --log-format for every command that logs, help that
// shows defaults as one would type them and says what each flag does in that command, suggestions
// for typos, shell completion generated from the same definitions, and relative paths read from the
// directory the user ran cirrus in.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { describe, it } from 'node:test';
import { commandShapes } from '../../app/cli/commands.ts';
import { commandHelp } from '../../app/cli/help.ts';
import { usageExitCode } from '../../app/cli/main.ts';
import { completionScript } from '../../app/cli/completion.ts';
import { parseCommandLine, userDirectory } from '../../app/config.ts';
import { suggest } from '../../app/suggest.ts';
import { runCommandLine } from '../harness/command-line.ts';

const run = runCommandLine;

const commands = ['cluster', 'serve', 'reconcile', 'conformance', 'start', 'relay', 'version', 'completion'] as const;

// Each flag's help block in a command's help: flag line → its text (description, default).
function flags(help: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const [, flag = '', text = ''] of help.matchAll(/^ {2}(?:-\w, )?(--[a-z-]+)[^\n]*\n {6}([^\n]*)\n {6}Env:/gm))
    found.set(flag, text);
  return found;
}

describe('--log-format', () => {
  for (const command of ['serve', 'conformance', 'start', 'relay'] as const) {
    it(`is a flag of ${command}, auto by default, with its choices`, () => {
      const text = flags(commandHelp(command)).get('--log-format') ?? '';
      assert.match(
        text,
        /pretty when the log goes to a terminal, else json\. One of auto, json, pretty\. Default: auto\.$/,
      );
    });
  }

  it('refuses a format it does not know, naming the flag', async () => {
    const { code, stderr } = await run(['serve', 'node-init', '--cloud-provider', 'fake', '--log-format', 'xml']);
    assert.equal(code, usageExitCode);
    assert.match(stderr, /^cirrus serve: --log-format: .*"json".*\n/);
  });
});

describe('help', () => {
  it('shows the Lease timings of relay and start as durations, as they are typed', () => {
    for (const command of ['relay', 'start'] as const) {
      const shown = flags(commandHelp(command));
      assert.match(shown.get('--leader-elect-lease-duration') ?? '', / Default: 12s\.$/);
      assert.match(shown.get('--leader-elect-renew-deadline') ?? '', / Default: 8s\.$/);
      assert.match(shown.get('--leader-elect-retry-period') ?? '', / Default: 2s\.$/);
    }
  });

  it('shows every default of a duration flag, in every command, as a duration', () => {
    for (const command of commands) {
      for (const [flag, text] of flags(commandHelp(command))) {
        const fallback = / Default: ([^ .]+)/.exec(text)?.[1];
        if (!/<duration>/.test(commandHelp(command).split(flag)[1]?.split('\n')[0] ?? '') || fallback === undefined)
          continue;
        assert.match(fallback, /^(0|(\d+(ms|s|m|h))+)$/, `${command} ${flag}: ${text}`);
      }
    }
  });

  it('shows no default as JSON (quoted strings, lists in brackets)', () => {
    for (const command of commands) assert.doesNotMatch(commandHelp(command), /Default: ["[{]/, command);
    assert.match(flags(commandHelp('start')).get('--controllers') ?? '', / Default: \*\.$/);
  });

  it("describes --signing-secret-file as what it is in each command, not serve's text everywhere", () => {
    const texts = (['serve', 'relay', 'start', 'reconcile'] as const).map(
      (command) => flags(commandHelp(command)).get('--signing-secret-file') ?? '',
    );
    assert.equal(new Set(texts).size, 4, texts.join('\n'));
    assert.match(
      texts[3] ?? '',
      /^A file holding the secret to sign the request with, for a function that refuses unsigned requests \(401\)/,
    );
    assert.doesNotMatch(texts[3] ?? '', /serve refuses/);
  });

  it("shows start's provider default: static, with the example inventory", () => {
    const shown = flags(commandHelp('start'));
    assert.match(shown.get('--cloud-provider') ?? '', / Default: static, with the example inventory \(the demo\)\.$/);
    assert.match(
      shown.get('--cloud-config') ?? '',
      / Default: examples\/static\/inventory\.yaml with --cloud-provider static\.$/,
    );
  });

  it("says where start's and the relay's --port serve: the probes, not the functions", () => {
    for (const command of ['start', 'relay'] as const)
      assert.match(
        flags(commandHelp(command)).get('--port') ?? '',
        /^The port \/healthz, \/readyz and \/metrics listen on\./,
      );
    assert.match(commandHelp('start'), /on a listener of their own on 127\.0\.0\.1/);
  });

  it('says how reconcile finds cirrus start, and that its functions answer 401 without the secret', () => {
    const help = commandHelp('reconcile');
    assert.match(help, /Without --url it calls the cirrus start running on this machine/);
    assert.match(help, /answers 401/);
    assert.match(help, /^ {2}-o, --output <format>$/m);
  });
});

describe('suggestions', () => {
  const cases: { argv: string[]; code: number; message: string }[] = [
    { argv: ['strat'], code: usageExitCode, message: "cirrus: unknown command 'strat'; did you mean 'start'?\n" },
    { argv: ['help', 'srve'], code: usageExitCode, message: "cirrus: unknown command 'srve'; did you mean 'serve'?\n" },
    {
      argv: ['--verison'],
      code: usageExitCode,
      message: "cirrus: unknown flag '--verison'; did you mean '--version'?\n",
    },
    {
      argv: ['start', '--cloud-provder', 'aws'],
      code: usageExitCode,
      message: "cirrus start: Unknown option '--cloud-provder'; did you mean '--cloud-provider'?\n",
    },
    {
      argv: ['reconcile', 'nodes', 'worker-1'],
      code: usageExitCode,
      message:
        "cirrus reconcile: unknown function 'nodes'; did you mean 'node-init' or 'node-lifecycle'? (functions: " +
        "node-init, node-lifecycle, service-lb, routes; or a Go controller's name or alias; node for node-init)\n",
    },
    {
      argv: ['serve', 'servce', '--cloud-provider', 'fake'],
      code: usageExitCode,
      message: "cirrus serve: unknown function 'servce'; did you mean 'service-lb'? (known: node-init, ",
    },
    {
      argv: ['start', '--controllers', '*,-servce'],
      code: usageExitCode,
      message: `cirrus start: --controllers: "-servce" is not in the list of known controllers; did you mean 'service'? (`,
    },
    {
      argv: ['completion', 'bsh'],
      code: usageExitCode,
      message: "cirrus completion: unknown shell 'bsh'; did you mean 'bash' or 'zsh'? (one of bash, zsh, fish)\n",
    },
    // A start-up failure, as the registry's own refusal (exit 1), caught before anything starts.
    {
      argv: ['conformance', '--cloud-provider', 'awz'],
      code: 1,
      message: `cirrus conformance: unknown cloud provider "awz" (did you mean 'aws'?); registered: aws, fake, http, static\n`,
    },
    // Nothing like a built-in name: an out-of-tree provider whose module was not given (issue 43).
    {
      argv: ['conformance', '--cloud-provider', 'skycloud'],
      code: 1,
      message:
        'cirrus conformance: unknown cloud provider "skycloud"; registered: aws, fake, http, static; an out-of-tree ' +
        'provider is registered by its module: give it with --provider-module <file or package> (CIRRUS_PROVIDER_MODULE)\n',
    },
    // The static provider with pools keeps its allocations in the cluster: conformance needs --kubeconfig for it.
    {
      argv: ['conformance', '--cloud-provider', 'static', '--cloud-config', 'examples/static/inventory.yaml'],
      code: 1,
      message:
        'cirrus conformance: could not init cloud provider "static": the static provider\'s loadBalancers need a ' +
        'connection to the cluster (a kubeconfig), to record allocations in ConfigMap cirrus-system/cirrus-lb-ipam; ' +
        'none was given (cirrus conformance: give one with --kubeconfig; cirrus cluster starts a local control plane ' +
        'and prints its KUBECONFIG; or check an inventory without loadBalancers)\n',
    },
    // Several providers (a hybrid cluster) are each a registered one: the unknown one is named.
    {
      argv: ['start', '--cloud-provider', 'static,awz'],
      code: 1,
      message: `cirrus start: unknown cloud provider "awz" (did you mean 'aws'?); registered: aws, fake, http, static\n`,
    },
  ];
  for (const { argv, code, message } of cases) {
    it(`'cirrus ${argv.join(' ')}' suggests what was meant`, async () => {
      const env = argv.includes('--controllers') ? {} : {};
      const result = await run(argv, env);
      assert.equal(result.code, code, result.stderr);
      assert.ok(result.stderr.startsWith(message), result.stderr);
      assert.equal(result.stdout, '');
    });
  }

  it('suggests nothing for a word close to no name', () => {
    assert.deepEqual(suggest('frobnicate', ['start', 'serve', 'cluster']), []);
    assert.deepEqual(suggest('x', ['start', 'serve']), []);
  });
});

describe('cirrus conformance help', () => {
  it('says when a cluster is needed: the static provider with pools, through --kubeconfig (issue 43)', () => {
    const help = commandHelp('conformance');
    const summary = commandShapes().find((c) => c.name === 'conformance')?.summary ?? '';
    assert.doesNotMatch(summary, /no cluster needed/);
    assert.match(summary, /a cluster \(--kubeconfig\) only for one that keeps state there/);
    assert.match(help, /keeps state in the cluster needs --kubeconfig: the static provider with load balancer pools/);
  });
});

describe('cirrus completion', () => {
  // Runs bash's completion function on a command line (the last word being completed).
  function complete(...words: string[]): string[] {
    return completeIn(resolve(import.meta.dirname, '../..'), words);
  }

  // The same, in the folder `cwd`.
  function completeIn(cwd: string, words: readonly string[]): string[] {
    const script = completionScript('bash', commandShapes());
    const line = words.map((w) => `'${w}'`).join(' ');
    const result = spawnSync(
      'bash',
      [
        '-c',
        `${script}\nCOMP_WORDS=(${line}); COMP_CWORD=$((\${#COMP_WORDS[@]} - 1)); _cirrus; printf '%s\\n' "\${COMPREPLY[@]}"`,
      ],
      { encoding: 'utf8', cwd },
    );
    assert.equal(result.status, 0, result.stderr);
    return result.stdout.split('\n').filter((w) => w !== '');
  }

  it('prints a bash script for `cirrus completion bash`', async () => {
    const { code, stdout } = await run(['completion', 'bash']);
    assert.equal(code, 0);
    assert.equal(stdout, completionScript('bash', commandShapes()));
    assert.match(stdout, /^complete -F _cirrus cirrus$/m);
  });

  it('completes commands', () => {
    assert.deepEqual(complete('cirrus', 'st'), ['start']);
    assert.deepEqual(complete('cirrus', 'help', 're'), ['reconcile', 'relay']);
  });

  it("completes a command's flags, and only its own", () => {
    assert.deepEqual(complete('cirrus', 'serve', '--cloud-prov'), ['--cloud-provider']);
    assert.deepEqual(complete('cirrus', 'cluster', '--cloud'), []);
    assert.deepEqual(complete('cirrus', 'relay', '--leader-elect-r'), [
      '--leader-elect-renew-deadline',
      '--leader-elect-retry-period',
      '--leader-elect-resource-name',
      '--leader-elect-resource-namespace',
    ]);
  });

  it('completes function names, after flags and their values too', () => {
    assert.deepEqual(complete('cirrus', 'reconcile', 'node-'), [
      'node-init',
      'node-lifecycle',
      'node-route-controller',
    ]);
    assert.deepEqual(complete('cirrus', 'reconcile', '--url', 'http://x', 'service-'), [
      'service-lb',
      'service-lb-controller',
    ]);
    assert.deepEqual(complete('cirrus', 'reconcile', 'node-init', 'n'), [], 'the object name is free');
  });

  it('completes providers, choices, controllers and shells', () => {
    assert.deepEqual(complete('cirrus', 'start', '--cloud-provider', ''), ['aws', 'fake', 'http', 'static']);
    assert.deepEqual(complete('cirrus', 'relay', '--log-format', ''), ['auto', 'json', 'pretty']);
    assert.deepEqual(complete('cirrus', 'reconcile', '-o', ''), ['text', 'json']);
    assert.ok(complete('cirrus', 'start', '--controllers', 'cloud-node').includes('cloud-node-lifecycle-controller'));
    assert.deepEqual(complete('cirrus', 'completion', ''), ['bash', 'zsh', 'fish']);
  });

  it("offers the controllers' * quoted, not the files of the current folder (issue 43)", () => {
    const folder = mkdtempSync(join(tmpdir(), 'cirrus-completion-'));
    writeFileSync(join(folder, 'notes.txt'), '');
    writeFileSync(join(folder, 'inventory.yaml'), '');
    const offered = completeIn(folder, ['cirrus', 'start', '--controllers', '']);
    assert.ok(offered.includes('\\*'), `no \\* among ${offered.join(' ')}`);
    assert.ok(offered.includes('cloud-node-lifecycle-controller'));
    assert.deepEqual(
      offered.filter((word) => word === 'notes.txt' || word === 'inventory.yaml'),
      [],
    );
    assert.deepEqual(completeIn(folder, ['cirrus', 'start', '--controllers', '*']), ['\\*']);
  });

  it('completes a file name with a space as one word', () => {
    const folder = mkdtempSync(join(tmpdir(), 'cirrus-completion-'));
    writeFileSync(join(folder, 'my inventory.yaml'), '');
    assert.deepEqual(completeIn(folder, ['cirrus', 'serve', '--cloud-config', 'my']), ['my\\ inventory.yaml']);
  });

  it('completes a path flag with file names', () => {
    assert.deepEqual(complete('cirrus', 'serve', '--cloud-config', 'examples/static/inventory.y'), [
      'examples/static/inventory.yaml',
    ]);
  });

  it('prints zsh (through bashcompinit) and fish scripts from the same definitions', async () => {
    const zsh = (await run(['completion', 'zsh'])).stdout;
    assert.match(zsh, /^#compdef cirrus\nautoload -U \+X bashcompinit && bashcompinit\n/);
    assert.ok(zsh.endsWith(completionScript('bash', commandShapes())));
    const fish = (await run(['completion', 'fish'])).stdout;
    assert.match(fish, /^complete -c cirrus -n __fish_use_subcommand -a start -d 'Run the whole CCM in one process'$/m);
    assert.match(
      fish,
      /^complete -c cirrus -n '__fish_seen_subcommand_from serve' -l cloud-provider -x -a 'aws fake http static' /m,
    );
    assert.match(
      fish,
      /^complete -c cirrus -n '__fish_seen_subcommand_from reconcile' -l output -s o -x -a 'text json' /m,
    );
    assert.match(fish, /^complete -c cirrus -n '__fish_seen_subcommand_from serve' -l kubeconfig -r -F /m);
    // fish expands the words of -a as a command line's: the controllers' * is escaped.
    assert.match(
      fish,
      /^complete -c cirrus -n '__fish_seen_subcommand_from start' -l controllers -x -a '\\\* cloud-node-controller /m,
    );
  });
});

describe('relative paths', () => {
  const command = {
    options: ['cloudConfig', 'kubeconfig', 'signingSecretFile', 'dataDir', 'providerModule', 'routingConfig'] as const,
  };

  it('are read from INIT_CWD when npm ran cirrus from another directory', () => {
    const here = process.cwd();
    const user = mkdtempSync(join(tmpdir(), 'cirrus-user-'));
    const { config } = parseCommandLine(
      command,
      ['--cloud-config', 'top.yaml', '--kubeconfig', '../kc', '--data-dir', 'data', '--provider-module', './acme.ts'],
      {
        INIT_CWD: user,
        npm_package_json: join(here, 'package.json'),
        CIRRUS_SIGNING_SECRET_FILE: 'secret',
        CIRRUS_ROUTING_CONFIG: '/etc/routing.yaml',
      },
    );
    assert.notEqual(user, here);
    assert.deepEqual(config, {
      cloudConfig: join(user, 'top.yaml'),
      kubeconfig: resolve(user, '../kc'),
      signingSecretFile: join(user, 'secret'),
      dataDir: join(user, 'data'),
      providerModule: join(user, 'acme.ts'),
      routingConfig: '/etc/routing.yaml',
    });
  });

  it('are read from the working directory otherwise, and a package name stays a package name', () => {
    const { config } = parseCommandLine(command, ['--cloud-config', 'top.yaml', '--provider-module', 'cirrus-acme'], {
      INIT_CWD: process.cwd(),
    });
    assert.equal(config.cloudConfig, join(process.cwd(), 'top.yaml'));
    assert.equal(config.providerModule, 'cirrus-acme');
    assert.equal(userDirectory({}), process.cwd());
    const npm = { npm_package_json: join(process.cwd(), 'package.json') };
    assert.equal(userDirectory({ ...npm, INIT_CWD: 'relative' }), process.cwd(), 'INIT_CWD is npm-made: absolute');
    assert.equal(
      userDirectory({ INIT_CWD: '/somewhere', npm_package_json: '/elsewhere/package.json' }),
      process.cwd(),
      "a cirrus an npm script started in another folder: INIT_CWD is the script's, not this cirrus's",
    );
    assert.equal(userDirectory({ INIT_CWD: '/somewhere' }), process.cwd(), 'not run by npm');
  });

  it('name the resolved path when a file cannot be read: --signing-secret-file', async () => {
    const user = mkdtempSync(join(tmpdir(), 'cirrus-user-'));
    const { code, stderr } = await run(
      ['reconcile', 'node', 'w1', '--url', 'http://127.0.0.1:9', '--signing-secret-file', 'missing.secret'],
      { INIT_CWD: user, npm_package_json: join(process.cwd(), 'package.json'), XDG_RUNTIME_DIR: user },
    );
    assert.equal(code, usageExitCode);
    assert.match(
      stderr,
      new RegExp(`^cirrus reconcile: --signing-secret-file: cannot read ${join(user, 'missing.secret')}: ENOENT\\n`),
    );
  });

  it('name the resolved path when a file cannot be read: --cloud-config', async () => {
    const user = mkdtempSync(join(tmpdir(), 'cirrus-user-'));
    writeFileSync(join(user, 'here.yaml'), '');
    const { code, stderr } = await run(['conformance', '--cloud-provider', 'static', '--cloud-config', 'top.yaml'], {
      INIT_CWD: user,
      npm_package_json: join(process.cwd(), 'package.json'),
    });
    assert.equal(code, 1);
    assert.match(stderr, new RegExp(`could not read cloud-config ${join(user, 'top.yaml')}: `));
  });
});
