/**
 * The shape of relsync's YAML config, as zod schemas. Unknown fields are
 * errors (a typo must not be ignored silently). Defaults live here and are
 * documented in docs/configuration.md.
 */
import { DEFAULT_KEY_ALLOW, DEFAULT_KEY_DENY, DEFAULT_SECRET_TYPE_DENY } from './copy-policy.js';
import cron from 'node-cron';
import { z } from 'zod';

/**
 * The default copy namespace: readable, and 64 bits of hash (16 hex digits) within the 63
 * characters of a namespace name, so that no tenant can find a namespace whose copy namespace
 * is another tenant's (sync/copy-namespaces.ts records whom each serves as well).
 */
export const DEFAULT_COPY_NAMESPACE = '{{ join "-" cluster namespace | trunc 46 }}-{{ hash cluster namespace | trunc 16 }}';
/** The default before 64-bit hashes (24 bits): namespaces made under it keep their copies. */
export const LEGACY_COPY_NAMESPACE = '{{ join "-" cluster namespace | trunc 56 }}-{{ hash cluster namespace | trunc 6 }}';

const dnsLabel = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
const labelValue = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

/** Cross-field checks run only when each field is valid: one mistake, one problem. */
const onlyIfValid = (payload: { issues: readonly unknown[] }) => payload.issues.length === 0;

const clusterName = z
  .string()
  .max(63)
  .regex(dnsLabel, 'must be a lowercase DNS label (a-z, 0-9, "-"), because it is part of copy names and labels');

const typeFields = {
  /** API group; "" (or omitted) for core types such as secrets and configmaps. */
  group: z.string().default(''),
  /** Version; default: the group's preferred version. */
  version: z.string().min(1).optional(),
  /** Plural resource name, e.g. `secrets`. Give this or `kind`. */
  resource: z.string().min(1).optional(),
  /** Kind, resolved to a resource through discovery. Give this or `resource`. */
  kind: z.string().min(1).optional(),
};

function oneOfResourceOrKind<T extends { resource?: string | undefined; kind?: string | undefined }>(value: T, ctx: z.RefinementCtx): void {
  if ((value.resource === undefined) === (value.kind === undefined)) {
    ctx.addIssue({ code: 'custom', message: 'give exactly one of "resource" or "kind"', path: ['resource'] });
  }
}

export const typeSchema = z.strictObject(typeFields).superRefine(oneOfResourceOrKind);

const labelSelectorRequirement = z.strictObject({
  key: z.string().min(1),
  operator: z.enum(['In', 'NotIn', 'Exists', 'DoesNotExist']),
  values: z.array(z.string()).optional(),
});

export const labelSelectorSchema = z.strictObject({
  matchLabels: z.record(z.string(), z.string()).optional(),
  matchExpressions: z.array(labelSelectorRequirement).optional(),
});

const rewriteSchema = z
  .strictObject({
    /** Regex over the source name; `replacement` may use $1 or $<group>. */
    regex: z.strictObject({ pattern: z.string().min(1), replacement: z.string() }).optional(),
    /** Template with `value` (the source name) and the primary's variables. */
    template: z.string().min(1).optional(),
  })
  .refine((r) => (r.regex === undefined) !== (r.template === undefined), 'give exactly one of "regex" or "template"');

const referenceSchema = z.strictObject({
  /** JSONPath into the origin side's primary (for origin service: its copy). */
  path: z.string().min(1),
  /** JSONPath into the destination side's primary; names are paired by position. */
  destinationPath: z.string().min(1).optional(),
  rewrite: rewriteSchema.optional(),
});

const templateRuleSchema = z.strictObject({
  /** Name of the source object, built from the primary. */
  name: z.string().min(1),
  /** Name of the copy; default: the source name. */
  destinationName: z.string().min(1).optional(),
});

