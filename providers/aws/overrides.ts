// cloud-provider-aws's `[ServiceOverride "<n>"]` sections: another endpoint (and signing) for one
// AWS service in one region, as upstream's CloudConfig reads them.

import { CloudConfigError } from '../../shared/cloud/errors.ts';
import type { Section } from './gcfg.ts';

/** An upstream `[ServiceOverride "<n>"]` section: another endpoint for one service in one region. */
export interface ServiceOverride {
  readonly section: string;
  /** The SDK service ID: `EC2` or `Elastic Load Balancing v2` (case-insensitive; `ec2`, `elasticloadbalancing` too). */
  readonly service: 'ec2' | 'elbv2' | 'other';
  readonly region: string;
  readonly url: string;
  readonly signingRegion: string;
  readonly signingName: string | undefined;
}

const overrideKeys = new Map(
  ['Service', 'Region', 'URL', 'SigningRegion', 'SigningMethod', 'SigningName'].map((k) => [k.toLowerCase(), k]),
);

/** The `[ServiceOverride "<n>"]` sections; any other section but `[Global]` is an error. */
export function readOverrides(sections: Map<string, Section>, file: string | undefined): ServiceOverride[] {
  const serviceOverrides: ServiceOverride[] = [];
  for (const [name, section] of sections) {
    if (name === 'global') continue;
    const override = /^serviceoverride "(.*)"$/.exec(name);
    if (override === null)
      throw new CloudConfigError(file, `[${name}]`, 'unknown section: expected [Global] or [ServiceOverride "<n>"]');
    serviceOverrides.push(readOverride(override[1] ?? '', section, file));
  }
  checkDuplicateOverrides(serviceOverrides, file);
  return serviceOverrides;
}

function readOverride(name: string, section: Section, file: string | undefined): ServiceOverride {
  const field = (key: string): string => `ServiceOverride "${name}".${key}`;
  for (const key of section.keys()) {
    if (!overrideKeys.has(key))
      throw new CloudConfigError(
        file,
        field(key),
        `unknown key; the keys are ${[...overrideKeys.values()].join(', ')}`,
      );
  }
  const optional = (key: string): string | undefined => overrideValue(section, key, field(key), file);
  const needed = (key: string): string => {
    const value = optional(key);
    if (value === undefined) throw new CloudConfigError(file, field(key), 'required');
    return value;
  };
  const service = needed('Service');
  const url = needed('URL');
  checkOverrideUrl(url, field('URL'), file);
  const method = optional('SigningMethod');
  if (method !== undefined && method !== 'v4' && method !== 'sigv4') {
    throw new CloudConfigError(file, field('SigningMethod'), `"${method}": only v4 signing is supported`);
  }
  return {
    section: name,
    service: overrideService(service),
    region: needed('Region'),
    url,
    signingRegion: needed('SigningRegion'),
    signingName: optional('SigningName'),
  };
}

/** A `[ServiceOverride]` key's value, trimmed; undefined when absent or empty; an error when given twice. */
function overrideValue(section: Section, key: string, field: string, file: string | undefined): string | undefined {
  const values = section.get(key.toLowerCase());
  if (values !== undefined && values.length > 1) throw new CloudConfigError(file, field, 'given twice');
  const value = values?.[0]?.trim();
  return value === '' ? undefined : value;
}

function checkOverrideUrl(url: string, field: string, file: string | undefined): void {
  try {
    const parsed = new URL(url);
    if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:') throw new Error('not http(s)');
  } catch {
    throw new CloudConfigError(file, field, `"${url}" is not an http(s) URL`);
  }
}

/** The SDK service ID (case-insensitive) as the client it overrides. */
function overrideService(service: string): ServiceOverride['service'] {
  const id = service.toLowerCase();
  if (id === 'ec2') return 'ec2';
  return id === 'elastic load balancing v2' || id === 'elasticloadbalancing' ? 'elbv2' : 'other';
}

function checkDuplicateOverrides(overrides: readonly ServiceOverride[], file: string | undefined): void {
  const seen = new Set<string>();
  for (const o of overrides) {
    const key = `${o.service}/${o.region}`;
    if (o.service !== 'other' && seen.has(key)) {
      throw new CloudConfigError(
        file,
        `ServiceOverride "${o.section}"`,
        `a second override for ${o.service} in ${o.region}`,
      );
    }
    seen.add(key);
  }
}
