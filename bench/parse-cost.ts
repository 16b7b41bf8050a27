/**
 * What JSON texts of one size take in V8's heap once parsed, shape by shape, beside what
 * parsedBytesAtMost (src/util/heap-size.ts) says of them before parsing, and how long it takes to
 * say it. The figures behind MAX_PARSED_BYTES (src/kube/connection.ts): a tenant's own API server
 * chooses the shape of its answers.
 *
 *   node --expose-gc dist/bench/parse-cost.js [MiB]   # default 8, the most of one answer
 */
import { parsedBytesAtMost } from '../src/util/heap-size.js';

const size = Number(process.argv[2] ?? 8) * 1024 * 1024;
const gc = (globalThis as { gc?: () => void }).gc;
if (!gc) throw new Error('run with node --expose-gc');
const key = (i: number): string => `"k${i.toString(36).padStart(5, '0')}"`;
const many = (n: number, f: (i: number) => string): string[] => Array.from({ length: n }, (_, i) => f(i));

function listPage(objectBytes: number): string {
  const items: unknown[] = [];
  for (let text = 0; text < size; ) {
    const i = items.length;
    const item = { metadata: { name: `obj-${i}`, namespace: 'ns', uid: `0000-${i}`, resourceVersion: String(1000 + i), labels: { app: 'x' }, managedFields: [{ manager: 'kubectl', operation: 'Update', apiVersion: 'v1', fieldsType: 'FieldsV1', fieldsV1: { 'f:data': { '.': {}, 'f:a': {} } } }] }, data: { a: 'x'.repeat(objectBytes) } };
    items.push(item);
    text += JSON.stringify(item).length;
  }
  return JSON.stringify({ kind: 'List', items });
}

const shapes: Record<string, () => string> = {
  'empty objects': () => `[${'{},'.repeat(size / 3 - 1)}{}]`,
  'empty arrays': () => `[${'[],'.repeat(size / 3 - 1)}[]]`,
  'nested arrays': () => '['.repeat(size / 2) + ']'.repeat(size / 2),
  zeros: () => `[${'0,'.repeat(size / 2 - 1)}0]`,
  'distinct keys': () => `{${many(size / 12, (i) => `${key(i)}:0`).join(',')}}`,
  'objects of distinct keys': () => `[${many(size / 14, (i) => `{${key(i)}:1}`).join(',')}]`,
  'one string': () => JSON.stringify({ data: 'y'.repeat(size - 20) }),
  'LIST page, small objects': () => listPage(1),
  'LIST page, 200-byte values': () => listPage(200),
};

console.log(`${(size / 1024 / 1024).toFixed(0)} MiB texts (Node ${process.version})`);
console.log('shape                         parsed MiB  said MiB  said/parsed  scan ms');
const mib = (n: number): string => (n / 1024 / 1024).toFixed(1);
for (const [name, make] of Object.entries(shapes)) {
  const { parsed, said, ms } = measure(make());
  console.log(`${name.padEnd(30)}${mib(parsed).padStart(10)}${mib(said).padStart(10)}${(said / parsed).toFixed(2).padStart(13)}${ms.toFixed(0).padStart(9)}`);
}

/** Heap held by the parsed text (between two collections), and what the text said of it. */
function measure(text: string): { parsed: number; said: number; ms: number } {
  gc!();
  const before = process.memoryUsage().heapUsed;
  const value: unknown = JSON.parse(text);
  gc!();
  const parsed = process.memoryUsage().heapUsed - before;
  if (value === undefined) throw new Error('unreachable: keeps the value alive until measured');
  const start = performance.now();
  const said = parsedBytesAtMost(text);
  return { parsed, said, ms: performance.now() - start };
}