const selectorRuleSchema = z.strictObject({
  /** Keys and values are templates over the primary (cluster, namespace, name, object). */
  matchLabels: z.record(z.string(), z.string()).optional(),
  matchExpressions: z.array(labelSelectorRequirement).optional(),
  /** An empty selector matches every object of the type in the namespace; only when this says so. */
  allowEmpty: z.boolean().default(false),
  /** Name of the copy; default: the matched object's name. Templates also see `related`. */
  rewrite: rewriteSchema.optional(),
}).refine((r) => r.allowEmpty || Object.keys(r.matchLabels ?? {}).length > 0 || (r.matchExpressions ?? []).length > 0, {
  message: 'an empty selector matches every object of the type in the namespace; say so with allowEmpty: true, or give matchLabels or matchExpressions',
  path: ['allowEmpty'],
});

const fromLabelOrAnnotation = z
  .strictObject({ label: z.string().min(1).optional(), annotation: z.string().min(1).optional() })
  .refine((r) => (r.label === undefined) !== (r.annotation === undefined), 'give exactly one of "label" or "annotation"');

const inverseRuleSchema = z
  .strictObject({
    /** The related object's label whose value is its owner's name. */
    label: z.string().min(1).optional(),
    /** The related object's annotation whose value is its owner's name. */
    annotation: z.string().min(1).optional(),
    /** An ownerReference to the primary's kind (platform origin) or its copy (service origin). */
    ownerReference: z.literal(true).optional(),
    /** A regex over the related object's name with a named group `name`: the owner's name. */
    namePattern: z.string().min(1).optional(),
    /** Where the owner's namespace comes from; default: the related object's own namespace. */
    namespaceFrom: fromLabelOrAnnotation.optional(),
    rewrite: rewriteSchema.optional(),
  })
  .refine(
    (r) => [r.label, r.annotation, r.ownerReference, r.namePattern].filter((v) => v !== undefined).length === 1,
    'give exactly one of "label", "annotation", "ownerReference" or "namePattern"',
  );

const provenanceSchema = z
  .strictObject({
    /** The source has an ownerReference to the primary's copy (its uid): the default. */
    ownerReference: z.literal(true).optional(),
    /** The source carries this label with this value (a template over the primary): a mark the operator sets. */
    label: z.strictObject({ key: z.string().min(1), value: z.string().min(1) }).optional(),
    /** Every object in the source namespace counts: only where the operator keeps nothing of its own there. */
    anyInNamespace: z.literal(true).optional(),
  })
  .refine((p) => [p.ownerReference, p.label, p.anyInNamespace].filter((v) => v !== undefined).length === 1, 'give exactly one of "ownerReference", "label" or "anyInNamespace"');

/** One mutation rule (rules/mutation.ts): exactly one of delete, regex, template. */
const mutationSchema = z
  .strictObject({
    delete: z.strictObject({ path: z.string().min(1) }).optional(),
    /** No pattern: the whole value is replaced. JavaScript syntax: `$1`, `$<name>` in the replacement. */
    regex: z.strictObject({ path: z.string().min(1), pattern: z.string().optional(), replacement: z.string().default('') }).optional(),
    /** The value becomes the rendered template (variables: value, object). */
    template: z.strictObject({ path: z.string().min(1), template: z.string() }).optional(),
  })
  .refine((m) => [m.delete, m.regex, m.template].filter((v) => v !== undefined).length === 1, 'give exactly one of "delete", "regex" or "template"');

/** Mutations of what a copy holds: `spec` of the copied fields, `status` of a status copied. */
export const mutationRulesSchema = z.strictObject({ spec: z.array(mutationSchema).default([]), status: z.array(mutationSchema).default([]) });

