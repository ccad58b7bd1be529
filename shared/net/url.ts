// URLs made safe to show: without the credentials a URL can carry (`user:password@`) and without
// its query string and fragment (where tokens, signatures and API keys travel: `?token=…`,
// `?X-Amz-Signature=…`). Every message that can reach a tenant's Event, a reply or a log line goes
// through scrubUrls (shared/kube/events.ts, shared/host/errors.ts, app/log.ts), whoever wrote it:
// a provider of cirrus's own or a third party's, whose error text may repeat a URL it was given.

/** What stands in for what was taken out. */
export const SCRUBBED = '[redacted]';

// A URL in free text: a scheme, `//`, an optional userinfo (anything up to the last `@` before the
// path that is not a separator), the host and path, then an optional query and fragment. The text
// of a URL ends at whitespace, a quote or an angle bracket, as in prose and in JSON.
const urlInText = /\b[a-z][a-z0-9+.-]*:\/\/[^\s"'<>`]*/gi;
const parts = /^([^:]+:\/\/)([^/?#]*@)?([^?#]*)(\?[^#]*)?/;

/**
 * `text` with every URL in it scrubbed: userinfo replaced by `[redacted]@`, a query by
 * `?[redacted]`, a fragment dropped. Text without `://` is returned as it is, at the cost of one search.
 */
export function scrubUrls(text: string): string {
  if (!text.includes('://')) return text;
  return text.replace(urlInText, scrubOne);
}

function scrubOne(url: string): string {
  const [, scheme = '', userinfo, rest = '', query] = parts.exec(url) ?? [];
  return `${scheme}${userinfo === undefined ? '' : `${SCRUBBED}@`}${rest}${query === undefined ? '' : `?${SCRUBBED}`}`;
}

/** One URL to show (a log field, a message): scheme, host, port and path, nothing that may be a secret. */
export function displayUrl(url: URL | string): string {
  const parsed = typeof url === 'string' ? URL.parse(url) : url;
  if (parsed === null) return scrubUrls(String(url));
  const userinfo = parsed.username !== '' || parsed.password !== '' ? `${SCRUBBED}@` : '';
  const query = parsed.search === '' ? '' : `?${SCRUBBED}`;
  return `${parsed.protocol}//${userinfo}${parsed.host}${parsed.pathname}${query}`;
}

/** Whether `url` carries credentials in its userinfo (`user@`, `user:password@`). */
export function hasUserinfo(url: URL): boolean {
  return url.username !== '' || url.password !== '';
}
