// The relative imports of a source tree, read as text, for the lint checks
// (check-layers.mjs, check-import-cycles.mjs). Read here once, so that both
// checks see the same imports: type-only ones count too, since they tie the
// files together for a reader just as much as for the compiler.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';

/** Every source file below `dir`, in name order. */
export function sourceFiles(dir) {
  return readdirSync(dir).sort().flatMap((entry) => {
    const path = join(dir, entry);
    return statSync(path).isDirectory() ? sourceFiles(path) : /\.(ts|mts|js|mjs)$/.test(path) ? [path] : [];
  });
}

/**
 * The relative module specifiers of one file, each with its line: `from '…'` / `from "…"`
 * (imports, `import type`, re-exports, over line breaks too), bare `import '…'`, and
 * `import('…')`. A template literal in import() cannot be followed: it comes back as a
 * problem, as does one with no specifier at all (`import(\`` followed by anything).
 */
export function relativeImports(file) {
  const text = readFileSync(file, 'utf8');
  const lineOf = (index) => text.slice(0, index).split('\n').length;
  const imports = [];
  const problems = [];
  for (const match of text.matchAll(/\bimport\s*\(\s*`/g)) {
    problems.push(`${file}:${lineOf(match.index)}: a computed import path cannot be checked`);
  }
  for (const match of text.matchAll(/(?:\bfrom\s*|\bimport\s*\(?\s*)(['"`])(\.{1,2}\/[^'"`]*)\1/g)) {
    const [, quote, spec] = match;
    if (quote === '`') problems.push(`${file}:${lineOf(match.index)}: a computed import path cannot be checked: ${spec}`);
    else imports.push({ spec, line: lineOf(match.index) });
  }
  return { imports, problems };
}
