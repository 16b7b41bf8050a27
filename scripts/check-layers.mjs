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
    return statSync(path).isDirectory() ? files(path) : path.endsWith('.ts') ? [path] : [];
  });
}

const problems = [];
for (const file of files('src')) {
  const folder = relative('src', file).split('/')[0];
  if (!(folder in floors)) {
    problems.push(`${file}: the folder src/${folder} has no floor in scripts/check-layers.mjs`);
    continue;
  }
  readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
    const spec = /(?:from|import\()\s*'(\.{1,2}\/[^']+)'/.exec(line)?.[1];
    if (!spec) return;
    const target = relative('src', normalize(join(dirname(file), spec))).split('/')[0];
    if (target === folder || !(target in floors)) return;
    if (floors[target] >= floors[folder]) {
      const way = floors[target] === floors[folder] ? 'sideways' : 'up';
      problems.push(`${file}:${i + 1}: src/${folder} imports src/${target} (${way}): ${spec}`);
    }
  });
}
if (problems.length > 0) {
  console.error(`imports against the layers (cli → controller → sync, server → config → rules, store, kube → core → util):\n${problems.join('\n')}`);
  process.exit(1);
}
console.log('check-layers: every import points down');
