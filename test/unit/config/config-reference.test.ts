// docs/configuration.md names every field of the config schema: its field index is what the
// schema generates (src/config/config-reference.ts), and the hand-written reference above it
// mentions each top-level field.
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { configFields, INDEX_BEGIN, withFieldIndex } from '../../../src/config/config-reference.js';

const doc = readFileSync(fileURLToPath(new URL('../../../../docs/configuration.md', import.meta.url)), 'utf8');

describe('docs/configuration.md', () => {
  it('holds the field index the schema generates (`npm run build && node scripts/config-reference.mjs` writes it)', () => {
    const next = withFieldIndex(doc);
    assert.notEqual(next, undefined, 'the config-fields markers are in the file');
    assert.equal(next, doc);
  });

  it('lists the fields with their defaults, nested and in lists', () => {
    const byPath = new Map(configFields().map((f) => [f.path, f]));
    assert.equal(byPath.get('agentName')?.default, '"relsync"');
    assert.equal(byPath.get('limits.relatedPerPrimary')?.default, '500');
    assert.equal(byPath.get('platformClusters')?.required, true);
    assert.ok(byPath.has('platformClusters[].kcp.apiExportEndpointSlice'));
    assert.ok(byPath.has('resources[].related[].cleanupPolicy'));
    assert.ok(byPath.has('resources[].related[].reference.path'));
  });

  it('explains every top-level field above the index', () => {
    const prose = doc.slice(0, doc.indexOf(INDEX_BEGIN));
    const topLevel = configFields().filter((f) => !f.path.includes('.') && !f.path.includes('['));
    assert.ok(topLevel.length > 10);
    for (const f of topLevel) assert.match(prose, new RegExp(`\`${f.path}[.\`\\[]`), f.path);
  });
});
