// Validation of object names that arrive in requests, before they reach an API path.

const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

/** Why `name` is not a valid Node name (a DNS subdomain), or undefined when it is. */
export function invalidNodeName(name: string): string | undefined {
  if (name.length === 0) return 'a node name must not be empty';
  if (name.length > 253 || !dnsSubdomain.test(name)) {
    return `"${name}" is not a valid node name (a DNS subdomain: lower-case letters, digits, "-" and ".", at most 253)`;
  }
  return undefined;
}

/** Why `name` is not a valid Service or namespace name (a DNS label), or undefined when it is. */
export function invalidLabelName(what: 'service' | 'namespace', name: string): string | undefined {
  if (name.length === 0) return `a ${what} name must not be empty`;
  if (name.length > 63 || !dnsLabel.test(name)) {
    return `"${name}" is not a valid ${what} name (a DNS label: lower-case letters, digits and "-", at most 63)`;
  }
  return undefined;
}
