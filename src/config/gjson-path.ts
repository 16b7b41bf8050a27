/**
 * api-syncagent's reference paths are gjson paths (`spec.secretName`,
 * `spec.items.#.name`, `metadata.annotations.example\.com/x`); relsync's are
 * a JSONPath subset (rules/json-path.ts). This rewrites the gjson forms that
 * only walk an object into relsync's, and names the ones that do more
 * (queries, wildcards in keys, modifiers, pipes, `#` as a count) instead of
 * reading them as something else. A path that starts with `.`, `{`, `$.`
 * or `$[` is relsync's own form and kept as it is (no Kubernetes object has a
 * top-level key "$" or ""); brackets are not gjson (gjson would read `a[0]`
 * as a key) and are refused in gjson form, as are multipaths.
 */
export function gjsonToJsonPath(path: string): { path: string } | { problem: string } {
  if (/^[.{]/.test(path) || /^\$(?:$|[.[])/.test(path)) return { path };
  const wrong = (why: string) => ({ problem: `gjson path "${path}": ${why}` });
  const segments = splitSegments(path);
  if (segments === undefined) return wrong('it ends in an escape (\\) that escapes nothing');
  let out = '';
  for (const [i, chars] of segments.entries()) {
    const text = chars.map((c) => c.char).join('');
    const plain = (test: (c: string) => boolean) => chars.some((c) => !c.escaped && test(c.char));
    const unescaped = chars.every((c) => !c.escaped);
    if (text === '') return wrong(`empty segment ${i + 1}`);
    if (text === '#' && unescaped) {
      if (i === segments.length - 1) return wrong('a trailing "#" counts an array\'s elements; a reference needs names');
      out += '[*]';
      continue;
    }
    if ((chars[0]!.char === '#' && !chars[0]!.escaped && chars[1]?.char === '(') || (chars[0]!.char === '@' && !chars[0]!.escaped) || plain((c) => c === '|')) {
      return wrong('queries (#(…)), modifiers (@…) and pipes (|) are not supported by relsync; give a plain path');
    }
    if (plain((c) => c === '*' || c === '?')) return wrong('wildcards (* and ?) in a key are not supported by relsync');
    if (plain((c) => c === '{' || c === '}' || c === ',')) return wrong('multipaths ({…,…}) are not supported by relsync; give one path');
    if (plain((c) => c === '[' || c === ']')) return wrong('brackets are not gjson (it reads them as part of a key); write array elements as "items.0" or "items.#.name"');
    // An unescaped number is an array's element or an object's key, as gjson reads it (relsync's `.N`).
    if (/^\d+$/.test(text)) out += unescaped ? `.${text}` : `['${text}']`;
    else if (/^[A-Za-z_$][A-Za-z0-9_$-]*$/.test(text)) out += `.${text}`;
    else if (!text.includes("'")) out += `['${text}']`;
    else return wrong("a key with a quote (') in it is not supported by relsync");
  }
  return { path: out };
}

type PathChar = { readonly char: string; readonly escaped: boolean };

/** gjson's segments, split at unescaped dots; `\x` stands for x, marked escaped. Undefined: a trailing `\`. */
function splitSegments(path: string): PathChar[][] | undefined {
  const segments: PathChar[][] = [[]];
  for (let i = 0; i < path.length; i++) {
    const c = path[i]!;
    if (c === '\\') {
      if (i + 1 >= path.length) return undefined;
      segments.at(-1)!.push({ char: path[++i]!, escaped: true });
    } else if (c === '.') segments.push([]);
    else segments.at(-1)!.push({ char: c, escaped: false });
  }
  return segments;
}
