// The relay's `--to` flag: `<function or all>=<url>`, or `<function or all>@<provider>=<url>` for a
// destination serving one provider's Nodes and Services in a split hybrid deployment (./owners.ts),
// named `<function>-<provider>` (a destination name is lower-case letters, digits and "-").

/** A destination as a source gives it, before validation (routing.ts addDestination). */
export interface DestinationEntry {
  readonly name: string;
  readonly url: string;
  /** What it is fed; undefined: the function (or `all`) its name is. */
  readonly feed?: string | undefined;
  readonly providers?: readonly string[] | undefined;
}

/** The destination a `--to` value gives among the functions `names`, or what is wrong with it. */
export function destinationFlag(flag: string, names: readonly string[]): DestinationEntry | string {
  const at = flag.indexOf('=');
  const [feed = '', provider, extra] = flag.slice(0, Math.max(at, 0)).split('@');
  const url = flag.slice(at + 1);
  if (at <= 0 || feed === '' || provider === '' || extra !== undefined) {
    const example = names[0] ?? 'name';
    return `expected <function>=<url> or <function>@<provider>=<url>, e.g. ${example}=http://${example}.cirrus.svc`;
  }
  if (provider === undefined) return { name: feed, url };
  if (feed !== 'all' && !names.includes(feed)) return `${feed} is not a function (${names.join(', ')}) or "all"`;
  return { name: `${feed}-${provider}`, url, feed, providers: [provider] };
}
