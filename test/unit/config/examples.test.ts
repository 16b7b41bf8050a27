// The configs in examples/ stay valid: each is parsed with stand-in kubeconfig files.
import assert from 'node:assert/strict';
import { cpSync, mkdirSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import type { Config } from '../../../src/config/config.js';
import { parseConfig } from '../../../src/config/load-config.js';

const examples = fileURLToPath(new URL('../../../../examples/', import.meta.url));

/**
 * Parses `examples/<path>` in a copy of examples/ (so that its relative paths
 * resolve), with stand-in files in examples/kubeconfigs/ for the ones it names.
 */
function parseExample(path: string, kubeconfigs: readonly string[]): Config {
  const dir = mkdtempSync(join(tmpdir(), 'relsync-examples-'));
  cpSync(examples, join(dir, 'examples'), { recursive: true });
  mkdirSync(join(dir, 'examples', 'kubeconfigs'), { recursive: true });
  for (const f of kubeconfigs) writeFileSync(join(dir, 'examples', 'kubeconfigs', f), 'apiVersion: v1\nkind: Config\n');
  const file = join(dir, 'examples', path);
  return parseConfig(readFileSync(file, 'utf8'), file);
}

describe('examples', () => {
  it('examples/relsync.yaml is a valid config', () => {
    const config = parseExample('relsync.yaml', ['tenant-a.yaml', 'tenant-b.yaml', 'service.yaml']);
    assert.equal(config.resources[0]!.related.length, 3);
    assert.deepEqual(config.notices ?? [], [], 'nothing a safety check warns of');
  });

  it('examples/api-syncagent/ is a valid config made of a PublishedResource', () => {
    const config = parseExample('api-syncagent/relsync.yaml', ['tenant-a.yaml', 'service.yaml']);
    const [resource] = config.resources;
    assert.deepEqual(resource!.related.map((r) => `${r.id}:${r.origin}:${r.finder.kind}:${r.cleanup}${r.syncStatus ? ':status' : ''}`), ['config:platform:reference:MatchOrigin', 'credentials:service:template:OnPrimaryDeletion', 'certificate:service:template:MatchOrigin:status']);
    assert.deepEqual({ group: resource!.type.group, version: resource!.type.version, copyAs: resource!.copyAs?.group }, { group: 'databases.example.com', version: 'v1', copyAs: 'demo.relsync.dev' }, 'the projection is the tenants\' type, spec.resource the copies\'');
    assert.ok(resource!.namespaceSelector, 'filter.namespace');
    assert.deepEqual([resource!.mutation?.spec.map((m) => m.kind), resource!.mutation?.status.map((m) => m.kind)], [['template', 'delete'], ['regex']]);
    assert.deepEqual(config.notices ?? [], [], 'nothing in it is read otherwise than api-syncagent reads it');
  });
});

describe('examples/kcp/', () => {
  it('relsync.yaml is a valid config with a kcp platform', () => {
    const config = parseExample('kcp/relsync.yaml', ['kcp-provider.yaml', 'service.yaml']);
    assert.deepEqual(config.platformClusters[0]!.kcp, { endpointSlice: 'demo.relsync.dev', url: undefined });
    assert.deepEqual(config.notices ?? [], [], 'nothing a safety check warns of');
  });
});

describe('deploy/config.yaml', () => {
  it('is a valid config once its kubeconfig paths exist', () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-deploy-config-'));
    const text = readFileSync(fileURLToPath(new URL('../../../../deploy/config.yaml', import.meta.url)), 'utf8').replaceAll('/etc/relsync/kubeconfigs/', `${dir}/`).replaceAll('/etc/relsync/', `${dir}/`);
    for (const f of ['tenant-a.yaml', 'tenant-b.yaml', 'service-kubeconfig.yaml']) writeFileSync(join(dir, f), 'apiVersion: v1\nkind: Config\n');
    const config = parseConfig(text, join(dir, 'config.yaml'));
    assert.equal(config.serviceCluster.kubeconfig, join(dir, 'service-kubeconfig.yaml'), 'its own token for the service cluster, not the pod\'s (the operator\'s)');
    const kubeconfig = readFileSync(fileURLToPath(new URL('../../../../deploy/service-kubeconfig.yaml', import.meta.url)), 'utf8');
    assert.match(kubeconfig, /tokenFile: \/var\/run\/secrets\/relsync\/token/);
    assert.equal(config.leaderElection.enabled, true);
    assert.deepEqual(config.notices ?? [], [], 'nothing a safety check warns of');
  });
});
