/**
 * `npm run demo`: a first run for a newcomer. Starts two local control planes
 * (a platform cluster and a service cluster) with the test harness, installs
 * the example CRD, runs relsync with an example config, creates a primary and
 * its related objects, changes one, shows the change arriving and the store's
 * view of it — then keeps running so you can try your own changes, and cleans
 * up on Ctrl-C.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import BetterSqlite3 from 'better-sqlite3';
import { kubectlPath, startControlPlanes, type ControlPlane } from '../harness/control-plane.js';
import { eventually, installCrd } from '../harness/kube.js';
import { startRelsync, writeConfig, type RelsyncProcess } from '../harness/relsync-process.js';
import { ClusterClient, decode, defaultCopyNamespace } from '../harness/tenant.js';

const step = (text: string) => console.log(`\n\u001b[1m▶ ${text}\u001b[0m`);
const show = (text: string) => console.log(`  ${text}`);

async function main(): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'relsync-demo-'));
  let planes: ControlPlane[] = [];
  // Filled in as things start; cleanup stops whatever is there.
  const running: { relsync?: RelsyncProcess; tail?: ReturnType<typeof spawn> } = {};
  let cleaning = false;
  const cleanup = async () => {
    if (cleaning) return;
    cleaning = true;
    step('cleaning up');
    running.tail?.kill();
    await running.relsync?.stop();
    await Promise.all(planes.map((p) => p.stop()));
    rmSync(dir, { recursive: true, force: true });
    show('stopped relsync and both control planes; removed ' + dir);
    process.exit(0);
  };
  // Replace the harness's own last-resort handlers: clean up in order, and say so.
  process.removeAllListeners('SIGINT');
  process.removeAllListeners('SIGTERM');
  process.on('SIGINT', () => void cleanup());
  process.on('SIGTERM', () => void cleanup());

  step('starting two control planes (etcd + kube-apiserver each): "platform" and "service"');
  planes = await startControlPlanes('platform', 'service');
  const [platform, service] = planes as [ControlPlane, ControlPlane];
  await Promise.all(planes.map((p) => installCrd(p.kubeConfig)));
  show(`platform: ${platform.url}   kubeconfig ${platform.kubeconfigPath}`);
  show(`service:  ${service.url}   kubeconfig ${service.kubeconfigPath}`);
  const p = new ClusterClient('platform', platform.kubeConfig);
  const s = new ClusterClient('service', service.kubeConfig);

  step('starting relsync');
  const storePath = join(dir, 'relsync.db');
  const configPath = writeConfig(dir, {
    agentName: 'demo',
    platformClusters: [{ name: 'platform', kubeconfig: platform.kubeconfigPath }],
    serviceCluster: { name: 'service', kubeconfig: service.kubeconfigPath },
    store: { path: storePath },
    resources: [
      {
        group: 'demo.relsync.dev',
        resource: 'databases',
        related: [
          { id: 'config', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } },
          { id: 'credentials', origin: 'service', resource: 'secrets', template: { name: '{{ name }}-credentials' } },
        ],
      },
    ],
  });
  const relsync = await startRelsync(configPath, join(dir, 'relsync.log'), ['--log-level', 'info']);
  running.relsync = relsync;
  show(`config ${configPath}`);
  show(`health and metrics on http://127.0.0.1:${relsync.httpPort}/metrics`);

  step('on the platform: a ConfigMap and a Database that references it');
  await p.ensureNamespace('shop');
  await p.putConfigMap('shop', 'orders-config', { mode: 'fast' });
  await p.createDatabase('shop', 'orders', { size: 'small', configMapName: 'orders-config' });
  const ns = defaultCopyNamespace('platform', 'shop');
  await eventually('copies in the service cluster', async () => (await s.database(ns, 'orders')) && (await s.configMap(ns, 'orders-config')));
  show(`service cluster now has Database ${ns}/orders and ConfigMap ${ns}/orders-config (data ${JSON.stringify((await s.configMap(ns, 'orders-config'))?.data)})`);

  step('changing only the related ConfigMap on the platform (the Database is untouched)');
  const before = Date.now();
  await p.putConfigMap('shop', 'orders-config', { mode: 'safe' });
  await eventually('change arrives', async () => (await s.configMap(ns, 'orders-config'))?.data?.mode === 'safe');
  show(`arrived in the service cluster after ${Date.now() - before} ms: data ${JSON.stringify((await s.configMap(ns, 'orders-config'))?.data)}`);

  step('the operator creates credentials next to the copy; they come back to the user');
  await s.putSecret(ns, 'orders-credentials', { password: 'demo-password' }, undefined, await s.copyOf(ns, 'orders'));
  const creds = await eventually('credentials on the platform', () => p.secret('shop', 'orders-credentials'));
  show(`platform has Secret shop/orders-credentials (password ${decode(creds, 'password') ? 'present' : 'missing'})`);

  step("the store's view (sqlite3 " + storePath + " 'select * from relations_view')");
  const db = new BetterSqlite3(storePath, { readonly: true });
  for (const row of db.prepare('select primary_object, rule, origin, related_object, destination, state from relations_view').all()) show(JSON.stringify(row));
  db.close();

  step('your turn — relsync keeps running. Try, in another shell:');
  show(`alias kubectl=${kubectlPath()}`);
  show(`export KUBECONFIG=${platform.kubeconfigPath}`);
  show('kubectl -n shop edit configmap orders-config        # then look at the service cluster:');
  show(`KUBECONFIG=${service.kubeconfigPath} kubectl -n ${ns} get configmap orders-config -o yaml`);
  show(`node dist/src/cli/main.js inspect primary databases.demo.relsync.dev shop/orders --store ${storePath}`);
  show(`relsync's log: ${join(dir, 'relsync.log')}`);
  show('press Ctrl-C to stop everything and clean up');
  const tail = spawn('tail', ['-n', '0', '-f', join(dir, 'relsync.log')], { stdio: ['ignore', 'pipe', 'ignore'] });
  running.tail = tail;
  tail.stdout!.on('data', (d: Buffer) => {
    for (const line of d.toString().split('\n').filter(Boolean)) {
      try {
        const entry = JSON.parse(line) as { msg: string; [k: string]: unknown };
        if (entry.msg !== 'routed event') show(`relsync: ${entry.msg}`);
      } catch {
        show(`relsync: ${line}`);
      }
    }
  });
}

main().catch((err: unknown) => {
  console.error(`demo failed: ${(err as Error).message}`);
  process.exit(1);
});
