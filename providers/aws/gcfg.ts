// The gcfg (INI) syntax of cloud-provider-aws's cloud-config, as gopkg.in/gcfg.v1 (upstream's parser) reads it:
// `[Section]` and `[Section "sub"]` headers (names case-insensitive), `Key = value` lines (keys
// case-insensitive and repeatable), `;` and `#` comments, double quotes with backslash escapes,
// and a bare key meaning `true`.

import { CloudConfigError } from '../../shared/cloud/errors.ts';

export type Section = Map<string, string[]>;

/** The sections of a gcfg file: `[Global]`, `[ServiceOverride "1"]`; names case-insensitive, keys repeatable. */
export function parseGcfg(text: string, file: string | undefined): Map<string, Section> {
  const sections = new Map<string, Section>();
  let current: Section | undefined;
  let currentName = '';
  for (const [index, raw] of text.split(/\r?\n/).entries()) {
    const line = stripComment(raw).trim();
    if (line === '') continue;
    const where = `line ${index + 1}`;
    const header = /^\[\s*([A-Za-z][-A-Za-z0-9.]*)\s*(?:"((?:[^"\\]|\\.)*)")?\s*\]$/.exec(line);
    if (header !== null) {
      currentName = sectionName(header);
      current = sections.get(currentName) ?? new Map();
      sections.set(currentName, current);
      continue;
    }
    const pair = /^([A-Za-z][-A-Za-z0-9]*)\s*(?:=\s*(.*))?$/.exec(line);
    if (pair === null)
      throw new CloudConfigError(file, where, `cannot read "${raw.trim()}": expected [Section] or Key = value`);
    if (current === undefined) throw new CloudConfigError(file, where, `"${pair[1]}" is outside any [Section]`);
    const [, key = '', value] = pair;
    addValue(current, key.toLowerCase(), unquote(value ?? 'true', file, `${currentName}.${key}`));
  }
  return sections;
}

/** `global`, or `serviceoverride "1"`: the section name lower-cased, the subsection as given. */
function sectionName(header: RegExpExecArray): string {
  const [, name = '', subsection] = header;
  return subsection === undefined ? name.toLowerCase() : `${name.toLowerCase()} "${subsection}"`;
}

/** Keys are repeatable: each value is kept, in order. */
function addValue(section: Section, key: string, value: string): void {
  section.set(key, [...(section.get(key) ?? []), value]);
}

function stripComment(line: string): string {
  let quoted = false;
  for (let i = 0; i < line.length; i += 1) {
    const c = line[i];
    if (c === '\\') i += 1;
    else if (c === '"') quoted = !quoted;
    else if (!quoted && (c === ';' || c === '#')) return line.slice(0, i);
  }
  return line;
}

function unquote(value: string, file: string | undefined, field: string): string {
  const trimmed = value.trim();
  if (!trimmed.includes('"')) return trimmed;
  let out = '';
  let quoted = false;
  for (let i = 0; i < trimmed.length; i += 1) {
    const c = trimmed.charAt(i);
    if (c === '"') quoted = !quoted;
    else if (c === '\\') {
      const next = trimmed[i + 1];
      if (next === undefined) throw new CloudConfigError(file, field, 'ends in a lone backslash');
      out += next === 'n' ? '\n' : next === 't' ? '\t' : next;
      i += 1;
    } else out += c;
  }
  if (quoted) throw new CloudConfigError(file, field, 'has an unterminated quote');
  return out;
}
