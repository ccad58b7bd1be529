// The checks of a combination of providers, as one cirrus runs them in a hybrid cluster
// (docs/hybrid.md, ADR 0026): each Node belongs to the provider its provider ID's scheme names, so
// each provider's name must be that scheme (app/providers.ts initProviders refuses one that is
// not), and no two providers may answer to the same name. The kit's own checks run against each
// provider in turn (runConformance); these look at them together.

import type { CloudProvider } from '../../shared/cloud/provider.ts';
import type { Fixture } from './fixture.ts';
import type { CheckResult, ConformanceReport } from './runner.ts';

const source = 'docs/hybrid.md (Rules); app/providers.ts initProviders; shared/cloud/ownership.ts';

/** The combination's checks, by id: the rule each enforces. */
export const combinationRules = {
  'combination.name-is-scheme':
    "providerName() is the name the provider runs under, the scheme of its Nodes' provider IDs (<name>://…)",
  'combination.distinct-names': 'no two providers of the combination answer to the same providerName()',
} as const;

/**
 * Checks the providers together: one `combination.name-is-scheme` result per provider (its
 * providerName(), and the provider IDs of its fixture, against the name it runs under), then
 * `combination.distinct-names`. Each result names its provider (`provider`).
 */
export function checkCombination(
  providers: ReadonlyMap<string, CloudProvider>,
  fixtures: ReadonlyMap<string, Fixture>,
): ConformanceReport {
  const started = performance.now();
  const answered = new Map([...providers].map(([name, cloud]) => [name, nameOf(cloud)]));
  const results: CheckResult[] = [...answered].map(([name, providerName]) =>
    result('combination.name-is-scheme', name, schemeProblem(name, providerName, fixtures.get(name))),
  );
  const byAnswer = new Map<string, string[]>();
  for (const [name, providerName] of answered)
    byAnswer.set(providerName, [...(byAnswer.get(providerName) ?? []), name]);
  const shared = [...byAnswer].filter(([, names]) => names.length > 1);
  results.push(
    result(
      'combination.distinct-names',
      [...providers.keys()].join(','),
      shared.length === 0
        ? undefined
        : shared.map(([answer, names]) => `${names.join(' and ')} both answer providerName() ${answer}`).join('; '),
    ),
  );
  const failed = results.filter((r) => r.outcome === 'fail').length;
  return {
    provider: [...providers.keys()].join(','),
    results,
    passed: results.length - failed,
    failed,
    skipped: 0,
    durationMs: performance.now() - started,
  };
}

// Why `name`'s provider breaks the rule, or undefined.
function schemeProblem(name: string, providerName: string, fixture: Fixture | undefined): string | undefined {
  if (providerName !== name)
    return (
      `runs as ${name}, but providerName() answers ${providerName}: its Nodes' provider IDs (${providerName}://…) ` +
      `would name a provider this cirrus does not run, and ${name} would own none of them`
    );
  const { known, shutdown, gone } = fixture?.instances ?? { known: [], shutdown: [], gone: [] };
  const ids = [...known, ...shutdown].flatMap((i) => [i.providerID, i.expect?.providerID]);
  const foreign = [...ids, ...gone.map((i) => i.providerID)].filter(
    (id): id is string => id !== undefined && id !== '' && !id.startsWith(`${name}://`),
  );
  return foreign.length === 0
    ? undefined
    : `the fixture gives ${name}'s Nodes provider IDs of another scheme: ${foreign.join(', ')}`;
}

function nameOf(cloud: CloudProvider): string {
  try {
    return cloud.providerName();
  } catch (error) {
    return `(providerName() threw: ${(error as Error).message})`;
  }
}

function result(id: keyof typeof combinationRules, provider: string, message: string | undefined): CheckResult {
  const base = { id, rule: combinationRules[id], source, provider, durationMs: 0 };
  return message === undefined ? { ...base, outcome: 'pass' } : { ...base, outcome: 'fail', message };
}
