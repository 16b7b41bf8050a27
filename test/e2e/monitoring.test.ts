// deploy/monitoring against what it reads: the PrometheusRule's groups pass
// `promtool check rules`; each alert fires on the series that should fire it
// and stays quiet on a healthy one (`promtool test rules`); and every metric
// name an alert or the Grafana dashboard reads exists on a real relsync's
// /metrics, scraped after it synced, swept and recorded an Event — so a
// renamed metric fails here, not on a provider's dashboard.
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, before, describe, it } from 'node:test';
import { loadYaml } from '@kubernetes/client-node';
import { startClusters, type Clusters } from '../harness/clusters.js';
import { eventually } from '../harness/kube.js';
import { promtoolPath } from '../harness/promtool.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { defaultCopyNamespace, type ClusterClient } from '../harness/tenant.js';

const monitoring = new URL('../../../deploy/monitoring/', import.meta.url);

interface Rule { alert: string; expr: string; for?: string; labels?: Record<string, string>; annotations?: Record<string, string> }
const rule = loadYaml<{ spec: { groups: Array<{ name: string; rules: Rule[] }> } }>(readFileSync(new URL('prometheusrule.yaml', monitoring), 'utf8'));
const dashboard = JSON.parse(readFileSync(new URL('grafana-dashboard.json', monitoring), 'utf8')) as {
  panels: Array<{ title: string; targets: Array<{ expr: string }> }>;
  templating: { list: Array<{ name: string; query?: unknown }> };
};
const alerts = rule.spec.groups.flatMap((g) => g.rules);

/** The metric names a PromQL expression reads: what is left once strings, matchers, groupings, ranges, functions and keywords are taken out. */
export function metricNames(expr: string): string[] {
  const bare = expr
    .replace(/"(?:[^"\\]|\\.)*"/g, '')
    .replace(/\{[^}]*\}/g, '')
    .replace(/\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)/g, '')
    .replace(/\[[^\]]*\]/g, '');
  const keywords = new Set(['and', 'or', 'unless', 'bool', 'offset']);
  return [...bare.matchAll(/([a-zA-Z_:][a-zA-Z0-9_:]*)(\s*\()?/g)].filter((m) => !m[2] && !keywords.has(m[1]!)).map((m) => m[1]!);
}

