/**
 * The JSONPath subset relsync accepts for references, parsed once at config
 * load so that a bad path is a config error, not a runtime surprise:
 *
 *   .spec.secretRef.name          fields (a leading `.` or `$` is optional)
 *   spec.secrets[*].name          every element of an array
 *   spec.secrets[0]               one element
 *   spec.secrets.0                element 0 of an array, or the key "0" of an object (as gjson
 *                                 reads it: api-syncagent's paths are translated to this)
 *   metadata.annotations['a.b/c'] a field whose name has dots or slashes
 *   {.spec.name}                  kubectl-style braces are accepted
 *
 * Filters and scripts are deliberately not supported: a path only walks the
 * object. Evaluation yields every string it reaches, in document order.
 */

export type PathStep =
  | { readonly kind: 'field'; readonly name: string }
  | { readonly kind: 'index'; readonly index: number }
  | { readonly kind: 'all' }
  /** `.N`: the element of an array, or the key of an object. */
  | { readonly kind: 'elementOrKey'; readonly name: string; readonly index: number };

export interface JsonPath {
  readonly source: string;
  readonly steps: readonly PathStep[];
}

export class JsonPathError extends Error {
  constructor(
    readonly path: string,
    readonly position: number,
    problem: string,
  ) {
    super(`invalid path "${path}" at character ${position + 1}: ${problem}`);
    this.name = 'JsonPathError';
  }
}

const identifier = /^[A-Za-z_$][A-Za-z0-9_$-]*/;

export function parseJsonPath(source: string): JsonPath {
  let text = source.trim();
  let offset = source.indexOf(text);
  if (text.startsWith('{') && text.endsWith('}')) {
    text = text.slice(1, -1).trim();
    offset += 1;
  }
  if (text.startsWith('$')) {
    text = text.slice(1);
    offset += 1;
  }
  if (text === '' || text === '.') throw new JsonPathError(source, offset, 'the path is empty');
  const steps: PathStep[] = [];
  let i = 0;
  if (text[0] !== '.' && text[0] !== '[') {
    // `spec.name` means `.spec.name`; keep error positions pointing into `source`
    text = `.${text}`;
    offset -= 1;
  }
  while (i < text.length) {
    const ch = text[i];
    if (ch === '.') {
      if (text[i + 1] === '.') throw new JsonPathError(source, offset + i, 'recursive descent ("..") is not supported');
      const digits = /^\d+(?![A-Za-z_$-])/.exec(text.slice(i + 1));
      if (digits) {
        steps.push({ kind: 'elementOrKey', name: digits[0], index: Number(digits[0]) });
        i += 1 + digits[0].length;
        continue;
      }
      const match = identifier.exec(text.slice(i + 1));
      if (!match) throw new JsonPathError(source, offset + i + 1, 'expected a field name after "."');
      steps.push({ kind: 'field', name: match[0] });
      i += 1 + match[0].length;
    } else if (ch === '[') {
      const close = findClose(text, i);
      if (close < 0) throw new JsonPathError(source, offset + i, 'unclosed "["');
      const inner = text.slice(i + 1, close).trim();
      if (inner === '*') steps.push({ kind: 'all' });
      else if (/^\d+$/.test(inner)) steps.push({ kind: 'index', index: Number(inner) });
      else if (/^'[^']*'$/.test(inner) || /^"[^"]*"$/.test(inner)) steps.push({ kind: 'field', name: inner.slice(1, -1) });
      else throw new JsonPathError(source, offset + i + 1, `expected *, an index or a quoted field name inside [...], got "${inner}"`);
      i = close + 1;
    } else {
      throw new JsonPathError(source, offset + i, `unexpected "${ch}"`);
    }
  }
  return { source, steps };
}

function findClose(text: string, open: number): number {
  let quote: string | undefined;
  for (let i = open + 1; i < text.length; i++) {
    const ch = text[i];
    if (quote) {
      if (ch === quote) quote = undefined;
    } else if (ch === "'" || ch === '"') {
      quote = ch;
    } else if (ch === ']') {
      return i;
    }
  }
  return -1;
}

/** Every value the path reaches, in document order. */
export function evaluateJsonPath(path: JsonPath, root: unknown): unknown[] {
  let current: unknown[] = [root];
  for (const step of path.steps) {
    const next: unknown[] = [];
    for (const value of current) {
      if (step.kind === 'field' || (step.kind === 'elementOrKey' && !Array.isArray(value))) {
        if (value && typeof value === 'object' && !Array.isArray(value) && Object.hasOwn(value, step.name)) {
          next.push((value as Record<string, unknown>)[step.name]);
        }
      } else if (step.kind === 'elementOrKey') {
        if (step.index < (value as unknown[]).length) next.push((value as unknown[])[step.index]);
      } else if (Array.isArray(value)) {
        if (step.kind === 'all') next.push(...value);
        else if (step.index < value.length) next.push(value[step.index]);
      }
    }
    current = next;
  }
  return current.filter((v) => v !== undefined && v !== null);
}

/** The non-empty strings a path reaches; other values are reported, not coerced. */
export function stringsAt(path: JsonPath, root: unknown): { values: string[]; invalid: unknown[] } {
  const values: string[] = [];
  const invalid: unknown[] = [];
  for (const v of evaluateJsonPath(path, root)) {
    if (typeof v === 'string') {
      if (v !== '') values.push(v);
    } else invalid.push(v);
  }
  return { values, invalid };
}
