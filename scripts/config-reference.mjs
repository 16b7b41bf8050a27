// Writes the field index of docs/configuration.md afresh from the zod schema
// (src/config/config-reference.ts), after `npm run build`. With --check it
// writes nothing and exits 1 when the index in the file is out of date (the
// unit test test/unit/config/config-reference.test.ts checks the same).
import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath, URL } from 'node:url';

const { withFieldIndex } = await import('../dist/src/config/config-reference.js');
const file = fileURLToPath(new URL('../docs/configuration.md', import.meta.url));
const doc = readFileSync(file, 'utf8');
const next = withFieldIndex(doc);
if (next === undefined) {
  console.error(`${file}: no config-fields:begin / config-fields:end markers`);
  process.exit(1);
}
if (process.argv.includes('--check')) {
  if (next !== doc) {
    console.error(`${file}: the field index is out of date; run \`npm run build && node scripts/config-reference.mjs\``);
    process.exit(1);
  }
} else if (next !== doc) {
  writeFileSync(file, next);
  console.log(`${file}: field index written`);
} else {
  console.log(`${file}: field index up to date`);
}
