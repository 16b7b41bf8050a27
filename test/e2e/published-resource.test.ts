// relsync configured only by an api-syncagent PublishedResource manifest,
// syncing both ways between real API servers (a Kubernetes platform cluster
// here; kcp is the other kind of platform).
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { checkPublishedDatabases, PUBLISHED_DATABASES } from '../harness/published-databases.js';
import { startRelsync, writePublishedConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

describe('a PublishedResource manifest as the config', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  let relsync: RelsyncProcess;

  before(async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-pr-'));
    clusters = await startClusters('tenant-a', 'service');
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    ({ 'tenant-a': a, service: svc } = clusters.client);
    const { configPath } = writePublishedConfig(dir, { platform: pa.kubeconfigPath, service: ps.kubeconfigPath }, PUBLISHED_DATABASES);
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it('syncs the filtered primaries and their related objects in both directions', async () => {
    await a.ensureNamespace('pr');
    await checkPublishedDatabases(a, svc, 'pr', defaultCopyNamespace('tenant-a', 'pr'));
  });
});
