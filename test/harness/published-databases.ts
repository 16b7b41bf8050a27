/**
 * One api-syncagent PublishedResource for the example Database type, and what
 * relsync must do with it, shared by the tests that use it as the config on a
 * Kubernetes platform and on a kcp export: a filter, a reference, a selector
 * with a rewrite, and a service-origin template.
 */
import assert from 'node:assert/strict';
import { eventually } from './kube.js';
import { decode, type ClusterClient } from './tenant.js';

export const PUBLISHED_DATABASES = `
apiVersion: syncagent.kcp.io/v1alpha1
kind: PublishedResource
metadata:
  name: publish-databases
spec:
  resource: { apiGroup: demo.relsync.dev, versions: [v1alpha1], kind: Database }
  filter:
    resource:
      matchLabels: { synced: "yes" }
  related:
    - identifier: config
      origin: kcp
      kind: ConfigMap
      object:
        reference:
          path: spec.configMapName
    - identifier: extras
      origin: kcp
      kind: ConfigMap
      object:
        selector:
          matchLabels: { app: "{{ .Object.metadata.name }}" }
          rewrite:
            regex: { pattern: "^(.*)$", replacement: "\\\\1-extra" }
    - identifier: credentials
      origin: service
      kind: Secret
      object:
        template:
          template: "{{ .Object.metadata.name }}-credentials"
`;

/** Creates primaries and related objects in `namespace` of the platform, and checks each rule of PUBLISHED_DATABASES, with `copyNamespace` in the service cluster. */
export async function checkPublishedDatabases(platform: ClusterClient, service: ClusterClient, namespace: string, copyNamespace: string): Promise<void> {
  await platform.putConfigMap(namespace, 'settings', { v: '1' });
  await platform.putConfigMap(namespace, 'tuning', { t: '1' }, { app: 'orders' });
  await platform.createDatabase(namespace, 'orders', { configMapName: 'settings' }, { synced: 'yes' });
  await platform.createDatabase(namespace, 'ignored', { configMapName: 'settings' });
  await eventually('reference copied', async () => (await service.configMap(copyNamespace, 'settings'))?.data?.v === '1', 60_000);
  await eventually('selector match copied under its rewritten name', () => service.configMap(copyNamespace, 'tuning-extra'), 30_000);
  await service.putSecret(copyNamespace, 'orders-credentials', { password: 'p' }, undefined, await service.copyOf(copyNamespace, 'orders'));
  await eventually('service-side Secret copied back', async () => decode(await platform.secret(namespace, 'orders-credentials'), 'password') === 'p', 30_000);
  await platform.putConfigMap(namespace, 'settings', { v: '2' });
  await eventually('a related change without touching the primary', async () => (await service.configMap(copyNamespace, 'settings'))?.data?.v === '2', 30_000);
  assert.equal(await service.database(copyNamespace, 'ignored'), undefined, 'the filter keeps unlabelled primaries out');
}
