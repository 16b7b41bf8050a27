/**
 * What a NetworkPolicy, as the API server stored it, admits to a pod: its
 * ingress rules read as Kubernetes defines them (a rule admits a connection
 * when one of its ports and one of its peers match; no ports: every port; no
 * peers: everyone; a pod no policy selects admits everything). The test
 * control planes run no network plugin, so no packet is ever filtered there:
 * this is how a test checks what a shipped policy means. Peers by ipBlock are
 * never matched (the tests ask about pods).
 */
import { buildSelector, matchesSelector, type LabelSelector, type RawSelector } from '../../src/core/label-selector.js';

export interface NetworkPolicy {
  metadata: { namespace?: string };
  spec: {
    podSelector: RawSelector;
    policyTypes?: string[];
    ingress?: Array<{
      from?: Array<{ podSelector?: RawSelector; namespaceSelector?: RawSelector; ipBlock?: unknown }>;
      ports?: Array<{ protocol?: string; port?: number | string; endPort?: number }>;
    }> | null;
  };
}

/** A pod: its namespace (and that namespace's labels) and its own labels. */
export interface PodRef {
  readonly namespace: string;
  readonly namespaceLabels?: Readonly<Record<string, string>>;
  readonly labels: Readonly<Record<string, string>>;
}

const built = new Map<string, LabelSelector>();

function matches(raw: RawSelector, labels: Readonly<Record<string, string>>): boolean {
  const key = JSON.stringify(raw);
  let selector = built.get(key);
  if (!selector) {
    const { selector: made, problems } = buildSelector(raw);
    if (!made) throw new Error(`selector ${key}: ${problems.map((p) => p.message).join('; ')}`);
    built.set(key, (selector = made));
  }
  return matchesSelector(selector, labels);
}

/** Whether `policy` selects `pod` for ingress (applies to it at all). */
export function selectsForIngress(policy: NetworkPolicy, pod: PodRef): boolean {
  const types = policy.spec.policyTypes ?? ['Ingress'];
  return types.includes('Ingress') && policy.metadata.namespace === pod.namespace && matches(policy.spec.podSelector, pod.labels);
}

/**
 * Whether `policy` admits a connection from `peer` to `pod`'s `port`/`protocol`; `namedPorts`:
 * the pod's container ports by name. Undefined when the policy does not select the pod.
 */
export function admits(policy: NetworkPolicy, pod: PodRef & { readonly namedPorts: Readonly<Record<string, number>> }, peer: PodRef, port: number, protocol = 'TCP'): boolean | undefined {
  if (!selectsForIngress(policy, pod)) return undefined;
  return (policy.spec.ingress ?? []).some((rule) => {
    const portOk = !rule.ports?.length || rule.ports.some((p) => {
      if ((p.protocol ?? 'TCP') !== protocol) return false;
      if (p.port === undefined) return true;
      const first = typeof p.port === 'number' ? p.port : pod.namedPorts[p.port];
      if (first === undefined) return false;
      return port >= first && port <= (p.endPort ?? first);
    });
    const peerOk = !rule.from?.length || rule.from.some((f) => {
      if (f.ipBlock) return false;
      const namespaceOk = f.namespaceSelector ? matches(f.namespaceSelector, { 'kubernetes.io/metadata.name': peer.namespace, ...peer.namespaceLabels }) : peer.namespace === policy.metadata.namespace;
      const podOk = f.podSelector ? matches(f.podSelector, peer.labels) : true;
      return namespaceOk && podOk;
    });
    return portOk && peerOk;
  });
}
