/**
 * How deeply a parsed JSON value nests, measured without recursion (a value
 * ten thousand levels deep is what it is for) and without walking further
 * than needed to say it is deeper than a limit.
 */

/**
 * Levels of arrays and objects, the value itself counting as one (`{"a":{}}` is 2, a string 0),
 * up to `limit + 1`: a deeper value answers `limit + 1` as soon as its first member that deep is met.
 */
export function nestingDepth(value: unknown, limit = Number.POSITIVE_INFINITY): number {
  let deepest = 0;
  const pending: Array<{ readonly value: unknown; readonly depth: number }> = [{ value, depth: 1 }];
  while (pending.length > 0) {
    const { value: v, depth } = pending.pop()!;
    if (v === null || typeof v !== 'object') continue;
    if (depth > limit) return limit + 1;
    if (depth > deepest) deepest = depth;
    // No array of the members is made (a map of 12,000 labels): walked by key. Parsed JSON has no inherited keys.
    if (Array.isArray(v)) {
      for (const member of v as unknown[]) if (member !== null && typeof member === 'object') pending.push({ value: member, depth: depth + 1 });
    } else {
      for (const key in v) {
        const member = (v as Record<string, unknown>)[key];
        if (member !== null && typeof member === 'object') pending.push({ value: member, depth: depth + 1 });
      }
    }
  }
  return deepest;
}
