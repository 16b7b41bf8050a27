import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import { Template, TemplateError } from '../../../src/rules/template.js';

const vars = ['cluster', 'namespace', 'name', 'object', 'value'];
const ctx = { cluster: 'tenant-a', namespace: 'ns', name: 'Orders', object: { spec: { tier: 'gold', list: ['x'] } }, value: 'v' };

describe('template', () => {
  it('renders variables, paths, pipes and functions', () => {
    assert.equal(Template.parse('{{ name }}-copy', vars).render(ctx), 'Orders-copy');
    assert.equal(Template.parse('{{ name | lower }}', vars).render(ctx), 'orders');
    assert.equal(Template.parse('{{ object.spec.tier }}-{{ object.spec.list[0] }}', vars).render(ctx), 'gold-x');
    assert.equal(Template.parse('{{ name | lower | trunc 3 }}', vars).render(ctx), 'ord');
    assert.equal(Template.parse('{{ object.spec.missing | default "none" }}', vars).render(ctx), 'none');
    assert.equal(Template.parse('{{ replace "-" "." cluster }}', vars).render(ctx), 'tenant.a');
    const hash = createHash('sha256').update('tenant-a/ns').digest('hex');
    assert.equal(Template.parse('{{ hash cluster namespace | trunc 6 }}', vars).render(ctx), hash.slice(0, 6));
    assert.equal(Template.parse('  {{ "lit" }}  ', vars).render(ctx), 'lit', 'output is trimmed');
  });

  it('names the problem in a bad template', () => {
    assert.throws(() => Template.parse('{{ nme }}', vars), /unknown variable "nme"/);
    assert.throws(() => Template.parse('{{ name | nope }}', vars), /unknown function "nope"/);
    assert.throws(() => Template.parse('{{ name', vars), /unclosed/);
    assert.throws(() => Template.parse('{{ trunc 3 }}', vars), /takes 2 argument/);
    assert.throws(() => Template.parse('{{ }}', vars), /empty action/);
    assert.throws(() => Template.parse('name }}', vars), /without a matching/);
  });

  it('renders plain text unchanged and never throws anything but TemplateError', () => {
    fc.assert(
      fc.property(fc.string().filter((s) => !s.includes('{{') && !s.includes('}}')), (s) => {
        assert.equal(Template.parse(s, vars).render(ctx), s.trim());
      }),
    );
    fc.assert(
      fc.property(fc.string(), (s) => {
        try {
          Template.parse(s, vars).render(ctx);
        } catch (err) {
          assert.ok(err instanceof TemplateError, `unexpected ${String(err)}`);
        }
      }),
    );
  });
});
