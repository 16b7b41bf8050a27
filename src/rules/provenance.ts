/**
 * Provenance of service-side sources. A service-origin rule finds its
 * sources from names the tenant controls (the copy's spec is the tenant's
 * primary), in a namespace the provider's operator also uses: without a
 * check, a tenant could name the operator's own Secret and have it copied to
 * its cluster. A service-side object is a source of a primary's relation only
 * when it shows that it belongs to that primary's copy:
 *
 * - ownerReference (the default): one of its ownerReferences names the copy's
 *   uid, as an operator sets on what it makes for the object
 *   (controllerutil.SetControllerReference);
 * - label: it carries a label, with a value rendered from the primary, that
 *   the operator sets (tenants cannot write service-side objects, except
 *   through relsync, whose copies are never sources);
 * - anyInNamespace: everything in the source namespace counts; for a namespace
 *   that holds nothing but what the operator makes for the tenant.
 */

import type { KubeObject } from '../core/object.js';
import type { TemplateContext } from './template.js';
import type { Provenance } from './rule.js';

/** Why `source` is not the copy's (for the provider's log), or undefined when it is. */
export function provenanceProblem(provenance: Provenance, source: KubeObject, copy: KubeObject, context: TemplateContext): string | undefined {
  switch (provenance.kind) {
    case 'anyInNamespace':
      return undefined;
    case 'ownerReference': {
      const uid = copy.metadata.uid;
      if (uid && (source.metadata.ownerReferences ?? []).some((ref) => ref.uid === uid)) return undefined;
      return `it has no ownerReference to the copy (uid ${uid ?? 'unknown'})`;
    }
    case 'label': {
      const want = provenance.value.render(context);
      if (want !== '' && source.metadata.labels?.[provenance.key] === want) return undefined;
      return `it lacks the label ${provenance.key}=${want}`;
    }
  }
}
