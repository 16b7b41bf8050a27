// Imports point down the layers, never up or sideways (run by `npm run lint`):
//
//   cli → controller → (sync, server) → config → (rules, store, kube) → core → util
//
// A folder may import its own files and any folder on a lower floor; folders
// on one floor do not import each other (rules compile what config composes,
// kube knows nothing of config, server nothing of the controller). Prints
// every import that breaks this, with file and line, and exits 1.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';

const floors = { cli: 6, controller: 5, sync: 4, server: 4, config: 3, rules: 2, store: 2, kube: 2, core: 1, util: 0 };

function files(dir) {
  return readdirSync(dir).flatMap((entry) => {
    const path = join(dir, entry);
    return statSync(path).isDirectory() ? files(path) : /\.(ts|mts|js|mjs)$/.test(path) ? [path] : [];
  });
}

const problems = [];
for (const file of files('src')) {
  const folder = relative('src', file).split('/')[0];
  if (!(folder in floors)) {
    problems.push(`${file}: the folder src/${folder} has no floor in scripts/check-layers.mjs`);
    continue;
  }
  const text = readFileSync(file, 'utf8');
  // Every relative module specifier: `from '…'` / `from "…"` (imports and re-exports, over line
  // breaks too), bare `import '…'`, and `import('…')`; a template literal in import() is refused.
  const specifiers = /(?:\bfrom\s*|\bimport\s*\(?\s*)(['"`])(\.{1,2}\/[^'"`]*)\1/g;
  for (const match of text.matchAll(/\bimport\s*\(\s*`/g)) {
    problems.push(`${file}:${text.slice(0, match.index).split('\n').length}: a computed import path cannot be checked`);
  }
  for (const match of text.matchAll(specifiers)) {
    const [, quote, spec] = match;
    const line = text.slice(0, match.index).split('\n').length;
    if (quote === '`') {
      problems.push(`${file}:${line}: a computed import path cannot be checked: ${spec}`);
      continue;
    }
    const path = relative('src', normalize(join(dirname(file), spec)));
    const target = path.split('/')[0];
    if (path.startsWith('..')) {
      problems.push(`${file}:${line}: src/${folder} imports from outside src: ${spec}`);
      continue;
    }
    if (target === folder || !(target in floors)) continue;
    if (floors[target] >= floors[folder]) {
      const way = floors[target] === floors[folder] ? 'sideways' : 'up';
      problems.push(`${file}:${line}: src/${folder} imports src/${target} (${way}): ${spec}`);
    }
  }
}
if (problems.length > 0) {
  console.error(`imports against the layers (cli → controller → sync, server → config → rules, store, kube → core → util):\n${problems.join('\n')}`);
  process.exit(1);
}
console.log('check-layers: every import points down');
