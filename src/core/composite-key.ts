/**
 * One in-memory map key from several parts (a pair of identities, a type in
 * a cluster, a relation): joined with NUL, which no Kubernetes name, label,
 * resource or cluster name contains, so different parts never make one key.
 * Never stored.
 */
export function compositeKey(...parts: readonly string[]): string {
  return parts.join('\u0000');
}
