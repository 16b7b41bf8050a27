// Mutation rules: what each kind does to a value, what it does where the path does not fit, that
// the caller's object is never changed, and what the config refuses, with the field's path.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import { stringify } from 'yaml';
import { ConfigError } from '../../../src/config/config-problem.js';
import { parseConfig } from '../../../src/config/load-config.js';
import { mutated } from '../../../src/rules/mutation.js';

const dir = mkdtempSync(join(tmpdir(), 'relsync-mutation-'));
writeFileSync(join(dir, 'k'), 'apiVersion: v1\nkind: Config\n');

function rulesFrom(mutation: unknown) {
  const config = parseConfig(stringify({ platformClusters: [{ name: 'a', kubeconfig: 'k' }], resources: [{ group: 'demo.relsync.dev', resource: 'databases', mutation }] }), join(dir, 'relsync.yaml'));
  return config.resources[0]!.mutation!;
}

function problemsOf(mutation: unknown): string[] {
  try {
    rulesFrom(mutation);
    return [];
  } catch (err) {
    assert.ok(err instanceof ConfigError);
    return err.problems.map((p) => `${p.path}: ${p.message}`);
  }
}

describe('mutation rules', () => {
  it('delete, rewrite by regex (every match), and set from a template, in order, on a copy', () => {
    const rules = rulesFrom({
      spec: [
        { delete: { path: 'spec.debug' } },
        { regex: { path: 'spec.host', pattern: '\\.internal$', replacement: '.example.com' } },
        { regex: { path: 'spec.tags.0', pattern: 'a', replacement: 'b' } },
        { template: { path: 'spec.owner.name', template: '{{ object.metadata.name }}/{{ value }}' } },
        { regex: { path: 'spec.mode', replacement: 'fixed' } },
      ],
    });
    const input = { spec: { debug: true, host: 'db.internal', tags: ['banana'], mode: 'x' } };
    const { result, problems } = mutated(input, rules.spec, { metadata: { name: 'orders' } });
    assert.deepEqual(result, { spec: { host: 'db.example.com', tags: ['bbnbnb'], owner: { name: 'orders/' }, mode: 'fixed' } });
    assert.deepEqual(problems, []);
    assert.deepEqual(input, { spec: { debug: true, host: 'db.internal', tags: ['banana'], mode: 'x' } }, 'the source is not changed');
  });

  it('leaves a value as it was where the path does not fit, and says so', () => {
    const rules = rulesFrom({ spec: [{ regex: { path: 'spec.size', pattern: '1', replacement: '2' } }, { template: { path: 'spec.list.5', template: 'x' } }, { template: { path: 'spec.name.first', template: 'x' } }] });
    const { result, problems } = mutated({ spec: { size: 1, list: [], name: 'plain' } }, rules.spec, {});
    assert.deepEqual(result, { spec: { size: 1, list: [], name: 'plain' } });
    assert.equal(problems.length, 3);
    assert.match(problems[0]!, /resources\[0\]\.mutation\.spec\[0\]: the value at spec\.size is not a string/);
    assert.match(problems[1]!, /spec\[1\]: no element 5 to set/);
    assert.match(problems[2]!, /spec\[2\]: the path spec\.name\.first goes through something that is not a map/);
  });

  it('never writes an inherited property (a path named __proto__ sets an own key)', () => {
    const rules = rulesFrom({ spec: [{ template: { path: "spec['__proto__'].polluted", template: 'yes' } }] });
    const { result } = mutated({ spec: {} }, rules.spec, {});
    assert.equal(({} as Record<string, unknown>).polluted, undefined);
    assert.equal(Object.getPrototypeOf(result.spec), Object.prototype);
  });

  it('refuses, with the path, what a mutation cannot name', () => {
    const all = [
      ...problemsOf({ spec: [{ delete: { path: 'metadata.labels.x' } }] }),
      ...problemsOf({ spec: [{ delete: { path: 'status.x' } }] }),
      ...problemsOf({ status: [{ delete: { path: 'spec.x' } }] }),
      ...problemsOf({ spec: [{ delete: { path: 'spec.items[*].x' } }] }),
      ...problemsOf({ spec: [{ regex: { path: 'spec.x', pattern: '(' } }] }),
      ...problemsOf({ spec: [{ template: { path: 'spec.x', template: '{{ cluster }}' } }] }),
      ...problemsOf({ spec: [{ delete: { path: 'spec.x' }, regex: { path: 'spec.y' } }] }),
    ].join('\n');
    assert.match(all, /mutation\.spec\[0\]\.delete\.path: a spec mutation names a copied field/);
    assert.match(all, /mutation\.status\[0\]\.delete\.path: a status mutation's path starts with status/);
    assert.match(all, /mutation\.spec\[0\]\.delete\.path: a mutation names one value: no wildcards/);
    assert.match(all, /mutation\.spec\[0\]\.regex\.pattern: Invalid regular expression/);
    assert.match(all, /mutation\.spec\[0\]\.template\.template: .*unknown variable "cluster"/);
    assert.match(all, /give exactly one of "delete", "regex" or "template"/);
  });

  it('runs a tenant\'s value through the pattern in linear time, and refuses what would not run so, or would mean something else than in Go', () => {
    const rules = rulesFrom({ spec: [{ regex: { path: 'spec.name', pattern: '^(\\w+\\s?)*$', replacement: 'x' } }, { regex: { path: 'spec.blank', pattern: '\\s+$', replacement: '' } }] });
    const started = performance.now();
    const { result, problems } = mutated({ spec: { name: `${'a'.repeat(5000)}!`, blank: `${' '.repeat(70_000)}x` } }, rules.spec, {});
    assert.ok(performance.now() - started < 2000, `took ${performance.now() - started} ms (backtracking takes minutes on 60 characters)`);
    assert.equal(result.spec.name, `${'a'.repeat(5000)}!`, 'no match: unchanged');
    assert.match(problems.join('\n'), /spec\[1\]: the value at spec\.blank is longer than 65536 characters and is not rewritten/);
    const refused = [
      ...problemsOf({ spec: [{ regex: { path: 'spec.x', pattern: '(a)\\1' } }] }),
      ...problemsOf({ spec: [{ regex: { path: 'spec.x', pattern: 'a(?=b)' } }] }),
      ...problemsOf({ spec: [{ regex: { path: 'spec.x', pattern: 'abc\\z' } }] }),
      ...problemsOf({ spec: [{ regex: { path: 'spec.x', pattern: '[[:alpha:]]+' } }] }),
    ].join('\n');
    assert.match(refused, /backreferences and lookarounds are not supported/);
    assert.match(refused, /\\z is Go syntax/);
    assert.match(refused, /POSIX character classes/);
  });

  it('keeps an own __proto__ key where a path names one', () => {
    const rules = rulesFrom({ spec: [{ template: { path: "spec['__proto__']", template: 'yes' } }] });
    const { result } = mutated({ spec: {} }, rules.spec, {});
    assert.ok(Object.hasOwn(result.spec, '__proto__'));
    assert.equal(Object.getPrototypeOf(result.spec), Object.prototype);
  });
});
