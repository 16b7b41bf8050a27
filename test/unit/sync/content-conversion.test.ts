// Converting a related copy's content between ConfigMaps and Secrets
// (src/sync/content-conversion.ts): by hand for each rule of the conversion,
// and as properties for the round trips, with arbitrary bytes.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import fc from 'fast-check';
import type { CopyContent } from '../../../src/sync/content.js';
import { convertContent } from '../../../src/sync/content-conversion.js';

const configMaps = { group: '', resource: 'configmaps' };
const secrets = { group: '', resource: 'secrets' };
const databases = { group: 'demo.relsync.dev', resource: 'databases' };
const content = (fields: Record<string, unknown>): CopyContent => ({ fields, labels: { app: 'shop' }, annotations: { note: 'kept' } });
const b64 = (bytes: number[] | string) => Buffer.from(bytes as never).toString('base64');
const toSecret = (fields: Record<string, unknown>) => convertContent(content(fields), configMaps, secrets).fields;
const toConfigMap = (fields: Record<string, unknown>) => convertContent(content(fields), secrets, configMaps).fields;

describe('content conversion', () => {
  it('ConfigMap → Secret: data base64-encoded, binaryData as it is, type Opaque; labels and annotations untouched', () => {
    const converted = convertContent(content({ data: { 'app.conf': 'port = 8080\n', 'é.txt': 'ünïcödé ✓' }, binaryData: { logo: b64([0x89, 0x50, 0x4e, 0x47, 0xff]) } }), configMaps, secrets);
    assert.deepEqual(converted.fields, { type: 'Opaque', data: { 'app.conf': b64('port = 8080\n'), 'é.txt': b64('ünïcödé ✓'), logo: b64([0x89, 0x50, 0x4e, 0x47, 0xff]) } });
    assert.deepEqual(converted.labels, { app: 'shop' });
    assert.deepEqual(converted.annotations, { note: 'kept' });
  });

  it('Secret → ConfigMap: UTF-8 values to data, any other bytes to binaryData; the type is lost', () => {
    assert.deepEqual(
      toConfigMap({ type: 'kubernetes.io/tls', data: { 'tls.crt': b64('-----BEGIN CERTIFICATE-----\n'), raw: b64([0xff, 0xfe, 0x00, 0x80]), cut: b64([0xe2, 0x9c]), bom: b64([0xef, 0xbb, 0xbf, 0x41]), nul: b64([0x00]) } }),
      // A cut multi-byte sequence is not UTF-8; a byte-order mark and NUL are, and are kept.
      { data: { 'tls.crt': '-----BEGIN CERTIFICATE-----\n', bom: '\uFEFFA', nul: '\u0000' }, binaryData: { raw: b64([0xff, 0xfe, 0x00, 0x80]), cut: b64([0xe2, 0x9c]) } },
    );
  });

  it('empty values and empty or absent maps: an empty value is kept, an empty map is left out', () => {
    assert.deepEqual(toSecret({}), { type: 'Opaque' });
    assert.deepEqual(toSecret({ data: {}, binaryData: {} }), { type: 'Opaque' });
    assert.deepEqual(toSecret({ data: { empty: '' } }), { type: 'Opaque', data: { empty: '' } });
    assert.deepEqual(toConfigMap({ type: 'Opaque' }), {});
    assert.deepEqual(toConfigMap({ type: 'Opaque', data: {} }), {});
    assert.deepEqual(toConfigMap({ type: 'Opaque', data: { empty: '' } }), { data: { empty: '' } });
    assert.deepEqual(toConfigMap({ type: 'Opaque', data: { raw: b64([0xff]) } }), { binaryData: { raw: b64([0xff]) } }, 'no empty data beside binaryData');
  });

  it('immutable carries over both ways, true or false', () => {
    assert.deepEqual(toSecret({ data: { a: 'x' }, immutable: true }), { type: 'Opaque', data: { a: b64('x') }, immutable: true });
    assert.deepEqual(toSecret({ immutable: false }), { type: 'Opaque', immutable: false });
    assert.deepEqual(toConfigMap({ type: 'Opaque', data: { a: b64('x') }, immutable: true }), { data: { a: 'x' }, immutable: true });
    assert.deepEqual(toConfigMap({ type: 'Opaque', immutable: false }), { immutable: false });
  });

  it('never writes stringData, and never reads it (an API server never returns it)', () => {
    assert.deepEqual(toConfigMap({ type: 'Opaque', stringData: { s: 'plain' }, data: { a: b64('x') } }), { data: { a: 'x' } });
    assert.ok(!('stringData' in toSecret({ data: { a: 'x' } })));
  });

  it('a key in both data and binaryData (the API server refuses such a ConfigMap): binaryData wins, as in a ConfigMap volume', () => {
    assert.deepEqual(toSecret({ data: { k: 'text' }, binaryData: { k: b64([1, 2, 3]) } }), { type: 'Opaque', data: { k: b64([1, 2, 3]) } });
  });

  it('the same type: the content as it is; any other pair throws (config load refuses such rules)', () => {
    const same = content({ data: { a: 'x' } });
    assert.equal(convertContent(same, configMaps, configMaps), same);
    assert.throws(() => convertContent(same, configMaps, databases), /does not convert configmaps to databases\.demo\.relsync\.dev/);
  });

  const keys = fc.string({ unit: fc.constantFrom('a', 'B', '0', '-', '_', '.'), minLength: 1, maxLength: 6 });
  const bytes = fc.uint8Array({ maxLength: 24 }).map((a) => Buffer.from(a));

  it('Secret → ConfigMap → Secret gives back every key with the same bytes', () => {
    fc.assert(
      fc.property(fc.dictionary(keys, bytes), fc.option(fc.boolean(), { nil: undefined }), (values, immutable) => {
        const secret = { type: 'Opaque', ...(Object.keys(values).length > 0 ? { data: Object.fromEntries(Object.entries(values).map(([k, v]) => [k, v.toString('base64')])) } : {}), ...(immutable === undefined ? {} : { immutable }) };
        const configMap = toConfigMap(secret) as { data?: Record<string, string>; binaryData?: Record<string, string> };
        assert.deepEqual([...Object.keys(configMap.data ?? {}), ...Object.keys(configMap.binaryData ?? {})].sort(), Object.keys(values).sort(), 'each key once, in data or binaryData');
        assert.ok(!('type' in configMap));
        assert.deepEqual(toSecret(configMap), secret);
      }),
      { numRuns: 500 },
    );
  });

  it('ConfigMap → Secret → ConfigMap keeps every key and its bytes (binaryData that is UTF-8 comes back as data)', () => {
    fc.assert(
      fc.property(fc.dictionary(keys, fc.string({ unit: 'binary', maxLength: 12 })), fc.dictionary(keys, bytes), (text, binary) => {
        for (const k of Object.keys(text)) delete binary[k]; // the API server refuses a key in both
        const configMap = { data: text, binaryData: Object.fromEntries(Object.entries(binary).map(([k, v]) => [k, v.toString('base64')])) };
        const secret = toSecret(configMap) as { type: string; data?: Record<string, string> };
        assert.equal(secret.type, 'Opaque');
        assert.deepEqual(Object.keys(secret.data ?? {}).sort(), [...Object.keys(text), ...Object.keys(binary)].sort());
        const back = toConfigMap(secret) as { data?: Record<string, string>; binaryData?: Record<string, string> };
        const bytesOf = (cm: typeof back) => ({
          ...Object.fromEntries(Object.entries(cm.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('hex')])),
          ...Object.fromEntries(Object.entries(cm.binaryData ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('hex')])),
        });
        assert.deepEqual(bytesOf(back), bytesOf(configMap));
        for (const [k, v] of Object.entries(text)) assert.equal(back.data?.[k], v, 'text stays text');
      }),
      { numRuns: 500 },
    );
  });
});
