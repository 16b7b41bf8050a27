import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import type { KubeObject } from '../../../src/core/object.js';
import { provenanceProblem } from '../../../src/rules/provenance.js';
import { Template } from '../../../src/rules/template.js';

const copy: KubeObject = { metadata: { name: 'orders', namespace: 'ns', uid: 'copy-uid' } };
const context = { cluster: 'tenant-a', namespace: 'shop', name: 'orders', object: copy };
const ref = (uid: string) => ({ apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', name: 'orders', uid });

describe('provenance of service-side sources', () => {
  it('by ownerReference: only an object whose owners include the copy\'s uid', () => {
    const p = { kind: 'ownerReference' } as const;
    assert.equal(provenanceProblem(p, { metadata: { name: 's', ownerReferences: [ref('other'), ref('copy-uid')] } }, copy, context), undefined);
    assert.match(provenanceProblem(p, { metadata: { name: 's' } }, copy, context) ?? '', /no ownerReference to the copy/);
    assert.ok(provenanceProblem(p, { metadata: { name: 's', ownerReferences: [ref('other')] } }, copy, context), 'another object\'s (same name, other uid) is not the copy\'s');
    assert.ok(provenanceProblem(p, { metadata: { name: 's', ownerReferences: [ref('')] } }, { metadata: { name: 'orders' } }, context), 'a copy without a uid owns nothing');
  });

  it('by label: the operator\'s mark with the value rendered for this primary', () => {
    const p = { kind: 'label', key: 'example.com/for', value: Template.parse('{{ cluster }}.{{ name }}', ['cluster', 'name']) } as const;
    assert.equal(provenanceProblem(p, { metadata: { name: 's', labels: { 'example.com/for': 'tenant-a.orders' } } }, copy, context), undefined);
    assert.ok(provenanceProblem(p, { metadata: { name: 's', labels: { 'example.com/for': 'tenant-b.orders' } } }, copy, context));
    assert.ok(provenanceProblem(p, { metadata: { name: 's' } }, copy, context));
    const empty = { kind: 'label', key: 'example.com/for', value: Template.parse('{{ object.spec.none }}', ['object']) } as const;
    assert.ok(provenanceProblem(empty, { metadata: { name: 's', labels: { 'example.com/for': '' } } }, copy, context), 'a value that renders empty matches nothing');
  });

  it('anyInNamespace: everything', () => {
    assert.equal(provenanceProblem({ kind: 'anyInNamespace' }, { metadata: { name: 's' } }, copy, context), undefined);
  });
});
