// The steps of the Dockerfile, outside Docker (no engine runs here): `npm ci`
// (its native addon's compile reused, see below),
// `tsc -p tsconfig.build.json`, `npm prune --omit=dev`, then only what the
// image copies (package.json, node_modules, dist/src, migrations) starts,
// serves its health endpoints against a real API server, and stops on SIGTERM.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { cpSync, createWriteStream, existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { after, before, describe, it } from 'node:test';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { eventually, installCrd } from '../harness/kube.js';
import { writeConfig } from '../harness/relsync-process.js';

const repo = fileURLToPath(new URL('../../../', import.meta.url));

describe('production install', () => {
  let app: string;
  let plane: ControlPlane;

  before(async () => {
    // The build stage: sources only, as the Dockerfile copies them.
    const build = mkdtempSync(join(tmpdir(), 'relsync-build-'));
    for (const f of ['package.json', 'package-lock.json', 'tsconfig.json', 'tsconfig.build.json']) cpSync(join(repo, f), join(build, f));
    cpSync(join(repo, 'src'), join(build, 'src'), { recursive: true });
    const step = (command: string, args: string[]) => {
      const run = spawnSync(command, args, { cwd: build, encoding: 'utf8', timeout: 600_000 });
      assert.equal(run.status, 0, `${command} ${args.join(' ')} failed:\n${run.stdout}\n${run.stderr}`);
    };
    // Install scripts skipped: the only one the image needs compiles better-sqlite3 from source (no
    // prebuilt binary downloads here), about a minute on two cores, and this repo's own `npm ci`
    // has just compiled the same version for the same Node. Its binary is taken over; any other
    // version is compiled as the image would.
    // A dependency that gains an install script would be skipped here but run in the image: refuse.
    const lock = JSON.parse(readFileSync(join(build, 'package-lock.json'), 'utf8')) as { packages: Record<string, { hasInstallScript?: boolean; dev?: boolean }> };
    const scripted = Object.entries(lock.packages).filter(([, p]) => p.hasInstallScript && !p.dev).map(([path]) => path);
    assert.deepEqual(scripted, ['node_modules/better-sqlite3'], 'production dependencies with install scripts: this test reuses only better-sqlite3\'s');
    step('npm', ['ci', '--ignore-scripts', '--no-audit', '--no-fund']);
    const addon = (root: string) => join(root, 'node_modules', 'better-sqlite3');
    const version = (root: string) => (JSON.parse(readFileSync(join(addon(root), 'package.json'), 'utf8')) as { version: string }).version;
    if (existsSync(join(addon(repo), 'build', 'Release', 'better_sqlite3.node')) && version(repo) === version(build)) {
      cpSync(join(addon(repo), 'build'), join(addon(build), 'build'), { recursive: true });
    }
    // Taken over or not, it must load under this Node (same ABI); otherwise it is compiled as the image would.
    const loads = spawnSync(process.execPath, ['-e', "new (require('better-sqlite3'))(':memory:').close()"], { cwd: build, encoding: 'utf8' });
    if (loads.status !== 0) step('npm', ['rebuild', 'better-sqlite3']);
    step('npx', ['tsc', '-p', 'tsconfig.build.json']);
    // The SBOM the image carries (the Dockerfile's step, before the prune): the production dependencies, no development one.
    const sbom = spawnSync('npm', ['sbom', '--omit=dev', '--sbom-format=cyclonedx', '--sbom-type=application'], { cwd: build, encoding: 'utf8', timeout: 120_000 });
    assert.equal(sbom.status, 0, sbom.stderr);
    const components = (JSON.parse(sbom.stdout) as { components: Array<{ name: string; version: string }> }).components.map((c) => c.name);
    for (const name of ['better-sqlite3', 'kysely', '@kubernetes/client-node', 'node-cron', 'pino']) assert.ok(components.includes(name), `the SBOM lists ${name}`);
    assert.ok(!components.includes('typescript'), 'and no development dependency');
    step('npm', ['prune', '--omit=dev', '--no-audit', '--no-fund']);
    // The image: what the final stage copies, nothing else.
    app = mkdtempSync(join(tmpdir(), 'relsync-prod-'));
    cpSync(join(build, 'package.json'), join(app, 'package.json'));
    cpSync(join(build, 'node_modules'), join(app, 'node_modules'), { recursive: true });
    cpSync(join(build, 'dist', 'src'), join(app, 'dist', 'src'), { recursive: true });
    cpSync(join(repo, 'migrations'), join(app, 'migrations'), { recursive: true });
    rmSync(build, { recursive: true, force: true });
    plane = await startControlPlane('prod');
    await installCrd(plane.kubeConfig);
  });

  after(async () => {
    await plane?.stop();
  });

  it('has no development dependencies and prints --help', () => {
    assert.throws(() => readFileSync(join(app, 'node_modules', 'typescript', 'package.json')), 'typescript is not installed');
    assert.equal(existsSync(join(app, 'dist', 'src', 'cli', 'main.js.map')), false, 'built without source maps, as tsconfig.build.json says');
    const help = spawnSync(process.execPath, [join(app, 'dist/src/cli/main.js'), '--help'], { encoding: 'utf8' });
    assert.equal(help.status, 0);
    assert.match(help.stdout, /run \[options\]/);
  });

  it('starts, serves /healthz, /readyz and /metrics, and stops on SIGTERM', async () => {
    const config = writeConfig(app, {
      agentName: 'prod',
      platformClusters: [{ name: 'tenant-a', kubeconfig: plane.kubeconfigPath }],
      serviceCluster: { name: 'service', kubeconfig: plane.kubeconfigPath },
      store: { path: join(app, 'data', 'relsync.db') },
      resources: [{ group: 'demo.relsync.dev', resource: 'databases', related: [{ id: 'cfg', origin: 'platform', resource: 'configmaps', reference: { path: '.spec.configMapName' } }] }],
    });
    const logFile = join(app, 'relsync.log');
    const child = spawn(process.execPath, [join(app, 'dist/src/cli/main.js'), 'run', '--config', config, '--http-port', '0'], { cwd: app, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NODE_ENV: 'production' } });
    const log = createWriteStream(logFile);
    child.stdout.pipe(log);
    child.stderr.pipe(log);
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      const port = await eventually('HTTP port in the log', async () => {
        const line = readFileSync(logFile, 'utf8').split('\n').find((l) => l.includes('serving /healthz'));
        return line ? (JSON.parse(line) as { port: number }).port : undefined;
      }, 20_000);
      assert.equal((await fetch(`http://127.0.0.1:${port}/healthz`)).status, 200);
      // 200 also while it campaigns ("ok: standby"); wait until it leads and its watches are in sync.
      await eventually('/readyz says ok: leader', async () => {
        const res = await fetch(`http://127.0.0.1:${port}/readyz`);
        return res.status === 200 && /^ok: leader/.test(await res.text());
      }, 20_000);
      const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
      assert.match(metrics, /relsync_watch_events_total/);
      assert.match(metrics, /relsync_store_rows\{table="primaries"\} 0/);
      for (const name of ['relsync_routed_primaries', 'relsync_reconciles_total', 'relsync_reconcile_duration_seconds', 'relsync_queue_depth', 'relsync_queue_retrying', 'relsync_copies_written_total', 'relsync_copies_removed_total', 'relsync_conflicts_total', 'relsync_watch_reconnects_total', 'relsync_watch_relists_total', 'relsync_sweeps_total', 'relsync_sweep_duration_seconds', 'relsync_api_requests_total']) {
        assert.match(metrics, new RegExp(`# TYPE ${name} `), name);
      }
      assert.match(metrics, /relsync_store_bytes [1-9]\d*/);
      assert.match(await (await fetch(`http://127.0.0.1:${port}/readyz`)).text(), /^ok: leader/);
    } finally {
      child.kill('SIGTERM');
    }
    assert.equal(await exited, 0, `relsync did not exit cleanly:\n${readFileSync(logFile, 'utf8').slice(-2000)}`);
    assert.match(readFileSync(logFile, 'utf8'), /relsync stopped/);
  });
});
