/**
 * The field index of docs/configuration.md, generated from the zod schema (schema.ts), so that
 * the documentation names every field the schema has, with the type, default and bounds the
 * schema gives it. The meaning of each field stays hand-written above the index; a unit test
 * (test/unit/config/config-reference.test.ts) fails when the index in the file is not what this
 * generates, and `node scripts/config-reference.mjs` writes it afresh after `npm run build`.
 */
import { z } from 'zod';
import { configSchema } from './schema.js';

/** The parts of a JSON Schema (draft 2020-12, as zod writes it) that the index reads. */
interface JsonSchema {
  readonly type?: string | readonly string[];
  readonly properties?: Readonly<Record<string, JsonSchema>>;
  readonly required?: readonly string[];
  readonly items?: JsonSchema;
  readonly additionalProperties?: JsonSchema | boolean;
  readonly anyOf?: readonly JsonSchema[];
  readonly oneOf?: readonly JsonSchema[];
  readonly enum?: readonly unknown[];
  readonly const?: unknown;
  readonly default?: unknown;
  readonly minimum?: number;
  readonly maximum?: number;
  readonly exclusiveMinimum?: number;
  readonly minLength?: number;
  readonly maxLength?: number;
  readonly minItems?: number;
}

/** One row of the index: a field, by its path in the YAML file (`[]` for a list's items). */
export interface ConfigField {
  readonly path: string;
  readonly type: string;
  readonly required: boolean;
  readonly default: string | undefined;
  readonly bounds: string;
}

export const INDEX_BEGIN = '<!-- config-fields:begin: generated from src/config/schema.ts by `node scripts/config-reference.mjs`; do not edit -->';
export const INDEX_END = '<!-- config-fields:end -->';

/** Every field of the config, parents before their children, in the schema's order. */
export function configFields(): ConfigField[] {
  const root = z.toJSONSchema(configSchema, { io: 'input', unrepresentable: 'any' }) as JsonSchema;
  const fields = new Map<string, ConfigField>();
  walk(root, '', fields);
  return [...fields.values()];
}

function alternatives(s: JsonSchema): readonly JsonSchema[] {
  return s.anyOf ?? s.oneOf ?? [s];
}

function walk(s: JsonSchema, prefix: string, into: Map<string, ConfigField>): void {
  for (const alt of alternatives(s)) {
    if (alt.properties) {
      for (const [key, child] of Object.entries(alt.properties)) {
        const path = prefix === '' ? key : `${prefix}.${key}`;
        const required = alt.required?.includes(key) ?? false;
        const row: ConfigField = { path, type: typeOf(child), required, default: defaultOf(child), bounds: boundsOf(child) };
        const known = into.get(path);
        // the same field in two alternatives (a rule's `reference`, `template`, …): one row
        into.set(path, known ? merge(known, row) : row);
        walk(child, path, into);
      }
    }
    if (alt.items) walk(alt.items, `${prefix}[]`, into);
  }
}

function merge(a: ConfigField, b: ConfigField): ConfigField {
  return {
    path: a.path,
    type: a.type === b.type ? a.type : `${a.type} or ${b.type}`,
    required: a.required && b.required,
    default: a.default ?? b.default,
    bounds: a.bounds === b.bounds ? a.bounds : [a.bounds, b.bounds].filter((x) => x !== '').join('; '),
  };
}

function typeOf(s: JsonSchema): string {
  const alts = s.anyOf ?? s.oneOf;
  if (alts) return [...new Set(alts.map(typeOf))].join(' or ');
  if (s.const !== undefined) return JSON.stringify(s.const);
  if (s.enum) return s.enum.map((v) => JSON.stringify(v)).join(', ');
  const type = typeof s.type === 'string' ? s.type : s.type?.join(' or ');
  if (type === 'array') return s.items ? `list of ${typeOf(s.items)}` : 'list';
  if (type === 'object' && !s.properties && typeof s.additionalProperties === 'object') return `map of ${typeOf(s.additionalProperties)}`;
  return type ?? 'any';
}

function defaultOf(s: JsonSchema): string | undefined {
  const d = s.default;
  if (d === undefined) return undefined;
  if (typeof d === 'object' && d !== null && !Array.isArray(d) && Object.keys(d).length === 0) return undefined; // an object whose fields have defaults
  if (Array.isArray(d) && JSON.stringify(d).length > 60) return `a list of ${d.length}`; // the list is told above the index
  return JSON.stringify(d);
}

function boundsOf(s: JsonSchema): string {
  const out: string[] = [];
  if (s.minimum !== undefined) out.push(`≥ ${s.minimum}`);
  if (s.exclusiveMinimum !== undefined) out.push(`> ${s.exclusiveMinimum}`);
  if (s.maximum !== undefined && s.maximum < Number.MAX_SAFE_INTEGER) out.push(`≤ ${s.maximum}`);
  if (s.minLength !== undefined && s.minLength > 0) out.push(`≥ ${s.minLength} character${s.minLength === 1 ? '' : 's'}`);
  if (s.maxLength !== undefined) out.push(`≤ ${s.maxLength} characters`);
  if (s.minItems !== undefined && s.minItems > 0) out.push(`≥ ${s.minItems} item${s.minItems === 1 ? '' : 's'}`);
  return out.join(', ');
}

function cell(text: string): string {
  return text.replaceAll('|', '\\|');
}

/** The index as it stands between INDEX_BEGIN and INDEX_END in docs/configuration.md. */
export function configFieldIndex(): string {
  const rows = configFields().map((f) => {
    const def = f.default === undefined ? (f.required ? 'required' : '') : f.default.startsWith('a list of ') ? `${f.default} (see above)` : `\`${cell(f.default)}\``;
    return `| \`${f.path}\` | ${cell(f.type)} | ${def} | ${f.bounds} |`;
  });
  return [INDEX_BEGIN, '', '| field | type | default | bounds |', '|---|---|---|---|', ...rows, '', INDEX_END].join('\n');
}

/** `doc` with its index replaced by what the schema gives now (or `undefined` when it has no markers). */
export function withFieldIndex(doc: string): string | undefined {
  const begin = doc.indexOf(INDEX_BEGIN);
  const end = doc.indexOf(INDEX_END);
  if (begin < 0 || end < begin) return undefined;
  return doc.slice(0, begin) + configFieldIndex() + doc.slice(end + INDEX_END.length);
}
