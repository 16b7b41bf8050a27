/**
 * A related rule as relsync applies it: how related objects are found
 * (reference, template, selector, inverse), where they go, and what a
 * service-side source must show. Compiled from the config (config/compile-config.ts);
 * resolved against the API servers' types (sync/resolved-config.ts).
 */
import type { ResourceType, TypeReference } from '../core/resource-type.js';
import type { JsonPath } from './json-path.js';
import type { MutationRules } from './mutation.js';
import type { Template } from './template.js';

export type NameRewrite = { readonly kind: 'regex'; readonly pattern: RegExp; readonly replacement: string } | { readonly kind: 'template'; readonly template: Template };

/** A selector requirement whose key and values are templates over the primary. */
export interface SelectorTemplate {
  readonly key: Template;
  readonly operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';
  readonly values: readonly Template[];
  /** `matchLabels.app` or `matchExpressions[0]`, for messages. */
  readonly where: string;
}

/** How a related object names its owner (an inverse rule). */
export type OwnerPointer =
  | { readonly kind: 'label'; readonly key: string }
  | { readonly kind: 'annotation'; readonly key: string }
  | { readonly kind: 'ownerReference' }
  | { readonly kind: 'namePattern'; readonly pattern: RegExp };

export type RelatedFinder =
  | { readonly kind: 'reference'; readonly path: JsonPath; readonly destinationPath: JsonPath | undefined; readonly rewrite: NameRewrite | undefined }
  | { readonly kind: 'template'; readonly name: Template; readonly destinationName: Template | undefined }
  | { readonly kind: 'selector'; readonly requirements: readonly SelectorTemplate[]; readonly allowEmpty: boolean; readonly rewrite: NameRewrite | undefined }
  | {
      readonly kind: 'inverse';
      readonly owner: OwnerPointer;
      readonly namespaceFrom: { readonly kind: 'label' | 'annotation'; readonly key: string } | undefined;
      readonly rewrite: NameRewrite | undefined;
    };

export type Origin = 'platform' | 'service';

/**
 * When the platform-side copies of an origin-service rule go (api-syncagent's names). MatchOrigin:
 * with the primary, and as soon as the origin object is gone or no longer found. OnPrimaryDeletion:
 * only with the primary (until then a copy whose origin went is kept, no longer updated). Orphan:
 * never; kept like OnPrimaryDeletion while the primary lives, and released (relsync's marks
 * removed, so it is an ordinary object of the tenant's) when the primary goes. Copies in the
 * service cluster (origin platform) always follow MatchOrigin: no tenant's data outlives its
 * primary in the provider's cluster.
 */
export type CleanupPolicy = 'MatchOrigin' | 'OnPrimaryDeletion' | 'Orphan';

/** What makes a service-side object the copy's own (origin service): see rules/provenance.ts. */
export type Provenance =
  | { readonly kind: 'ownerReference' }
  | { readonly kind: 'label'; readonly key: string; readonly value: Template }
  | { readonly kind: 'anyInNamespace' };

export interface RelatedRule {
  readonly id: string;
  readonly origin: Origin;
  readonly source: TypeReference;
  readonly destination: TypeReference;
  readonly finder: RelatedFinder;
  readonly sourceNamespace: Template | undefined;
  readonly destinationNamespace: Template | undefined;
  /** origin service: what a source must show to be the copy's; undefined for origin platform. */
  readonly provenance: Provenance | undefined;
  /** Always MatchOrigin for origin platform. */
  readonly cleanup: CleanupPolicy;
  /** The source's status goes to the copy too (its status subresource, where the type has one). */
  readonly syncStatus?: boolean;
  /** What the copies hold differs from their source at these paths. */
  readonly mutation?: MutationRules;
  /** An object in a copy's place that its owner granted to the source is taken over (sync/adoption.ts). */
  readonly adopt?: boolean;
  /** On kcp: the identity of the APIExport of the platform-side type, when it is another export's (claimed by the primary's). */
  readonly identityHash?: string;
  /** `resources[0].related[1]`, for messages. */
  readonly where: string;
}

/** A rule whose source and destination types the API servers confirmed. */
export interface ResolvedRule extends RelatedRule {
  readonly sourceType: ResourceType;
  readonly destinationType: ResourceType;
}
