/**
 * api-syncagent's reference paths are gjson paths (`spec.secretName`,
 * `spec.items.#.name`, `metadata.annotations.example\.com/x`); relsync's are
 * a JSONPath subset (rules/json-path.ts). This rewrites the gjson forms that
 * only walk an object into relsync's, and names the ones that do more
 * (queries, wildcards in keys, modifiers, `#` as a count) instead of reading
 * them as something else. A path already in relsync's form (a leading `.`,
 * `$` or `{`, or brackets) is kept as it is.
 */
export function gjsonToJsonPath(path: string): { path: string } | { problem: string } {
  if (/^[.${]/.test(path) || path.includes('[')) return { path };
  const segments = splitUnescaped(path);
  let out = '';
  for (const [i, raw] of segments.entries()) {
    const segment = raw.text;
    const last = i === segments.length - 1;
    if (segment === '') return { problem: `gjson path "${path}": empty segment ${i + 1}` };
    if (segment === '#') {
      if (last) return { problem: `gjson path "${path}": a trailing "#" counts an array's elements; a reference needs names` };
      out += '[*]';
      continue;
    }
    if (!raw.escaped && (segment.startsWith('#(') || segment.startsWith('@') || segment.includes('|'))) {
      return { problem: `gjson path "${path}": queries (#(…)), modifiers (@…) and pipes are not supported by relsync; give a plain path` };
    }
    if (raw.wildcard) return { problem: `gjson path "${path}": wildcards (* and ?) in a key are not supported by relsync` };
    if (/^\d+$/.test(segment)) out += `[${segment}]`;
    else if (/^[A-Za-z_][A-Za-z0-9_-]*$/.test(segment)) out += `.${segment}`;
    else if (!segment.includes("'")) out += `['${segment}']`;
    else return { problem: `gjson path "${path}": a key with a quote (') in it is not supported by relsync` };
  }
  return { path: out };
}

/** gjson's segments: split at dots that are not escaped with `\`; `\x` stands for x. */
function splitUnescaped(path: string): Array<{ text: string; escaped: boolean; wildcard: boolean }> {
  const segments: Array<{ text: string; escaped: boolean; wildcard: boolean }> = [];
  let current = { text: '', escaped: false, wildcard: false };
  for (let i = 0; i < path.length; i++) {
    const c = path[i]!;
    if (c === '\\' && i + 1 < path.length) {
      current.text += path[++i];
      current.escaped = true;
    } else if (c === '.') {
      segments.push(current);
      current = { text: '', escaped: false, wildcard: false };
    } else {
      if (c === '*' || c === '?') current.wildcard = true;
      current.text += c;
    }
  }
  segments.push(current);
  return segments;
}
