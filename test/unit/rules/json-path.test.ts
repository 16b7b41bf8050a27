import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { JsonPathError, parseJsonPath, stringsAt } from '../../../src/rules/json-path.js';

describe('json-path', () => {
  const obj = { spec: { ref: { name: 'a' }, refs: [{ name: 'x' }, { name: 'y' }, { other: 1 }], list: ['p', 'q'], 'odd.key/x': 'z', n: 3 } };

  it('reads fields, array elements and quoted keys', () => {
    assert.deepEqual(stringsAt(parseJsonPath('.spec.ref.name'), obj).values, ['a']);
    assert.deepEqual(stringsAt(parseJsonPath('spec.ref.name'), obj).values, ['a']);
    assert.deepEqual(stringsAt(parseJsonPath('{.spec.ref.name}'), obj).values, ['a']);
    assert.deepEqual(stringsAt(parseJsonPath('$.spec.refs[*].name'), obj).values, ['x', 'y']);
    assert.deepEqual(stringsAt(parseJsonPath('.spec.list[1]'), obj).values, ['q']);
    assert.deepEqual(stringsAt(parseJsonPath(".spec['odd.key/x']"), obj).values, ['z']);
  });

  it('reads .N as an array\'s element or an object\'s key, as gjson does, and never an inherited property', () => {
    const ports = { spec: { list: ['p', 'q'], ports: { '8080': 'web' }, refs: [{ name: 'x' }, { name: 'y' }] } };
    assert.deepEqual(stringsAt(parseJsonPath('.spec.list.1'), ports).values, ['q']);
    assert.deepEqual(stringsAt(parseJsonPath('.spec.ports.8080'), ports).values, ['web']);
    assert.deepEqual(stringsAt(parseJsonPath('.spec.refs.0.name'), ports).values, ['x']);
    assert.deepEqual(stringsAt(parseJsonPath('.spec.list.7'), ports).values, []);
    assert.deepEqual(stringsAt(parseJsonPath('spec.constructor'), ports), { values: [], invalid: [] }, 'Object.prototype is not a field');
    assert.deepEqual(stringsAt(parseJsonPath('.spec.toString'), ports), { values: [], invalid: [] });
  });

  it('yields nothing for missing fields and reports non-strings', () => {
    assert.deepEqual(stringsAt(parseJsonPath('.spec.missing.name'), obj).values, []);
    assert.deepEqual(stringsAt(parseJsonPath('.spec.n'), obj), { values: [], invalid: [3] });
  });

  it('rejects bad paths with the position of the problem', () => {
    assert.throws(() => parseJsonPath('.spec..name'), /recursive descent/);
    assert.throws(() => parseJsonPath('.spec[?(@.x)]'), (err: unknown) => err instanceof JsonPathError && /inside \[\.\.\.\]/.test(err.message));
    assert.throws(() => parseJsonPath('.spec[0'), /unclosed/);
    assert.throws(() => parseJsonPath(''), /empty/);
  });

  it('round-trips any chain of simple field names', () => {
    fc.assert(
      fc.property(fc.array(fc.stringMatching(/^[a-zA-Z_][a-zA-Z0-9_]{0,8}$/), { minLength: 1, maxLength: 6 }), fc.stringMatching(/^[a-z]{1,10}$/), (fields, value) => {
        let root: unknown = value;
        for (const f of [...fields].reverse()) root = { [f]: root };
        assert.deepEqual(stringsAt(parseJsonPath(`.${fields.join('.')}`), root).values, [value]);
      }),
    );
  });

  it('never throws anything but JsonPathError on arbitrary input', () => {
    fc.assert(
      fc.property(fc.string(), (s) => {
        try {
          parseJsonPath(s);
        } catch (err) {
          assert.ok(err instanceof JsonPathError, `unexpected ${String(err)}`);
        }
      }),
    );
  });

  it('looks at no more values than asked for, in document order, on a list too large to spread', () => {
    const names = Array.from({ length: 300_000 }, (_, i) => `n${i}`);
    const root = { spec: { a: [{ name: 'first' }], items: names.map((name) => ({ name })) } };
    const found = stringsAt(parseJsonPath('.spec.items[*].name'), root, 3);
    assert.deepEqual(found, { values: ['n0', 'n1', 'n2'], invalid: [], more: true });
    assert.equal(stringsAt(parseJsonPath('.spec.items[*].name'), root).values.length, 300_000, 'without a limit: all of them, without a RangeError');
    assert.deepEqual(stringsAt(parseJsonPath('.spec.a[*].name'), root, 3), { values: ['first'], invalid: [] });
  });
});
