/**
 * Glob patterns whose only wildcard is `*` (any characters, none included), matched without a
 * regex engine: the copy policy runs them on every label and annotation key of a tenant's objects
 * (ten thousand keys on one object, each against every pattern), where even a linear-time engine
 * cost seconds per reconcile. The parts between stars are found leftmost-first, which is exact for
 * `*`-only patterns; the time is at most the key's length times the pattern's.
 */
export function globMatcher(pattern: string): (text: string) => boolean {
  const parts = pattern.split('*');
  if (parts.length === 1) return (text) => text === pattern;
  const first = parts[0]!;
  const last = parts[parts.length - 1]!;
  const middle = parts.slice(1, -1).filter((p) => p.length > 0);
  return (text) => {
    if (text.length < first.length + last.length || !text.startsWith(first) || !text.endsWith(last)) return false;
    const end = text.length - last.length;
    let at = first.length;
    for (const part of middle) {
      const found = text.indexOf(part, at);
      if (found < 0 || found + part.length > end) return false;
      at = found + part.length;
    }
    return true;
  };
}
