/**
 * What of a source's metadata may reach the other side. A tenant controls
 * every label and annotation of its objects, and some keys make a
 * cluster-wide tool act on the object that carries them (Argo CD and Flux
 * adopt what carries their keys, Helm what carries its release annotations,
 * Kubernetes components read their own `*.kubernetes.io` keys); a Secret of
 * type `kubernetes.io/service-account-token` makes the service cluster mint a
 * token. So keys are filtered by patterns, `*` matching any characters:
 * a key is copied unless a `deny` pattern matches it and no `allow` pattern
 * does; Secrets of a denied type are not copied at all.
 */
import { globMatcher } from '../util/glob.js';

export const DEFAULT_KEY_DENY: readonly string[] = [
  'kubernetes.io/*',
  '*.kubernetes.io/*',
  'k8s.io/*',
  '*.k8s.io/*',
  'argoproj.io/*',
  '*.argoproj.io/*',
  'fluxcd.io/*',
  '*.fluxcd.io/*',
  'meta.helm.sh/*',
  'cert-manager.io/*',
  '*.cert-manager.io/*',
  // replicators copy what carries their keys into other namespaces: across tenants
  'replicator.v1.mittwald.de/*',
  'reflector.v1.k8s.emberstack.com/*',
  'kubed.appscode.com/*',
];
/**
 * Recommended labels that describe the object are copied; `app.kubernetes.io/instance` (Argo CD's
 * tracking label) and `app.kubernetes.io/managed-by` (Helm's) are not. A deny list can never name
 * every tool: `deny: ['*']` with an allow list of the keys you need is the strict form.
 */
export const DEFAULT_KEY_ALLOW: readonly string[] = ['app.kubernetes.io/name', 'app.kubernetes.io/version', 'app.kubernetes.io/component', 'app.kubernetes.io/part-of'];
export const DEFAULT_SECRET_TYPE_DENY: readonly string[] = ['kubernetes.io/service-account-token', 'bootstrap.kubernetes.io/token'];

export interface KeyRules {
  readonly deny: readonly string[];
  readonly allow: readonly string[];
}

export interface CopyPolicy {
  /** Whether a label key (an annotation key) of a source goes to its copy. */
  readonly copiesLabel: (key: string) => boolean;
  readonly copiesAnnotation: (key: string) => boolean;
  /** Why a Secret of this type is not copied, or undefined when it is. */
  readonly secretTypeRefusal: (type: string) => string | undefined;
  /** What it was compiled from: a policy's identity (the functions above do not show it; sync/config-fingerprint.ts). */
  readonly source: { readonly labels: KeyRules; readonly annotations: KeyRules; readonly secretTypesDeny: readonly string[] };
}

export function compileCopyPolicy(labels: KeyRules, annotations: KeyRules, secretTypesDeny: readonly string[]): CopyPolicy {
  const denied = new Set(secretTypesDeny);
  return {
    copiesLabel: keyFilter(labels),
    copiesAnnotation: keyFilter(annotations),
    secretTypeRefusal: (type) => (denied.has(type) ? `Secrets of type ${type} are not copied (copy.secretTypes.deny)` : undefined),
    source: { labels, annotations, secretTypesDeny },
  };
}

/** The policy of a config without a `copy` section. */
export const defaultCopyPolicy: CopyPolicy = compileCopyPolicy({ deny: DEFAULT_KEY_DENY, allow: DEFAULT_KEY_ALLOW }, { deny: DEFAULT_KEY_DENY, allow: DEFAULT_KEY_ALLOW }, DEFAULT_SECRET_TYPE_DENY);

function keyFilter(rules: KeyRules): (key: string) => boolean {
  const deny = rules.deny.map(globMatcher);
  const allow = rules.allow.map(globMatcher);
  return (key) => !deny.some((d) => d(key)) || allow.some((a) => a(key));
}
