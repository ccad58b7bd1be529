// Canonical function names and the aliases they answer to. Names are IDs: a rename keeps the old
// name as an alias, and aliases are never removed. Aliases include the Go CCM's controller names
// and their short forms (k8s.io/cloud-provider names/controller_names.go).

const aliases: Readonly<Record<string, string>> = {
  'node-init': 'node-init',
  'cloud-node-controller': 'node-init',
  'cloud-node': 'node-init',
  'node-lifecycle': 'node-lifecycle',
  'cloud-node-lifecycle-controller': 'node-lifecycle',
  'cloud-node-lifecycle': 'node-lifecycle',
  'service-lb': 'service-lb',
  'service-lb-controller': 'service-lb',
  service: 'service-lb',
  routes: 'routes',
  'node-route-controller': 'routes',
  route: 'routes',
};

/** The canonical name for a function name or alias, or undefined when none matches. */
export function canonicalFunction(name: string): string | undefined {
  return Object.hasOwn(aliases, name) ? aliases[name] : undefined;
}

/** Every name and alias accepted, for messages. */
export function knownFunctionNames(): string[] {
  return Object.keys(aliases);
}

/**
 * The Go CCM's controller names (k8s.io/cloud-provider names/controller_names.go), their aliases,
 * and the function that does each one's work.
 */
const controllers: readonly { readonly name: string; readonly alias: string; readonly fn: string }[] = [
  { name: 'cloud-node-controller', alias: 'cloud-node', fn: 'node-init' },
  { name: 'cloud-node-lifecycle-controller', alias: 'cloud-node-lifecycle', fn: 'node-lifecycle' },
  { name: 'service-lb-controller', alias: 'service', fn: 'service-lb' },
  { name: 'node-route-controller', alias: 'route', fn: 'routes' },
];

/**
 * The functions `--controllers` selects, with the Go CCM's rules: `foo` enables, `-foo` disables,
 * the first explicit mention wins, `*` enables every controller not disabled. Names are canonical,
 * aliases, or cirrus function names. Throws an Error naming an unknown name.
 */
export function selectControllers(entries: readonly string[]): string[] {
  const decided = new Map<string, boolean>();
  let star = false;
  for (const entry of entries) {
    if (entry === '*') {
      star = true;
      continue;
    }
    const disabled = entry.startsWith('-');
    const fn = controllerFunction(disabled ? entry.slice(1) : entry);
    if (fn === undefined) {
      throw new Error(`"${entry}" is not in the list of known controllers (${controllers.map((c) => c.name).join(', ')}, or their aliases)`);
    }
    if (!decided.has(fn)) decided.set(fn, !disabled);
  }
  return controllers.map((c) => c.fn).filter((fn) => decided.get(fn) ?? star);
}

function controllerFunction(name: string): string | undefined {
  return controllers.find((c) => c.name === name || c.alias === name || c.fn === name)?.fn;
}