export const relatedRuleSchema = z
  .strictObject({
    id: z.string().regex(dnsLabel, 'must be a lowercase DNS label'),
    origin: z.enum(['platform', 'service']),
    ...typeFields,
    /**
     * The type written on the destination side; default: the source's. Only a ConfigMap for a
     * Secret and back differs (content converted, sync/content-conversion.ts); any other type is
     * refused at load (related-types.ts).
     */
    destination: typeSchema.optional(),
    reference: referenceSchema.optional(),
    template: templateRuleSchema.optional(),
    selector: selectorRuleSchema.optional(),
    inverse: inverseRuleSchema.optional(),
    /** Namespaces; default: the primary's (or its copy's) namespace on each side. */
    namespace: z.strictObject({ source: z.string().min(1).optional(), destination: z.string().min(1).optional() }).optional(),
    /**
     * origin service only: what makes a service-side object the copy's, so that a tenant cannot
     * name one of the provider's; default: an ownerReference to the copy (see rules/provenance.ts).
     */
    provenance: provenanceSchema.optional(),
    /**
     * origin service only: when the platform-side copies go (rules/rule.ts CleanupPolicy); default
     * MatchOrigin, with the primary and with their origin object.
     */
    cleanupPolicy: z.enum(['MatchOrigin', 'OnPrimaryDeletion', 'Orphan']).optional(),
    /**
     * The source's status is copied too, to the copy's status subresource where its type has one
     * (api-syncagent's syncStatus): an operator's status on a related object reaches the tenant.
     */
    syncStatus: z.boolean().optional(),
    /** What the copies hold differs from their source at these paths (rules/mutation.ts). */
    mutation: mutationRulesSchema.optional(),
    /**
     * An object in a copy's place that is not relsync's is taken over (adopted) when its owner
     * granted it with the relsync.dev/adopt annotation naming exactly this source (sync/adoption.ts);
     * default false: it is a conflict, left untouched.
     */
    adopt: z.boolean().optional(),
    /**
     * On kcp: the identity of the APIExport the rule's platform-side type comes from, when it is not
     * the primary's export (api-syncagent's identityHash). relsync reaches it through the primary's
     * export, which must claim it with this identity; checked at start.
     */
    identityHash: z.string().regex(/^[0-9a-f]{64}$/, 'must be an APIExport\'s status.identityHash (64 hex digits)').optional(),
  })
  .superRefine(oneOfResourceOrKind)
  .superRefine((rule, ctx) => {
    const ways = (['reference', 'template', 'selector', 'inverse'] as const).filter((k) => rule[k] !== undefined);
    if (ways.length !== 1) {
      ctx.addIssue({
        code: 'custom',
        message: `give exactly one way to find the objects: "reference", "template", "selector" or "inverse" (got ${ways.length === 0 ? 'none' : ways.join(', ')})`,
      });
    }
    if (rule.provenance && rule.origin !== 'service') {
      ctx.addIssue({ code: 'custom', path: ['provenance'], message: 'only a rule with origin: service has a provenance (a platform-side source is the tenant\'s own)' });
    }
    if (rule.cleanupPolicy !== undefined && rule.cleanupPolicy !== 'MatchOrigin' && rule.origin !== 'service') {
      ctx.addIssue({ code: 'custom', path: ['cleanupPolicy'], message: "only a rule with origin: service has a cleanup policy: copies in the service cluster always go with their primary and their origin object (no tenant's data outlives its primary there)" });
    }
    const sel = rule.selector;
    if (sel && !sel.allowEmpty && Object.keys(sel.matchLabels ?? {}).length === 0 && (sel.matchExpressions ?? []).length === 0) {
      ctx.addIssue({ code: 'custom', path: ['selector'], message: 'an empty selector matches every object in the namespace; set "allowEmpty: true" if that is meant' });
    }
  });

