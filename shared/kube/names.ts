// Validation of object names that arrive in requests, before they reach an API path.

const dnsSubdomain = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Why `name` is not a valid Node name (a DNS subdomain), or undefined when it is. */
export function invalidNodeName(name: string): string | undefined {
  if (name.length === 0) return 'a node name must not be empty';
  if (name.length > 253 || !dnsSubdomain.test(name)) {
    return `"${name}" is not a valid node name (a DNS subdomain: lower-case letters, digits, "-" and ".", at most 253)`;
  }
  return undefined;
}
