// "Did you mean …?" for a mistyped command, flag, function, provider or controller name: the known
// names closest to what was typed (edit distance with transpositions, as `strat` → `start`), and
// those the typed word is a mistyped beginning of (`nodes` → `node-init`, `node-lifecycle`).

/** The optimal string alignment distance: insertions, deletions, substitutions and swaps of neighbours. */
export function editDistance(a: string, b: string): number {
  const rows: number[][] = Array.from({ length: a.length + 1 }, (_, i) =>
    Array.from({ length: b.length + 1 }, (_, j) => (i === 0 ? j : j === 0 ? i : 0)),
  );
  const at = (i: number, j: number): number => rows[i]?.[j] ?? Infinity;
  for (let i = 1; i <= a.length; i++) {
    const row = rows[i] ?? [];
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let best = Math.min(at(i - 1, j) + 1, at(i, j - 1) + 1, at(i - 1, j - 1) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) best = Math.min(best, at(i - 2, j - 2) + 1);
      row[j] = best;
    }
  }
  return at(a.length, b.length);
}

/**
 * The names among `known` that `typed` most likely meant, best first; `canonical` maps an alias to
 * the name to suggest (each suggested once). Empty when nothing is close.
 */
export function suggest(
  typed: string,
  known: readonly string[],
  canonical: (name: string) => string = (n) => n,
): string[] {
  // Flags are compared without their dashes.
  const bare = (text: string): string => text.replace(/^-+/, '').toLowerCase();
  const word = bare(typed);
  // A third of the word may be wrong (at least one letter): `strat`, `cloud-provder`, `servce`.
  const allowed = Math.max(1, Math.floor(word.length / 3));
  const scored: { name: string; score: number }[] = [];
  for (const name of known) {
    const other = bare(name);
    const whole = editDistance(word, other);
    // A mistyped beginning: only for words long enough to mean something.
    const start =
      word.length >= 4 && other.length > word.length ? editDistance(word, other.slice(0, word.length)) : Infinity;
    const score = Math.min(whole, start);
    if (score <= allowed && name !== typed) scored.push({ name: canonical(name), score });
  }
  scored.sort((a, b) => a.score - b.score);
  const best = scored[0]?.score;
  return [...new Set(scored.filter((s) => s.score === best).map((s) => s.name))];
}

/** `did you mean 'start'?`, `did you mean 'node-init' or 'node-lifecycle'?`, or '' when nothing is close. */
export function didYouMean(typed: string, known: readonly string[], canonical?: (name: string) => string): string {
  const names = suggest(typed, known, canonical).map((n) => `'${n}'`);
  if (names.length === 0) return '';
  const last = names.pop() ?? '';
  return `did you mean ${names.length === 0 ? last : `${names.join(', ')} or ${last}`}?`;
}

/** didYouMean() after `; `, or '' when nothing is close: for the end of a message. */
export function hint(typed: string, known: readonly string[], canonical?: (name: string) => string): string {
  const question = didYouMean(typed, known, canonical);
  return question === '' ? '' : `; ${question}`;
}