export const publishedResourceSchema = z
  .strictObject({
    ...typeFields,
    /**
     * Versions relsync may sync the type at, instead of one `version`: it takes the first that every
     * platform and the service cluster serve, the first platform's preferred version first, and
     * reads and writes that version everywhere (each API server converts to what it stores).
     */
    versions: z.array(z.string().min(1)).min(1).optional(),
    /**
     * The type the copies have in the service cluster, when it is not the primary's (api-syncagent's
     * projection, seen from the other side): another group, version, kind or plural. The copy gets
     * the primary's fields as they are; the copy's status comes back as it is.
     */
    copyAs: typeSchema.optional(),
    /** What the copy holds differs from the primary at these paths, and the status brought back from the copy's (rules/mutation.ts). */
    mutation: mutationRulesSchema.optional(),
    /**
     * On kcp: read each primary's workspace path (`root:org:team`, its LogicalCluster's `kcp.io/path`),
     * marked on its copy and given to templates as `clusterPath` (api-syncagent's enableWorkspacePaths).
     * The APIExport needs a permission claim on logicalclusters.core.kcp.io. Default false.
     */
    workspacePath: z.boolean().optional(),
    /** As a related rule's `adopt`, for the copies of the primaries: an existing object granted to a primary becomes its copy. */
    adopt: z.boolean().optional(),
    /** Only primaries matching this selector are synced; default: all. */
    selector: labelSelectorSchema.optional(),
    /** Only primaries in namespaces whose labels match this selector are synced (a namespaced type); default: all. */
    namespaceSelector: labelSelectorSchema.optional(),
    naming: z
      .strictObject({
        namespace: z.string().min(1).default(DEFAULT_COPY_NAMESPACE),
        name: z.string().min(1).default('{{ name }}'),
      })
      .prefault({}),
    related: z.array(relatedRuleSchema).default([]),
  })
  .superRefine(oneOfResourceOrKind)
  .superRefine((value, ctx) => {
    if (value.version !== undefined && value.versions !== undefined) ctx.addIssue({ code: 'custom', message: 'give "version" or "versions", not both', path: ['versions'] });
    if (value.versions !== undefined && value.copyAs !== undefined) ctx.addIssue({ code: 'custom', message: 'give "version" with "copyAs": the copies\' type is one version, and relsync syncs the primaries at one', path: ['versions'] });
  });

const connectionSchema = {
  /** Path of a kubeconfig file, relative to the config file. */
  kubeconfig: z.string().min(1).optional(),
  context: z.string().min(1).optional(),
};

/**
 * A kcp platform: the kubeconfig points at the provider's workspace, and
 * relsync reaches every workspace that binds the APIExport through its
 * virtual workspace. Give the APIExportEndpointSlice (relsync reads the URL
 * off its status) or the URL itself.
 */
const kcpSchema = z
  .strictObject({
    /** Name of the APIExportEndpointSlice in the kubeconfig's workspace. */
    apiExportEndpointSlice: z.string().min(1).optional(),
    /** The virtual workspace URL, e.g. https://kcp:6443/services/apiexport/<cluster>/<export>. */
    virtualWorkspaceUrl: z.url({ protocol: /^https$/, error: 'must be an https URL' }).optional(),
  })
  .refine((k) => (k.apiExportEndpointSlice === undefined) !== (k.virtualWorkspaceUrl === undefined), 'give exactly one of "apiExportEndpointSlice" or "virtualWorkspaceUrl"');

/** Key patterns: label or annotation keys where `*` matches any characters. */
const keyPattern = z.string().min(1).regex(/^[A-Za-z0-9*._/-]+$/, 'must be a label or annotation key, with * for any characters');
const keyRulesSchema = () =>
  z.strictObject({ deny: z.array(keyPattern).default([...DEFAULT_KEY_DENY]), allow: z.array(keyPattern).default([...DEFAULT_KEY_ALLOW]) }).prefault({});

