// The conformance kit: the provider contract (shared/cloud/provider.ts) as executable checks.
// `cirrus conformance` runs it from the command line; tests run it against a provider they build:
//
//   const report = await runConformance(provider, parseFixture(text, file), { clusterName });
//   assert.equal(report.failed, 0, report.results.map(formatResult).join(''));
//
// The checks, the fixture format and the cancellation bound: docs/conformance.md.

export type { Check, CheckContext, ObservedError, Skip } from './check.ts';
export { checkCombination, combinationRules } from './combination.ts';
export {
  FixtureError,
  fixtureFrom,
  parseFixture,
  type Fixture,
  type FixtureInput,
  type KnownInstance,
  type NodeSpec,
} from './fixture.ts';
export { formatJunit, formatResult, formatSummary } from './report.ts';
export {
  allChecks,
  runConformance,
  type CheckResult,
  type ConformanceOptions,
  type ConformanceReport,
} from './runner.ts';
