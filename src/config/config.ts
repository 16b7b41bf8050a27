/**
 * The validated, compiled config that the rest of relsync works with:
 * templates, paths, regexes and selectors are parsed once here, so a mistake
 * is reported at start with its exact place in the file.
 */
import type { TypeReference } from '../kube/discovery.js';
import type { CopyPolicy } from './copy-policy.js';
import type { JsonPath } from '../rules/json-path.js';
import type { LabelSelector } from '../rules/label-selector.js';
import type { Template } from '../rules/template.js';

export interface ClusterConfig {
  readonly name: string;
  /** Absolute path; undefined means in-cluster config. */
  readonly kubeconfig: string | undefined;
  readonly context: string | undefined;
  /** A kcp platform, reached through an APIExport's virtual workspace; see kube/kcp-endpoint.ts. */
  readonly kcp?: { readonly endpointSlice: string | undefined; readonly url: string | undefined } | undefined;
}

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
  /** `resources[0].related[1]`, for messages. */
  readonly where: string;
}

export interface PublishedResource {
  readonly type: TypeReference;
  readonly selector: LabelSelector | undefined;
  readonly naming: { readonly namespace: Template; readonly name: Template };
  readonly related: readonly RelatedRule[];
  readonly where: string;
}

/** Whether sources can come from more than one cluster (several platform clusters, or kcp's many workspaces): tenants to keep apart. */
export function hasManyClusters(platformClusters: readonly ClusterConfig[]): boolean {
  return platformClusters.length > 1 || platformClusters.some((c) => c.kcp !== undefined);
}

export interface Config {
  readonly agentName: string;
  readonly platformClusters: readonly ClusterConfig[];
  readonly serviceCluster: ClusterConfig;
  readonly storePath: string;
  readonly workers: number;
  /** Caps on what one primary's copies may cost (see schema.ts). */
  readonly limits: { readonly relatedPerPrimary: number; readonly copyBytes: number; readonly primariesPerCluster: number };
  readonly resync: { readonly schedule: string; readonly onStartup: boolean; readonly snapshotBytes: number };
  readonly watch: { readonly timeoutSeconds: number; readonly idleTimeoutSeconds: number };
  readonly leaderElection: {
    readonly enabled: boolean;
    readonly namespace: string;
    /** Whether the namespace was given (config or POD_NAMESPACE), not the "default" fallback. */
    readonly namespaceKnown: boolean;
    readonly name: string;
    readonly leaseDurationSeconds: number;
    readonly renewDeadlineSeconds: number;
    readonly retryPeriodSeconds: number;
  };
  readonly resources: readonly PublishedResource[];
  /** What of a source's metadata reaches its copy. */
  readonly copy: CopyPolicy;
}