export const configSchema = z
  .strictObject({
    /** Names this agent instance in the marks it puts on copies. */
    agentName: z.string().max(63).regex(labelValue, 'must be a valid label value').default('relsync'),
    platformClusters: z.array(z.strictObject({ name: clusterName, ...connectionSchema, kubeconfig: z.string().min(1), kcp: kcpSchema.optional() })).min(1),
    serviceCluster: z
      .strictObject({ name: clusterName.default('service'), ...connectionSchema })
      .prefault({}),
    store: z.strictObject({ path: z.string().min(1).default('./relsync.db') }).prefault({}),
    /** Full-resync sweeps: a cron expression (node-cron, 5 or 6 fields: seconds allowed) and whether to sweep at start. */
    resync: z
      .strictObject({
        schedule: z
          .string()
          .default('*/10 * * * *')
          .superRefine((expr, ctx) => {
            const result = cron.validateDetailed(expr);
            if (!result.valid) {
              const detail = result.errors.map((e) => `${e.field}${e.value !== undefined ? ` "${e.value}"` : ''}: ${e.message}`).join('; ');
              ctx.addIssue({ code: 'custom', message: `invalid cron expression "${expr}"${detail ? ` (${detail})` : ''}` });
            }
          }),
        onStartup: z.boolean().default(true),
        /**
         * How much of its LISTs a sweep keeps in memory for the reconciles it runs, in bytes of the
         * objects' estimated size in the heap (util/heap-size.ts); what does not fit is read live.
         * Bounds the sweep's memory whatever the tenants store.
         */
        snapshotBytes: z.number().int().min(0).default(64 * 1024 * 1024),
      })
      .prefault({}),
    /**
     * The objects relsync's watches delivered, kept for reconciles to read instead of asking the API
     * server again (cache/object-cache.ts), in bytes of their JSON text as the heap holds it plus a little per object; what does not
     * fit is read live. 0 reads everything live, and selector and inverse rules LIST.
     */
    cache: z
      .strictObject({
        bytes: z.number().int().min(0).default(32 * 1024 * 1024),
        /**
         * What the finder index of selector and inverse rules (cache/finder-index.ts) may hold, in
         * bytes of its own estimate: about 280 per related object it indexes (a heap snapshot of
         * 100,000 entries measured 250), so the default holds some 120,000. Past it the largest
         * type is let go and its rules LIST until that type's next LIST; a LIST walks the whole
         * namespace on the API server. 0, or cache.bytes 0: no index.
         */
        indexBytes: z.number().int().min(0).default(32 * 1024 * 1024),
      })
      .prefault({}),
    /** Leader election through a Lease in the service cluster: with several replicas only one reconciles. */
    leaderElection: z
      .strictObject({
        enabled: z.boolean().default(true),
        /** Namespace of the Lease; default: $POD_NAMESPACE, else "default". */
        namespace: z.string().regex(dnsLabel, 'must be a namespace name').optional(),
        /** Name of the Lease; default: relsync-<agentName>. */
        name: z.string().min(1).optional(),
        leaseDurationSeconds: z.number().positive().default(15),
        renewDeadlineSeconds: z.number().positive().default(10),
        retryPeriodSeconds: z.number().positive().default(2),
      })
      .refine((l) => l.renewDeadlineSeconds < l.leaseDurationSeconds, { message: 'renewDeadlineSeconds must be shorter than leaseDurationSeconds', path: ['renewDeadlineSeconds'], when: onlyIfValid })
      .refine((l) => l.retryPeriodSeconds < l.renewDeadlineSeconds, { message: 'retryPeriodSeconds must be shorter than renewDeadlineSeconds', path: ['retryPeriodSeconds'], when: onlyIfValid })
      .prefault({}),
    /**
     * Active-active replicas (controller/shard-coordinator.ts): the platform clusters (on kcp, the
     * logical clusters) are spread over this many shards, each a Lease in the service cluster next
     * to the leader Lease; each replica holds a balanced share. 1: one replica reconciles, the
     * others wait (leader election, as before).
     */
    sharding: z.strictObject({ shards: z.number().int().min(1).max(64).default(1) }).prefault({}),
    /** Watch connections: how long the API server keeps one open, and how long a silent one is trusted. */
    watch: z
      .strictObject({
        /** Server-side timeout of each watch request (jittered down by up to 20 %). */
        timeoutSeconds: z.number().int().min(1).max(3600).default(300),
        /** Reconnect when nothing, not even a bookmark, arrived this long; default timeoutSeconds + 30. */
        idleTimeoutSeconds: z.number().int().min(1).optional(),
      })
      .refine((w) => w.idleTimeoutSeconds === undefined || w.idleTimeoutSeconds > w.timeoutSeconds, { message: 'idleTimeoutSeconds must be longer than timeoutSeconds', path: ['idleTimeoutSeconds'], when: onlyIfValid })
      .prefault({}),
    /** Which labels, annotations and Secret types of a source reach its copy (config/copy-policy.ts). */
    copy: z
      .strictObject({
        labels: keyRulesSchema(),
        annotations: keyRulesSchema(),
        secretTypes: z.strictObject({ deny: z.array(z.string().min(1)).default([...DEFAULT_SECRET_TYPE_DENY]) }).prefault({}),
      })
      .prefault({}),
    /** Primaries reconciled in parallel. */
    workers: z.number().int().min(1).max(64).default(4),
    /** What one tenant's objects may cost: beyond these, relsync copies no more and says so on the primary. */
    limits: z
      .strictObject({
        /** Related objects one primary's rules may copy, together (selectors and inverse rules can find many). */
        relatedPerPrimary: z.number().int().min(1).default(500),
        /** Bytes of one copy's content (its data, spec, labels and annotations as JSON). */
        copyBytes: z.number().int().min(1024).default(1024 * 1024),
        /** Primaries synced per platform cluster (per workspace on kcp): one tenant's flood stops at its own limit. */
        primariesPerCluster: z.number().int().min(1).default(20_000),
        /**
         * Primaries synced in all, over every cluster: what relsync holds in memory and in its store
         * is set by this, however many clusters (kcp workspaces) tenants bind.
         */
        primaries: z.number().int().min(1).default(100_000),
        /**
         * Bytes of content one platform cluster's (kcp: workspace's) copies may take in the service
         * cluster, whose etcd stops every write at its quota (2 GiB by default) whoever filled it.
         */
        copiedBytesPerCluster: z.number().int().min(1024).default(512 * 1024 * 1024),
        /** Copies (primaries' and related) one platform cluster (kcp: workspace) may have in the service cluster. */
        copiesPerCluster: z.number().int().min(1).default(100_000),
        /**
         * Bytes of content all copies may take in the service cluster together; shared fairly, so up
         * to twice this in all: the default keeps that under etcd's default quota of 2 GiB.
         */
        copiedBytes: z.number().int().min(1024).default(768 * 1024 * 1024),
        /**
         * Bytes of copies one platform cluster (kcp: workspace) may make relsync rewrite per second
         * in the service cluster: each update leaves the old revision in etcd until compaction
         * (5 minutes by default), counted against its quota. Faster rewrites wait (sync/rewrite-pace.ts).
         */
        rewriteBytesPerSecondPerCluster: z.number().int().min(1024).default(1024 * 1024),
        /**
         * The same for all clusters together, shared among those rewriting: with the defaults, etcd
         * holds at most ~600 MiB of relsync's old revisions between two compactions.
         */
        rewriteBytesPerSecond: z.number().int().min(1024).default(2 * 1024 * 1024),
        /** Pages one LIST may take: an API server that answers every page with another continue token ends there. */
        listPages: z.number().int().min(1).default(10_000),
        /**
         * Heap one API answer or watch event may take once parsed, as its text says before it is
         * parsed (util/heap-size.ts): a LIST page over it is asked for again smaller, and one object
         * over it alone is refused alone. 16 MiB at least: every object's metadata must pass.
         */
        parsedBytes: z.number().int().min(16 * 1024 * 1024).default(72 * 1024 * 1024),
        /**
         * The same, for every LIST page and watch event being parsed and handed on at once, over
         * the whole process; default twice parsedBytes, and never below it (one alone always fits).
         */
        parsedBytesInFlight: z.number().int().min(16 * 1024 * 1024).optional(),
      })
      .refine((l) => l.parsedBytesInFlight === undefined || l.parsedBytesInFlight >= l.parsedBytes, { message: 'parsedBytesInFlight must be at least parsedBytes (one answer alone must fit)', path: ['parsedBytesInFlight'], when: onlyIfValid })
      .prefault({}),
    /** api-syncagent PublishedResource manifests (files, relative to this one), read as more `resources`. */
    publishedResourceFiles: z.array(z.string().min(1)).optional(),
    resources: z.array(publishedResourceSchema).min(1, 'give at least one published resource (here or through publishedResourceFiles)'),
  });

export type RawConfig = z.infer<typeof configSchema>;
export type RawPublishedResource = z.infer<typeof publishedResourceSchema>;
export type RawRelatedRule = z.infer<typeof relatedRuleSchema>;
export type RawRewrite = z.infer<typeof rewriteSchema>;
export type RawLabelSelector = z.infer<typeof labelSelectorSchema>;