describe('monitoring: the alerts and the dashboard read what relsync exports', () => {
  let dir: string;
  let clusters: Clusters<'tenant-a' | 'service'>;
  let a: ClusterClient;
  let svc: ClusterClient;
  let relsync: RelsyncProcess;
  const promtool = (...args: string[]) => spawnSync(promtoolPath(), args, { encoding: 'utf8', cwd: dir });

  before(async () => {
    dir = mkdtempSync(join(tmpdir(), 'relsync-e2e-monitoring-'));
    writeFileSync(join(dir, 'rules.json'), JSON.stringify({ groups: rule.spec.groups }));
  });

  after(async () => {
    await relsync?.stop();
    await clusters?.stop();
  });

  it('the rules pass promtool check rules', () => {
    const out = promtool('check', 'rules', 'rules.json');
    assert.equal(out.status, 0, out.stdout + out.stderr);
    assert.match(out.stdout, new RegExp(`SUCCESS: ${alerts.length} rules found`));
  });

  it('each alert fires on what should fire it, and not on a healthy installation, another controller\'s series or after a failover (promtool test rules)', () => {
    const at = { job: 'relsync-metrics', namespace: 'relsync-system', pod: 'relsync-0' };
    const series = (name: string, labels: Record<string, string>, values: string) => ({ series: `${name}{${Object.entries({ ...at, ...labels }).map(([k, v]) => `${k}="${v}"`).join(',')}}`, values });
    /** The alert as it fires with exactly `labels` (besides its own): its annotations rendered as Prometheus renders these templates. */
    const fired = (name: string, labels: Record<string, string>, value = '') => {
      const r = alerts.find((x) => x.alert === name)!;
      const render = (t: string) => t.replace(/\{\{ \$labels\.(\w+) \}\}/g, (_m, k: string) => labels[k] ?? '').replace(/\{\{ \$value \}\}/g, value);
      return { exp_labels: { ...labels, ...r.labels }, exp_annotations: Object.fromEntries(Object.entries(r.annotations ?? {}).map(([k, v]) => [k, render(v)])) };
    };
    const quiet = (evalTime: string) => alerts.map((x) => ({ eval_time: evalTime, alertname: x.alert, exp_alerts: [] }));
    const where = { namespace: at.namespace, pod: at.pod };
    const controller = 'databases.demo.relsync.dev';
    const tests = {
      rule_files: ['rules.json'],
      evaluation_interval: '1m',
      tests: [
        {
          interval: '1m',
          input_series: [
            series('up', {}, '0x40'),
            series('relsync_primaries', { state: 'conflict' }, '0 0 3x40'),
            series('relsync_relations', { state: 'conflict' }, '0x40'),
            series('relsync_primaries', { state: 'error' }, '0x40'),
            series('relsync_relations', { state: 'error' }, '2x40'),
            // Last success at 0 s, a sweep due every 10 min, the term began at 0: missed from 20 min on.
            series('relsync_sweep_last_success_timestamp_seconds', {}, '0x60'),
            series('relsync_sweep_interval_seconds', {}, '600x60'),
            series('relsync_term_start_timestamp_seconds', {}, '0x60'),
            series('relsync_watch_synced', { watch: 'tenant-a/databases.demo.relsync.dev' }, '1 1 0x30'),
            series('leader_election_master_status', { name: 'relsync-relsync', pod: 'relsync-0' }, '0x30'),
            series('leader_election_master_status', { name: 'relsync-relsync', pod: 'relsync-1' }, '0x30'),
            series('controller_runtime_reconcile_total', { controller, result: 'success' }, '0+10x40'),
            series('controller_runtime_reconcile_errors_total', { controller }, '0+5x40'),
          ],
          alert_rule_test: [
            { eval_time: '10m', alertname: 'RelsyncConflicts', exp_alerts: [] },
            { eval_time: '20m', alertname: 'RelsyncConflicts', exp_alerts: [fired('RelsyncConflicts', where, '3')] },
            { eval_time: '20m', alertname: 'RelsyncErrors', exp_alerts: [fired('RelsyncErrors', where, '2')] },
            { eval_time: '25m', alertname: 'RelsyncSweepMissed', exp_alerts: [] },
            { eval_time: '35m', alertname: 'RelsyncSweepMissed', exp_alerts: [fired('RelsyncSweepMissed', at)] },
            { eval_time: '15m', alertname: 'RelsyncWatchNotSynced', exp_alerts: [fired('RelsyncWatchNotSynced', { ...at, watch: 'tenant-a/databases.demo.relsync.dev' })] },
            { eval_time: '10m', alertname: 'RelsyncNoLeader', exp_alerts: [fired('RelsyncNoLeader', { namespace: at.namespace, name: 'relsync-relsync' })] },
            { eval_time: '30m', alertname: 'RelsyncReconcileErrors', exp_alerts: [fired('RelsyncReconcileErrors', { namespace: at.namespace, controller })] },
            { eval_time: '10m', alertname: 'RelsyncDown', exp_alerts: [{ exp_labels: { namespace: at.namespace, severity: 'critical' }, exp_annotations: { ...alerts.find((x) => x.alert === 'RelsyncDown')!.annotations, description: `No replica of relsync in ${at.namespace} answered a scrape (job relsync-metrics) for 5 minutes: nothing may be synced, and the other alerts cannot say so.` } }] },
          ],
        },
        {
          // Healthy: nothing in conflict or error, sweeps on time, watches synced, one leader, no failed reconciles;
          // beside it, another controller's failing reconciles and lost lease (its own job), and a standby (no store
          // states, no sweeps scheduled).
          interval: '1m',
          input_series: [
            series('up', {}, '1x60'),
            series('up', { pod: 'relsync-1' }, '1x60'),
            series('relsync_primaries', { state: 'conflict' }, '0x60'),
            series('relsync_relations', { state: 'conflict' }, '0x60'),
            series('relsync_primaries', { state: 'error' }, '0x60'),
            series('relsync_relations', { state: 'error' }, '0x60'),
            series('relsync_sweep_last_success_timestamp_seconds', {}, '0+60x60'),
            series('relsync_sweep_interval_seconds', {}, '600x60'),
            series('relsync_term_start_timestamp_seconds', {}, '0x60'),
            series('relsync_watch_synced', { watch: 'tenant-a/databases.demo.relsync.dev' }, '1x60'),
            series('leader_election_master_status', { name: 'relsync-relsync', pod: 'relsync-0' }, '1x60'),
            series('leader_election_master_status', { name: 'relsync-relsync', pod: 'relsync-1' }, '0x60'),
            series('relsync_sweep_interval_seconds', { pod: 'relsync-1' }, '0x60'),
            series('relsync_sweep_last_success_timestamp_seconds', { pod: 'relsync-1' }, '0x60'),
            series('relsync_term_start_timestamp_seconds', { pod: 'relsync-1' }, '0x60'),
            series('controller_runtime_reconcile_total', { controller, result: 'success' }, '0+10x60'),
            series('controller_runtime_reconcile_errors_total', { controller }, '0x60'),
            series('controller_runtime_reconcile_total', { job: 'database-operator', controller: 'database', result: 'success' }, '0+10x60'),
            series('controller_runtime_reconcile_errors_total', { job: 'database-operator', controller: 'database' }, '0+9x60'),
            series('leader_election_master_status', { job: 'database-operator', name: 'database-operator' }, '0x60'),
          ],
          alert_rule_test: quiet('55m'),
        },
        {
          // A failover: relsync-0 led, with a conflict in its store, until 30 min; relsync-1 leads from then on, its
          // store has none, and its first sweep is late. The old leader's store states go with its term; the new
          // leader is not late for sweeps it could not run as a standby, until two intervals into its term.
          interval: '1m',
          input_series: [
            series('up', {}, '1x60'),
            series('up', { pod: 'relsync-1' }, '1x60'),
            series('relsync_primaries', { state: 'conflict' }, '3x29 _x30'),
            series('relsync_relations', { state: 'conflict' }, '0x29 _x30'),
            series('relsync_primaries', { state: 'conflict', pod: 'relsync-1' }, '_x30 0x30'),
            series('relsync_relations', { state: 'conflict', pod: 'relsync-1' }, '_x30 0x30'),
            series('leader_election_master_status', { name: 'relsync-relsync', pod: 'relsync-0' }, '1x29 0x30'),
            series('leader_election_master_status', { name: 'relsync-relsync', pod: 'relsync-1' }, '0x29 1x30'),
            series('relsync_sweep_last_success_timestamp_seconds', { pod: 'relsync-1' }, '0x70'),
            series('relsync_sweep_interval_seconds', { pod: 'relsync-1' }, '0x30 600x40'),
            series('relsync_term_start_timestamp_seconds', { pod: 'relsync-1' }, '0x30 1800x40'),
          ],
          alert_rule_test: [
            { eval_time: '20m', alertname: 'RelsyncConflicts', exp_alerts: [fired('RelsyncConflicts', where, '3')] },
            { eval_time: '45m', alertname: 'RelsyncConflicts', exp_alerts: [] },
            { eval_time: '45m', alertname: 'RelsyncSweepMissed', exp_alerts: [] },
            { eval_time: '65m', alertname: 'RelsyncSweepMissed', exp_alerts: [fired('RelsyncSweepMissed', { ...at, pod: 'relsync-1' })] },
          ],
        },
      ],
    };
    writeFileSync(join(dir, 'rules.test.json'), JSON.stringify(tests));
    const out = promtool('test', 'rules', 'rules.test.json');
    assert.equal(out.status, 0, out.stdout + out.stderr);
  });

  it('every metric an alert or a dashboard panel reads exists on a running relsync\'s /metrics', async () => {
    clusters = await startClusters('tenant-a', 'service');
    ({ 'tenant-a': a, service: svc } = clusters.client);
    relsync = await startRelsync(writeConfig(dir, {
      agentName: 'e2e',
      platformClusters: [{ name: 'tenant-a', kubeconfig: clusters.plane['tenant-a'].kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: clusters.plane.service.kubeconfigPath },
      store: { path: join(dir, 'relsync.db') },
      resync: { schedule: '*/10 * * * *', onStartup: true },
      resources: [{ group: 'demo.relsync.dev', version: 'v1alpha1', resource: 'databases' }],
    }), join(dir, 'relsync.log'));
    // What makes the series of counters and histograms exist: a sync, a conflict (a Warning Event), a sweep.
    await a.ensureNamespace('shop');
    await a.createDatabase('shop', 'orders', { size: 'small' });
    // The copy namespace is relsync's once the first copy is there; an object of someone else's in it is in the way.
    await svc.copyOf(defaultCopyNamespace('tenant-a', 'shop'), 'orders');
    await svc.createDatabase(defaultCopyNamespace('tenant-a', 'shop'), 'blocked', { theirs: true });
    await a.createDatabase('shop', 'blocked', { size: 'small' });
    const scrape = await eventually('a sync, a conflict\'s Event and a sweep on /metrics', async () => {
      const text = await (await fetch(`http://127.0.0.1:${relsync.httpPort}/metrics`)).text();
      return /relsync_events_total\{type="Warning",result="created"\} [1-9]/.test(text) && /relsync_sweeps_total\{[^}]*status="done"/.test(text) && /relsync_copies_written_total\{/.test(text) ? text : undefined;
    }, 60_000);
    const exported = new Set(scrape.split('\n').filter((l) => l && !l.startsWith('#')).map((l) => l.split(/[{ ]/)[0]!));

    const read = [
      ...alerts.map((x) => ({ where: `alert ${x.alert}`, expr: x.expr })),
      ...dashboard.panels.flatMap((p) => p.targets.map((t) => ({ where: `panel "${p.title}"`, expr: t.expr }))),
      ...dashboard.templating.list.flatMap((v) => {
        const query = (v.query as { query?: string } | undefined)?.query;
        const metric = query && /^label_values\(([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(query)?.[1];
        return metric ? [{ where: `variable $${v.name}`, expr: metric }] : [];
      }),
    ];
    const names = read.flatMap((r) => metricNames(r.expr).map((name) => ({ ...r, name })));
    assert.ok(names.length >= alerts.length + dashboard.panels.length, `${names.length} names read`);
    // `up` is Prometheus's own series of each target, not relsync's.
    const missing = names.filter((n) => !exported.has(n.name) && n.name !== 'up').map((n) => `${n.where}: ${n.name}`);
    assert.deepEqual(missing, [], `series read but not exported:\n${missing.join('\n')}`);
    // Without --metrics-auth, /explain (tenants' names and messages) is not served at all.
    const explain = await fetch(`http://127.0.0.1:${relsync.httpPort}/explain?type=databases.demo.relsync.dev&object=shop/orders`);
    assert.equal(explain.status, 404);
    assert.match(await explain.text(), /needs --metrics-auth kubernetes/);
    // The extraction itself can fail a wrong name: a name relsync does not export is caught.
    assert.deepEqual(metricNames('sum by (le) (rate(relsync_no_such_metric_bucket{namespace=~"$namespace"}[5m])) or vector(0)').filter((n) => !exported.has(n)), ['relsync_no_such_metric_bucket']);
  });
});
