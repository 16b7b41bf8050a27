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

/**
 * The values the path reaches, in document order, at most `limit` of them: a tenant's list may
 * hold a hundred thousand names, and only the first ones are ever used (related-finder.ts caps
 * them), so the walk stops there instead of visiting every element (and a spread of a huge
 * array, which throws).
 */
export function evaluateJsonPath(path: JsonPath, root: unknown, limit = Number.POSITIVE_INFINITY): unknown[] {
  const found: unknown[] = [];
  // Depth first, children in order: the same order as stepping through the whole document level by level.
  const walk = (value: unknown, at: number): void => {
    if (found.length >= limit || value === undefined || value === null) return;
    const step = path.steps[at];
    if (!step) {
      found.push(value);
      return;
    }
    if (step.kind === 'field' || (step.kind === 'elementOrKey' && !Array.isArray(value))) {
      if (value && typeof value === 'object' && !Array.isArray(value) && Object.hasOwn(value, step.name)) walk((value as Record<string, unknown>)[step.name], at + 1);
    } else if (step.kind === 'elementOrKey') {
      if (step.index < (value as unknown[]).length) walk((value as unknown[])[step.index], at + 1);
    } else if (Array.isArray(value)) {
      if (step.kind === 'all') {
        for (let i = 0; i < value.length && found.length < limit; i++) walk(value[i], at + 1);
      } else if (step.index < value.length) walk(value[step.index], at + 1);
    }
  };
  walk(root, 0);
  return found;
}

/**
 * The non-empty strings a path reaches, at most `limit` values looked at (strings or not); other
 * values are reported, not coerced. `more`: the path reaches values beyond the limit.
 */
export function stringsAt(path: JsonPath, root: unknown, limit = Number.POSITIVE_INFINITY): { values: string[]; invalid: unknown[]; more?: true } {
  const values: string[] = [];
  const invalid: unknown[] = [];
  const reached = evaluateJsonPath(path, root, limit === Number.POSITIVE_INFINITY ? limit : limit + 1);
  const more = reached.length > limit;
  if (more) reached.length = limit;
  for (const v of reached) {
    if (typeof v === 'string') {
      if (v !== '') values.push(v);
    } else invalid.push(v);
  }
  return more ? { values, invalid, more } : { values, invalid };
}
