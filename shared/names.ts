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
