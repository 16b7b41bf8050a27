// Imports point down the layers, never up or sideways (run by `npm run lint`):
//
//   cli → controller → (sync, server) → cache → config → (rules, store, kube) → core → util
//
// A folder may import its own files and any folder on a lower floor; folders
// on one floor do not import each other (rules compile what config composes,
// kube knows nothing of config, server nothing of the controller). Prints
// every import that breaks this, with file and line, and exits 1. Cycles
// inside one folder are check-import-cycles.mjs's to find.
import { dirname, join, normalize, relative } from 'node:path';
import { relativeImports, sourceFiles } from './source-imports.mjs';

const floors = { cli: 7, controller: 6, sync: 5, server: 5, cache: 4, config: 3, rules: 2, store: 2, kube: 2, core: 1, util: 0 };

const problems = [];
for (const file of sourceFiles('src')) {
  const folder = relative('src', file).split('/')[0];
  if (!(folder in floors)) {
    problems.push(`${file}: the folder src/${folder} has no floor in scripts/check-layers.mjs`);
    continue;
  }
  const { imports, problems: unreadable } = relativeImports(file);
  problems.push(...unreadable);
  for (const { spec, line } of imports) {
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
  console.error(`imports against the layers (cli → controller → sync, server → cache → config → rules, store, kube → core → util):\n${problems.join('\n')}`);
  process.exit(1);
}
console.log('check-layers: every import points down');
