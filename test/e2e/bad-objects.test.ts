// Objects at and past the API's limits, and objects that break the rules:
// each gets an Event on its primary and a log line, other primaries keep
// syncing, nothing crashes. Also: a store that cannot be written is refused
// at start with a clear error.
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { chmodSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import BetterSqlite3 from 'better-sqlite3';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { runCli, startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const NS = 'limits';
const long = (c: string, n: number) => c.repeat(n);

describe('objects at the limits and objects that break the rules', () => {
  let clusters: Clusters<'tenant-a' | 'service'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  let relsync: RelsyncProcess;
  let dir: string;
  let configPath: string;
  let storePath: string;
  const copyNs = defaultCopyNamespace('tenant-a', NS);

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-limits-'));
    clusters = await startClusters('tenant-a', 'service');
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    ({ 'tenant-a': a, service: svc } = clusters.client);
    storePath = join(dir, 'relsync.db');
    configPath = writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: pa.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: ps.kubeconfigPath },
      store: { path: storePath },
      resources: [
        {
          group: 'demo.relsync.dev',
          resource: 'databases',
          related: [
            { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
            { id: 'many', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapNames[*]' } },
            { id: 'tls', origin: 'platform', resource: 'secrets', template: { name: '{{ object.spec.tlsName | default name }}' } },
            { id: 'extra', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' } } },
          ],
        },
      ],
    });
    relsync = await startRelsync(configPath, join(dir, 'relsync.log'));
    await a.ensureNamespace(NS);
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  const warnings = async (primary: string, reason: string) => (await a.events(NS, primary)).filter((e) => e.reason === reason);
  const logged = (primary: string, reason: string) =>
    relsync.waitForLog(`${reason} warning for ${primary}`, (l) => l.includes(`"reason":"${reason}"`) && l.includes(`"object":"${NS}/${primary}"`) && l.includes('"level":"warn"'));

  it('syncs names at the 253-character limit, labels at their limits, and a namespace name of 63 characters', async () => {
    const name = `d${long('n', 252)}`;
    const cmName = `c${long('m', 252)}`;
    const labelKey = `${long('a', 63)}.${long('b', 63)}.${long('c', 63)}.${long('d', 61)}/${long('k', 63)}`;
    const labelValue = `v${long('x', 61)}v`;
    await a.putConfigMap(NS, cmName, { v: '1' });
    await a.createDatabase(NS, name, { configMapName: cmName }, { [labelKey]: labelValue });
    await eventually('253-character names copied', async () => (await svc.database(copyNs, name)) && (await svc.configMap(copyNs, cmName)), 30_000);
    assert.equal((await svc.database(copyNs, name))?.metadata.labels?.[labelKey], labelValue, 'a label at its limits is copied');
    // The selector rule renders app=<253 characters>: not a valid label value. That rule is a problem for this
    // primary only; the other rules still sync.
    await eventually('an Event says the selector rendered an invalid label value', async () => (await warnings(name, 'RelatedResourceProblem')).some((e) => /rule extra/.test(e.message ?? '') && /63/.test(e.message ?? '')), 20_000);
    await logged(name, 'RelatedResourceProblem');

    // A 63-character primary name is a valid selector value at its limit.
    const at63 = `e${long('x', 61)}e`;
    await a.putConfigMap(NS, 'matched-at-63', { v: '1' }, { app: at63 });
    await a.createDatabase(NS, at63, {});
    await eventually('selector value of 63 characters matches', () => svc.configMap(copyNs, 'matched-at-63'), 30_000);

    const longNs = `n${long('s', 61)}n`;
    await a.ensureNamespace(longNs);
    await a.putConfigMap(longNs, 'cfg', { v: 'long-namespace' });
    await a.createDatabase(longNs, 'one', { configMapName: 'cfg' });
    const longCopyNs = defaultCopyNamespace('tenant-a', longNs);
    assert.equal(longCopyNs.length, 63);
    await eventually('copy namespace cut to 63 characters', async () => (await svc.configMap(longCopyNs, 'cfg'))?.data?.v === 'long-namespace', 30_000);
  });

  it('reports a template that renders an invalid name and a reference of the wrong type, and syncs the rest', async () => {
    await a.putConfigMap(NS, 'bad-tls-cfg', { v: '1' });
    await a.createDatabase(NS, 'bad-tls', { configMapName: 'bad-tls-cfg', tlsName: 'Not_A_Valid_Name' });
    await a.createDatabase(NS, 'wrong-type', { configMapName: { name: 'cfg' }, configMapNames: [42, 'wrong-type-ok'] });
    await a.putConfigMap(NS, 'wrong-type-ok', { v: '1' });
    await eventually('Event for the invalid rendered name', async () => (await warnings('bad-tls', 'RelatedResourceProblem')).some((e) => /rule tls/.test(e.message ?? '') && /Not_A_Valid_Name/.test(e.message ?? '')), 20_000);
    await logged('bad-tls', 'RelatedResourceProblem');
    await eventually('the other rules of that primary still sync', () => svc.configMap(copyNs, 'bad-tls-cfg'), 20_000);
    await eventually('Event for a reference that is not a string', async () => (await warnings('wrong-type', 'RelatedResourceProblem')).some((e) => /rule config/.test(e.message ?? '') && /\.spec\.configMapName/.test(e.message ?? '')), 20_000);
    await logged('wrong-type', 'RelatedResourceProblem');
    await eventually('the string among the wrong-typed names still syncs', () => svc.configMap(copyNs, 'wrong-type-ok'), 20_000);
    assert.ok(await svc.database(copyNs, 'wrong-type'), 'the primary itself is copied');
  });

  it('copies a ConfigMap near the 1 MiB limit, and follows a change to it', async () => {
    const big = long('x', 1_048_000);
    await a.putConfigMap(NS, 'huge', { big });
    await a.createDatabase(NS, 'huge-owner', { configMapName: 'huge' });
    await eventually('huge ConfigMap copied', async () => (await svc.configMap(copyNs, 'huge'))?.data?.big?.length === big.length, 30_000);
    await a.putConfigMap(NS, 'huge', { big: `${big.slice(1)}y` });
    await eventually('change to the huge ConfigMap copied', async () => (await svc.configMap(copyNs, 'huge'))?.data?.big?.endsWith('y'), 30_000);
  });

  it('copies at most limits.relatedPerPrimary related objects of one primary and nothing over limits.copyBytes, and says so', async () => {
    const { 'tenant-a': pa, service: ps } = clusters.plane;
    const capped = await startRelsync(writeConfig(dir, {
      agentName: 'capped',
      platformClusters: [{ name: 'tenant-a', kubeconfig: pa.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: ps.kubeconfigPath },
      store: { path: join(dir, 'capped.db') },
      leaderElection: { enabled: false },
      resync: { schedule: '0 0 1 1 *', onStartup: false },
      limits: { relatedPerPrimary: 5, copyBytes: 4096, primariesPerCluster: 2 },
      resources: [{ group: 'demo.relsync.dev', resource: 'databases', selector: { matchLabels: { capped: 'yes' } }, naming: { namespace: 'capped-{{ namespace }}' }, related: [
        { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
        { id: 'extra', origin: 'platform', resource: 'configmaps', selector: { matchLabels: { app: '{{ name }}' } } },
      ] }],
    }, 'capped.yaml'), join(dir, 'capped.log'));
    try {
      await a.putConfigMap(NS, 'cap-big', { big: long('x', 10_000) });
      for (let i = 0; i < 8; i++) await a.putConfigMap(NS, `cap-${i}`, { i: String(i) }, { app: 'capdb' });
      await a.createDatabase(NS, 'capdb', { configMapName: 'cap-big' }, { capped: 'yes' });
      const events = await eventually('both limits said on the primary', async () => {
        const found = (await a.events(NS, 'capdb')).map((e) => e.message ?? '');
        return found.some((m) => /limits\.relatedPerPrimary/.test(m)) && found.some((m) => /cap-big is not copied: its content is \d+ bytes; relsync copies at most 4096 \(limits\.copyBytes\)/.test(m)) ? found : undefined;
      }, 30_000);
      assert.ok(events.some((m) => /rule extra finds more than 5 object\(s\); relsync copies at most 5 related objects per primary/.test(m)), events.join('\n'));
      // The reference counts first (rule order), then the selector's matches by name: cap-0 … cap-3.
      const copies = (await svc.core.listNamespacedConfigMap({ namespace: `capped-${NS}` })).items.map((c) => c.metadata?.name).filter((n) => n?.startsWith('cap-')).sort();
      assert.deepEqual(copies, ['cap-0', 'cap-1', 'cap-2', 'cap-3']);
      assert.ok(await svc.database(`capped-${NS}`, 'capdb'), 'the primary itself is copied');
      // A tenant's flood stops at its own limit: two primaries of this cluster, not a third.
      await a.createDatabase(NS, 'capdb-2', {}, { capped: 'yes' });
      await eventually('the second primary is copied', () => svc.database(`capped-${NS}`, 'capdb-2'), 30_000);
      await a.createDatabase(NS, 'capdb-3', {}, { capped: 'yes' });
      await eventually('the third says the limit', async () => (await a.events(NS, 'capdb-3')).some((e) => e.reason === 'PrimaryLimitReached' && /limits\.primariesPerCluster/.test(e.message ?? '')), 30_000);
      assert.equal(await svc.database(`capped-${NS}`, 'capdb-3'), undefined, 'the third is not copied');
      await a.deleteDatabase(NS, 'capdb-2');
      await eventually('the second one\'s copy goes', async () => (await svc.database(`capped-${NS}`, 'capdb-2')) === undefined, 30_000);
      // Its room is free once the store forgot it (the last step of its finalizing, after the copy went).
      await eventually('the store forgot the second one', async () => {
        const out = await runCli(['inspect', 'primary', 'databases.demo.relsync.dev', `${NS}/capdb-2`, '--store', join(dir, 'capped.db'), '-o', 'json']);
        return out.code === 0 && (JSON.parse(out.stdout) as unknown[]).length === 0;
      }, 30_000);
      await a.updateDatabase(NS, 'capdb-3', (db) => (db.spec = { touched: 'yes' }));
      await eventually('the third is copied once there is room, at its next change', () => svc.database(`capped-${NS}`, 'capdb-3'), 30_000);
    } finally {
      await capped.stop();
    }
  });

  it('syncs a primary whose reference path yields hundreds of names', async () => {
    const names = Array.from({ length: 300 }, (_, i) => `many-${i}`);
    for (let i = 0; i < names.length; i += 20) await Promise.all(names.slice(i, i + 20).map((n) => a.putConfigMap(NS, n, { n })));
    const startedAt = Date.now();
    await a.createDatabase(NS, 'many-owner', { configMapNames: [...names, 'many-missing'] });
    await eventually('all 300 copies exist', async () => {
      const list = await svc.core.listNamespacedConfigMap({ namespace: copyNs });
      return list.items.filter((c) => c.metadata?.name?.startsWith('many-')).length === 300;
    }, 60_000);
    console.log(`300 related objects of one primary copied in ${Date.now() - startedAt} ms`);
    await a.putConfigMap(NS, 'many-137', { n: 'changed' });
    await eventually('a change to one of them copied', async () => (await svc.configMap(copyNs, 'many-137'))?.data?.n === 'changed', 20_000);
    const db = new BetterSqlite3(storePath, { readonly: true });
    const rows = db.prepare("select state, count(*) as n from relations where primary_name = 'many-owner' and rule_id = 'many' group by state").all() as Array<{ state: string; n: number }>;
    db.close();
    assert.deepEqual(Object.fromEntries(rows.map((r) => [r.state, r.n])), { synced: 300, pending: 1 });
  });

  it('keeps syncing other primaries and never crashed', async () => {
    await a.putConfigMap(NS, 'plain-cfg', { v: '1' });
    await a.createDatabase(NS, 'plain', { configMapName: 'plain-cfg' });
    await eventually('an ordinary primary syncs after all of the above', () => svc.configMap(copyNs, 'plain-cfg'), 20_000);
    assert.equal(relsync.child.exitCode, null);
    assert.doesNotMatch(relsync.log(), /"level":"(error|fatal)"/, 'no error or fatal log line');
  });

  it('refuses a store file it cannot write, at start, with a clear error', async () => {
    await relsync.stop();
    const root = process.getuid?.() === 0;
    if (root) execFileSync('chattr', ['+i', storePath]);
    else chmodSync(storePath, 0o400);
    try {
      const out = await runCli(['run', '--config', configPath, '--no-http']);
      assert.equal(out.code, 1);
      assert.match(out.stdout + out.stderr, /cannot open the store; nothing was started/);
      assert.match(out.stdout + out.stderr, /relsync\.db: the file is read-only/);
    } finally {
      if (root) execFileSync('chattr', ['-i', storePath]);
      else chmodSync(storePath, 0o600);
    }
    relsync = await startRelsync(configPath, join(dir, 'relsync-2.log'));
  });
});
