// A related rule's `syncStatus` (api-syncagent's related[].syncStatus), driven by a PublishedResource
// manifest: a related object's status goes with it, through the copy's status subresource — the
// operator's status on a service-side Certificate reaches the tenant (origin service), and a
// platform-side object's status reaches the service cluster (origin kcp). A status change alone is
// synced, drift of the copy's status is set back, and relsync's own status writes cause no loop.
import assert from 'node:assert/strict';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { CustomObjectsApi } from '@kubernetes/client-node';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually, installCrd } from '../harness/kube.js';
import { metricTotal, startRelsync, writePublishedConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, isNotFound, type ClusterClient } from '../harness/tenant.js';

const CERTS = { group: 'certs.relsync.dev', version: 'v1', plural: 'certificates' };

const MANIFEST = `
apiVersion: syncagent.kcp.io/v1alpha1
kind: PublishedResource
metadata:
  name: publish-databases
spec:
  resource: { apiGroup: demo.relsync.dev, versions: [v1alpha1], kind: Database }
  related:
    - identifier: cert
      origin: service
      group: certs.relsync.dev
      version: v1
      resource: certificates
      syncStatus: true
      cleanupPolicy: MatchOrigin
      object:
        template:
          template: "{{ .Object.metadata.name }}-cert"
    - identifier: request
      origin: kcp
      group: certs.relsync.dev
      version: v1
      resource: certificates
      syncStatus: true
      object:
        reference:
          path: spec.request
    - identifier: config
      origin: kcp
      kind: ConfigMap
      object:
        reference:
          path: spec.configMapName
`;

/** A Certificate type with a status subresource, on both sides. */
function certCrd(dir: string): URL {
  const path = join(dir, 'certs-crd.json');
  const open = { type: 'object', 'x-kubernetes-preserve-unknown-fields': true };
  writeFileSync(path, JSON.stringify({
    apiVersion: 'apiextensions.k8s.io/v1',
    kind: 'CustomResourceDefinition',
    metadata: { name: `${CERTS.plural}.${CERTS.group}` },
    spec: {
      group: CERTS.group,
      scope: 'Namespaced',
      names: { plural: CERTS.plural, singular: 'certificate', kind: 'Certificate', listKind: 'CertificateList' },
      versions: [{ name: CERTS.version, served: true, storage: true, subresources: { status: {} }, schema: { openAPIV3Schema: { type: 'object', properties: { spec: open, status: open } } } }],
    },
  }));
  return pathToFileURL(path);
}

interface Cert {
  metadata: { name: string; namespace?: string; uid?: string; resourceVersion?: string; ownerReferences?: unknown[] };
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

const NS = 'certs';

describe('related objects\' status (syncStatus)', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  let certsA: CustomObjectsApi;
  let certsSvc: CustomObjectsApi;
  let relsync: RelsyncProcess;
  const copyNs = defaultCopyNamespace('tenant-a', NS);

  const cert = async (api: CustomObjectsApi, namespace: string, name: string): Promise<Cert | undefined> => {
    try {
      return (await api.getNamespacedCustomObject({ ...CERTS, namespace, name })) as Cert;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  };
  const putCert = async (api: CustomObjectsApi, namespace: string, name: string, spec: Record<string, unknown>, owner?: { name: string; uid: string }) => {
    const ownerReferences = owner ? [{ apiVersion: 'demo.relsync.dev/v1alpha1', kind: 'Database', name: owner.name, uid: owner.uid }] : undefined;
    return (await api.createNamespacedCustomObject({ ...CERTS, namespace, body: { apiVersion: `${CERTS.group}/${CERTS.version}`, kind: 'Certificate', metadata: { name, ownerReferences }, spec } })) as Cert;
  };
  const setStatus = async (api: CustomObjectsApi, namespace: string, name: string, status: Record<string, unknown>) => {
    const current = (await cert(api, namespace, name))!;
    await api.replaceNamespacedCustomObjectStatus({ ...CERTS, namespace, name, body: { ...current, status } });
  };
  const relatedWrites = () => metricTotal(relsync.httpPort, 'relsync_copies_written_total', (l) => l.includes('kind="related"'));

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-status-'));
    clusters = await startClusters('tenant-a', 'service');
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    ({ 'tenant-a': a, service: svc } = clusters.client);
    await Promise.all([installCrd(pa.kubeConfig, certCrd(dir)), installCrd(ps.kubeConfig, certCrd(dir))]);
    certsA = pa.kubeConfig.makeApiClient(CustomObjectsApi);
    certsSvc = ps.kubeConfig.makeApiClient(CustomObjectsApi);
    const { configPath } = writePublishedConfig(dir, { platform: pa.kubeconfigPath, service: ps.kubeconfigPath }, MANIFEST);
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
    await a.ensureNamespace(NS);
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it('origin service: the operator\'s Certificate reaches the tenant with its status, and a status change alone follows', async () => {
    await a.putConfigMap(NS, 'web-config', { v: '1' });
    await a.createDatabase(NS, 'web', { configMapName: 'web-config' });
    const copy = await svc.copyOf(copyNs, 'web');
    await putCert(certsSvc, copyNs, 'web-cert', { dnsName: 'web.example.com' }, { name: 'web', uid: copy.metadata.uid! });
    await setStatus(certsSvc, copyNs, 'web-cert', { ready: false, reason: 'Issuing' });
    await eventually('the copy with its status', async () => (await cert(certsA, NS, 'web-cert'))?.status?.reason === 'Issuing', 30_000);
    assert.equal((await cert(certsA, NS, 'web-cert'))?.spec?.dnsName, 'web.example.com');
    await setStatus(certsSvc, copyNs, 'web-cert', { ready: true, reason: 'Issued' });
    await eventually('a status change alone reaches the copy', async () => (await cert(certsA, NS, 'web-cert'))?.status?.ready === true, 30_000);
  });

  it('sets back a copy\'s status someone changed', async () => {
    await setStatus(certsA, NS, 'web-cert', { ready: false, reason: 'Forged' });
    await eventually('the copy\'s status set back', async () => (await cert(certsA, NS, 'web-cert'))?.status?.reason === 'Issued', 30_000);
  });

  it('origin kcp: a platform-side object\'s status reaches its copy in the service cluster', async () => {
    await putCert(certsA, NS, 'web-request', { dnsName: 'api.example.com' });
    await setStatus(certsA, NS, 'web-request', { phase: 'Submitted' });
    await a.updateDatabase(NS, 'web', (db) => void (db.spec = { ...db.spec, request: 'web-request' }));
    await eventually('the copy with its status', async () => (await cert(certsSvc, copyNs, 'web-request'))?.status?.phase === 'Submitted', 30_000);
  });

  it('relsync\'s own status writes cause no further writes (no loop)', async () => {
    const before = await relatedWrites();
    // Marker: one related change, synced; its arrival proves the events before it were handled.
    await a.putConfigMap(NS, 'web-config', { v: 'marker' });
    await eventually('the marker synced', async () => (await svc.configMap(copyNs, 'web-config'))?.data?.v === 'marker', 30_000);
    assert.equal(await relatedWrites(), before + 1, 'exactly the marker\'s write');
  });
});
