// What of a Status message relsync repeats. The messages below were
// recorded from kube-apiserver v1.36.3 by test/e2e/api-error-values.test.ts
// (server-side applies of a Vault whose schema has an enum, a format, a
// pattern, a set, CEL rules and a required field; a Secret, a ConfigMap and a
// ValidatingAdmissionPolicy), the value sent being "hunter2zq" each time.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { MAX_STATUS_MESSAGE, pathSegments, withoutValues } from '../../../src/kube/status-message.js';

const VAULTS = '/apis/values.relsync.dev/v1/namespaces/values/vaults';
const said = (path: string, message: string) => withoutValues(message, pathSegments(path));
const NOT_CHECKED = '<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation';
const NOT_CHECKED_SAID = '<nil>: Invalid value: …: some validation rules were not checked because the object was invalid; correct the existing errors to complete validation';

/** [request path, message as the API server sent it, message as relsync repeats it]. */
const recorded: Array<[string, string, string]> = [
  [`${VAULTS}/v-enum`, `Vault.values.relsync.dev "v-enum" is invalid: [spec.mode: Unsupported value: "hunter2zq": supported values: "fast", "safe", ${NOT_CHECKED}]`, `Vault.values.relsync.dev "v-enum" is invalid: [spec.mode: Unsupported value: "…": supported values: "fast", "safe", ${NOT_CHECKED_SAID}]`],
  [`${VAULTS}/v-format`, `Vault.values.relsync.dev "v-format" is invalid: [spec.email: Invalid value: "hunter2zq": spec.email in body must be of type email: "hunter2zq", ${NOT_CHECKED}]`, `Vault.values.relsync.dev "v-format" is invalid: [spec.email: Invalid value: "…": spec.email in body must be of type email: "…", ${NOT_CHECKED_SAID}]`],
  [`${VAULTS}/v-pattern`, `Vault.values.relsync.dev "v-pattern" is invalid: spec.code: Invalid value: "hunter2zq": spec.code in body should match '^[0-9]+$'`, `Vault.values.relsync.dev "v-pattern" is invalid: spec.code: Invalid value: "…": spec.code in body should match '^[0-9]+$'`],
  [`${VAULTS}/v-duplicate`, 'failed to create typed patch object (values/v-duplicate; values.relsync.dev/v1, Kind=Vault): .spec.tags: duplicate entries for key [="hunter2zq"]', 'failed to create typed patch object (values/v-duplicate; values.relsync.dev/v1, Kind=Vault): .spec.tags: duplicate entries for key [="…"]'],
  [`${VAULTS}/v-type`, 'failed to create typed patch object (values/v-type; values.relsync.dev/v1, Kind=Vault): .spec.pin: expected numeric (int or float), got map[string]interface {}', 'failed to create typed patch object (values/v-type; values.relsync.dev/v1, Kind=Vault): .spec.pin: expected numeric (int or float), got map[string]interface {}'],
  [`${VAULTS}/v-length`, `Vault.values.relsync.dev "v-length" is invalid: [spec.password: Too long: may not be more than 5 bytes, ${NOT_CHECKED}]`, `Vault.values.relsync.dev "v-length" is invalid: [spec.password: Too long: may not be more than 5 bytes, ${NOT_CHECKED_SAID}]`],
  [`${VAULTS}/v-cel`, 'Vault.values.relsync.dev "v-cel" is invalid: spec: Invalid value: token "hunter2zq" must start with ok', 'Vault.values.relsync.dev "v-cel" is invalid: spec: Invalid value: token "…" must start with ok'],
  [`${VAULTS}/v-phrase`, 'Vault.values.relsync.dev "v-phrase" is invalid: spec: Invalid value: phrase is too long', 'Vault.values.relsync.dev "v-phrase" is invalid: spec: Invalid value: phrase is too long'],
  [`${VAULTS}/v-required`, `Vault.values.relsync.dev "v-required" is invalid: [spec.needed: Required value, ${NOT_CHECKED}]`, `Vault.values.relsync.dev "v-required" is invalid: [spec.needed: Required value, ${NOT_CHECKED_SAID}]`],
  [
    '/api/v1/namespaces/values/secrets/s-key',
    `Secret "s-key" is invalid: data[hunter2zq key]: Invalid value: "hunter2zq key": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
    `Secret "s-key" is invalid: data[…]: Invalid value: "…": a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')`,
  ],
  ['/api/v1/namespaces/values/secrets/s-docker', `Secret "s-docker" is invalid: data[.dockerconfigjson]: Invalid value: "<secret contents redacted>": invalid character 'h' looking for beginning of value`, `Secret "s-docker" is invalid: data[…]: Invalid value: "…": invalid character 'h' looking for beginning of value`],
  [
    '/api/v1/namespaces/values/configmaps/c-label',
    `ConfigMap "c-label" is invalid: metadata.labels: Invalid value: "hunter2zq!": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
    `ConfigMap "c-label" is invalid: metadata.labels: Invalid value: "…": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')`,
  ],
  ['/api/v1/namespaces/values/configmaps/c-long', `ConfigMap "c-long" is invalid: metadata.labels: Invalid value: "hunter2zq${'x'.repeat(60)}": must be no more than 63 bytes`, 'ConfigMap "c-long" is invalid: metadata.labels: Invalid value: "…": must be no more than 63 bytes'],
  ['/api/v1/namespaces/values/configmaps/c-owner', `configmaps "c-owner" is forbidden: ValidatingAdmissionPolicy 'no-hunters' with binding 'no-hunters' denied request: owner "hunter2zq" is not allowed`, `configmaps "c-owner" is forbidden: ValidatingAdmissionPolicy 'no-hunters' with binding 'no-hunters' denied request: owner "…" is not allowed`],
  ['/api/v1/namespaces/gone/configmaps/c', 'namespaces "gone" not found', 'namespaces "gone" not found'],
];

