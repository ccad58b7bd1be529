// Kubernetes name syntax for the static inventory, checked when the file is read: a value the API
// server would refuse (a Node name, a label) would otherwise only fail later, inside the node
// controller's update, and keep the Node tainted forever with a much less helpful message.
// Each function answers the problem with `value`, or undefined when it is valid.

const DNS_LABEL = '[a-z0-9]([-a-z0-9]*[a-z0-9])?';
const DNS_SUBDOMAIN = new RegExp(`^${DNS_LABEL}(\\.${DNS_LABEL})*$`);
const DNS_LABEL_ONLY = new RegExp(`^${DNS_LABEL}$`);
const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_VALUE = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;
/** The label domains the node controller drops from additional labels (cloud-provider's node controller). */
const RESERVED_LABEL = /(^|\.)(kubernetes|k8s)\.io\//;
/** `<scheme>://<id>`: a URI-style scheme, then anything but whitespace (cloud IDs may hold "/" and ":"). */
const PROVIDER_ID = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/\S+$/;

const CHARSET = 'letters, digits, "-", "_" or ".", starting and ending with a letter or digit';

/** A DNS-1123 subdomain, the syntax of Node names and of label-key prefixes. */
export function dnsSubdomainProblem(value: string): string | undefined {
  if (value.length === 0 || value.length > 253) return 'must be 1 to 253 characters';
  if (!DNS_SUBDOMAIN.test(value)) {
    return 'must be a DNS subdomain: lower-case letters, digits, "-" and ".", starting and ending with a letter or digit';
  }
  return undefined;
}

/** A label key: an optional DNS-subdomain prefix and "/", then a name; never in a reserved domain. */
export function labelKeyProblem(key: string): string | undefined {
  const slash = key.indexOf('/');
  if (slash !== -1) {
    const problem = dnsSubdomainProblem(key.slice(0, slash));
    if (problem !== undefined) return `is not a valid label key: its prefix ${problem}`;
  }
  const name = key.slice(slash + 1);
  if (name.length === 0 || name.length > 63) return 'is not a valid label key: its name must be 1 to 63 characters';
  if (!LABEL_NAME.test(name)) return `is not a valid label key: its name must be ${CHARSET}`;
  if (RESERVED_LABEL.test(key)) {
    return 'is in the kubernetes.io or k8s.io domain, which the node controller never applies from a provider';
  }
  return undefined;
}

/** A label value: empty, or up to 63 characters of the label charset. */
export function labelValueProblem(value: string): string | undefined {
  if (value.length > 63) return 'is not a valid label value: it must be at most 63 characters';
  if (!LABEL_VALUE.test(value)) return `is not a valid label value: it must be empty or ${CHARSET}`;
  return undefined;
}

/** A provider ID: `<scheme>://<id>`. */
export function providerIdProblem(value: string): string | undefined {
  return PROVIDER_ID.test(value) ? undefined : 'must have the form <scheme>://<id>, like static://worker-1';
}

/** A DNS-1123 label, the syntax of namespace names and of the static provider's pool names. */
export function dnsLabelProblem(value: string): string | undefined {
  if (value.length === 0 || value.length > 63) return 'must be 1 to 63 characters';
  if (!DNS_LABEL_ONLY.test(value)) {
    return 'must be a DNS label: lower-case letters, digits and "-", starting and ending with a letter or digit';
  }
  return undefined;
}
