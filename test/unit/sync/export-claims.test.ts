import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { claimProblem } from '../../../src/sync/export-claims.js';

const backups = { group: 'backup.relsync.dev', resource: 'backups' };
const ours = 'a'.repeat(64);
const lookAlike = 'b'.repeat(64);

describe('the claim on a type of another APIExport (identityHash)', () => {
  it('is met by a claim on the type with that identity', () => {
    assert.equal(claimProblem([{ group: '', resource: 'secrets' }, { ...backups, identityHash: ours }], backups, ours), undefined);
  });

  it('is not met by a claim of another identity, by one without, or by none', () => {
    assert.match(claimProblem([{ ...backups, identityHash: lookAlike }], backups, ours) ?? '', new RegExp(`claims backups\\.backup\\.relsync\\.dev of the export with identity ${lookAlike}, not of ${ours}`));
    assert.match(claimProblem([backups], backups, ours) ?? '', /of no other export \(no identityHash\)/);
    assert.match(claimProblem([{ ...backups, group: 'other.example', identityHash: ours }], backups, ours) ?? '', /claims no backups\.backup\.relsync\.dev: add a permission claim on it with identityHash a{64}/);
    assert.match(claimProblem([], backups, ours) ?? '', /claims no backups/);
    // Two claims on the name: never "the first one".
    assert.match(claimProblem([{ ...backups, identityHash: ours }, { ...backups, identityHash: lookAlike }], backups, ours) ?? '', /of the export with identity b{64}/);
  });
});
