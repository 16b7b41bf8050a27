/**
 * The validated, compiled config that the rest of relsync works with:
 * templates, paths, regexes and selectors are parsed once here, so a mistake
 * is reported at start with its exact place in the file.
 */
import type { TypeReference } from '../core/resource-type.js';
import type { LabelSelector } from '../core/label-selector.js';
import type { ClusterConfig } from '../kube/cluster-config.js';
import type { MutationRules } from '../rules/mutation.js';
import type { RelatedRule } from '../rules/rule.js';
import type { CopyPolicy } from './copy-policy.js';
import type { ConfigNotice } from './config-problem.js';
import type { Template } from '../rules/template.js';

export interface PublishedResource {
  /** Versions the type may be synced at (the first every cluster serves, the first platform's preferred first); else `type.version`. */
  readonly versions?: readonly string[];
  readonly type: TypeReference;
  /** What the copy holds differs from the primary (spec), and the status brought back from the copy's (status). */
  readonly mutation?: MutationRules | undefined;
  /** The copies' type in the service cluster, when it is not `type` (config/schema.ts copyAs). */
  readonly copyAs?: TypeReference | undefined;
  /** An object in a copy's place that its owner granted to the primary is taken over (sync/adoption.ts). */
  readonly adopt?: boolean | undefined;
  /** Read each primary's kcp workspace path: marked on its copy, `clusterPath` in templates. */
  readonly workspacePath?: boolean | undefined;
  readonly selector: LabelSelector | undefined;
  /** Matched against the labels of the primary's namespace. */
  readonly namespaceSelector?: LabelSelector | undefined;
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
  /** Caps on what one primary's copies, one tenant and one LIST may cost (see schema.ts). */
  readonly limits: { readonly relatedPerPrimary: number; readonly copyBytes: number; readonly primariesPerCluster: number; readonly primaries: number; readonly copiedBytesPerCluster: number; readonly copiesPerCluster: number; readonly copiedBytes: number; readonly listPages: number; readonly rewriteBytesPerSecondPerCluster: number; readonly rewriteBytesPerSecond: number; readonly parsedBytes: number; readonly parsedBytesInFlight: number };
  readonly resync: { readonly schedule: string; readonly onStartup: boolean; readonly snapshotBytes: number };
  readonly cache: { readonly bytes: number; readonly indexBytes: number };
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
  /** Shards the platform clusters are spread over (1: leader election only). */
  readonly sharding: { readonly shards: number };
  readonly resources: readonly PublishedResource[];
  /** What of a source's metadata reaches its copy. */
  readonly copy: CopyPolicy;
  /** What was read and deliberately not synced (a PublishedResource with synchronization disabled), for the log. */
  readonly notices?: readonly ConfigNotice[];
  /** Where imported entries of `resources` came from, for messages: `resources[3]` → its file and document. */
  readonly importedAs?: ReadonlyMap<string, string>;
}