describe('Status messages recorded from kube-apiserver', () => {
  it('leave out every value the request carried, and keep the rest word for word', () => {
    for (const [path, message, expected] of recorded) assert.equal(said(path, message), expected, message);
  });

  it('keep a map key that a CRD\'s field path names with dots: it cannot be told from a field (a limit docs/guarantees.md states under "Secrets")', () => {
    const message = `Vault.values.relsync.dev "v-map" is invalid: [spec.config.hunter2zq: Too long: may not be more than 3 bytes, ${NOT_CHECKED}]`;
    assert.equal(said(`${VAULTS}/v-map`, message), `Vault.values.relsync.dev "v-map" is invalid: [spec.config.hunter2zq: Too long: may not be more than 3 bytes, ${NOT_CHECKED_SAID}]`);
  });
});

describe('Status messages: other shapes', () => {
  const path = '/api/v1/namespaces/a/secrets/s';

  it('leave out unquoted values: numbers, booleans, quantities and Go dumps, also in a list of errors', () => {
    assert.equal(said(path, 'spec.n: Invalid value: 12345: too big'), 'spec.n: Invalid value: …: too big');
    assert.equal(said(path, '[spec.a: Invalid value: true, spec.b: Duplicate value: 1Gi]'), '[spec.a: Invalid value: …, spec.b: Duplicate value: …]');
    assert.equal(said(path, 'spec.m: Invalid value: map[string]interface {}{"pin":1234, "k":"v"}: not allowed'), 'spec.m: Invalid value: …: not allowed');
    assert.equal(said(path, 'spec.l: Not found: []interface {}{"x", 42}'), 'spec.l: Not found: …');
    assert.equal(said(path, 'spec.x: Invalid value: 7'), 'spec.x: Invalid value: …');
  });

  it('keep the names the path and details.name say, list indexes, and a webhook\'s name', () => {
    assert.equal(said(path, 'Operation cannot be fulfilled on secrets "s": the object has been modified'), 'Operation cannot be fulfilled on secrets "s": the object has been modified');
    assert.equal(withoutValues('secrets "made" already exists', new Set(['made'])), 'secrets "made" already exists');
    assert.equal(said(path, 'spec.list[3].name: Required value'), 'spec.list[3].name: Required value');
    // apiserver's format (pkg/admission/plugin/webhook/errors): not recorded, no webhook server runs in the e2e test.
    assert.equal(said(path, 'admission webhook "check.example.com" denied the request: value "hunter2zq" is weak'), 'admission webhook "check.example.com" denied the request: value "…" is weak');
  });

  it('leave out a quote that never closes, and escape what a terminal would act on', () => {
    assert.equal(said(path, 'spec.x: Invalid value: "hunter2zq'), 'spec.x: Invalid value: "…"');
    assert.equal(said(path, 'x: Invalid value: "a\\"hunter2zq\\"b": no'), 'x: Invalid value: "…": no');
    assert.equal(said(path, 'denied: \u001b[2Jcleared\u0007'), 'denied: \\u001b[2Jcleared\\u0007');
  });

  it('are cut, saying how long they were', () => {
    const out = said(path, `denied: ${'word '.repeat(1000)}`);
    assert.ok(out.length < MAX_STATUS_MESSAGE + 40, `${out.length}`);
    assert.match(out, /… \(5008 characters\)$/);
  });

  it('take time linear in the message, however it is built (a tenant\'s API server writes it)', () => {
    // 256 Ki characters (an error answer is read up to 64 KiB): linear takes ~0.2 s here, quadratic hours.
    const n = 1 << 18;
    for (const [name, text] of [
      ['open brackets after a value type', `Invalid value: ${'{'.repeat(n)}`],
      ['nested value types', `${'Invalid value: {'.repeat(n / 16)}${'}'.repeat(n / 16)} x`],
      ['words after value types', 'Invalid value: word '.repeat(n / 20)],
      ['subscripts that are not', `${'a['.repeat(n / 2)}]b`],
      ['escapes in a quote', `"${'\\"'.repeat(n / 2)}`],
      ['Go dump types', `Invalid value: ${'interface {}'.repeat(n / 12)} x`],
      ['choices', `supported values: ${'"a", '.repeat(n / 5)}`],
    ] as const) {
      const started = performance.now();
      withoutValues(text, new Set());
      const ms = performance.now() - started;
      assert.ok(ms < 1000, `${name}: ${ms.toFixed(0)} ms for ${text.length} characters`);
    }
  });
});
