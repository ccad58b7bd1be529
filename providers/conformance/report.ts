// A run's results as text (one line per check, then a summary) and as JUnit XML for CI systems.

import type { CheckResult, ConformanceReport } from './runner.ts';

const labels = { pass: 'PASS', fail: 'FAIL', skip: 'SKIP' } as const;

/**
 * One check's result as text: `PASS  <id>  <rule>` (`PASS  [<provider>] <id>  <rule>` when it names
 * its provider), then the failure or the reason for a skip, indented.
 */
export function formatResult(result: CheckResult): string {
  const provider = result.provider === undefined ? '' : `[${result.provider}] `;
  const head = `${labels[result.outcome]}  ${provider}${result.id}  ${result.rule}`;
  if (result.message === undefined) return `${head}\n`;
  const why = result.outcome === 'fail' ? 'broken' : 'skipped';
  return `${head}\n      ${why}: ${result.message.replaceAll('\n', '\n      ')}\n`;
}

/** The summary line. */
export function formatSummary(report: ConformanceReport): string {
  const verdict = report.failed === 0 ? 'conformant' : 'NOT conformant';
  return (
    `\nprovider ${report.provider}: ${report.passed} passed, ${report.failed} failed, ${report.skipped} skipped ` +
    `(${(report.durationMs / 1000).toFixed(1)} s): ${verdict}\n`
  );
}

function xml(text: string): string {
  return text
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;')
    .replaceAll("'", '&apos;')
    .replaceAll(/[^\t\n\r\u0020-\uD7FF\uE000-\uFFFD]/gu, '?');
}

/**
 * The report as a JUnit XML document: one testsuite, one testcase per check (classname = its
 * group); several reports (a combination of providers), one testsuite each.
 */
export function formatJunit(report: ConformanceReport | readonly ConformanceReport[]): string {
  const reports = 'results' in report ? [report] : report;
  return [
    '<?xml version="1.0" encoding="UTF-8"?>',
    '<testsuites>',
    ...reports.flatMap(suite),
    '</testsuites>',
    '',
  ].join('\n');
}

function suite(report: ConformanceReport): string[] {
  const cases = report.results.map((r) => {
    const group = r.id.split('.')[0] ?? r.id;
    const open = `    <testcase classname="conformance.${xml(group)}" name="${xml(r.provider === undefined ? r.id : `[${r.provider}] ${r.id}`)}" time="${(r.durationMs / 1000).toFixed(3)}"`;
    const detail = `rule: ${r.rule}\nsource: ${r.source}`;
    if (r.outcome === 'pass') return `${open}>\n      <system-out>${xml(detail)}</system-out>\n    </testcase>`;
    if (r.outcome === 'skip') return `${open}>\n      <skipped message="${xml(r.message ?? '')}"/>\n    </testcase>`;
    return `${open}>\n      <failure message="${xml(r.message ?? '')}" type="ConformanceFailure">${xml(`${r.message ?? ''}\n${detail}`)}</failure>\n    </testcase>`;
  });
  const head =
    `  <testsuite name="cirrus conformance (${xml(report.provider)})" tests="${report.results.length}" ` +
    `failures="${report.failed}" errors="0" skipped="${report.skipped}" time="${(report.durationMs / 1000).toFixed(3)}">`;
  return [head, ...cases, '  </testsuite>'];
}
