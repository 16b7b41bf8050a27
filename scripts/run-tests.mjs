// Runs the compiled tests with node's own test runner.
//
//   node scripts/run-tests.mjs          # unit and end-to-end tests
//   node scripts/run-tests.mjs unit     # only test/unit
//   node scripts/run-tests.mjs e2e      # only test/e2e
//
// Before end-to-end tests it makes sure kube-apiserver and etcd exist: taken
// (and kubectl) from KUBEBUILDER_ASSETS when that folder holds them, otherwise built (once,
// cached by version) by scripts/build-control-plane.sh. A missing binary is a
// failure, never a skip. Afterwards it kills any control-plane process a
// crashed test file left behind, and says so. kcp is built the same way
// (scripts/build-kcp.sh).
import { spawnSync, spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';

const suites = process.argv[2] ? [process.argv[2]] : ['unit', 'e2e'];

function testFiles(dir) {
  if (!existsSync(dir)) return [];
  const out = [];
  for (const entry of readdirSync(dir)) {
    const path = join(dir, entry);
    if (statSync(path).isDirectory()) out.push(...testFiles(path));
    else if (entry.endsWith('.test.js')) out.push(path);
  }
  return out.sort();
}

const env = { ...process.env };
if (suites.includes('e2e')) {
  const assets = env.KUBEBUILDER_ASSETS;
  if (assets && existsSync(join(assets, 'kube-apiserver')) && existsSync(join(assets, 'etcd'))) {
    console.log(`run-tests: using control-plane binaries from KUBEBUILDER_ASSETS=${assets}`);
    if (!existsSync(join(assets, 'kubectl'))) {
      const build = spawnSync('bash', ['scripts/build-control-plane.sh'], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', env: { ...env, RELSYNC_ONLY: 'kubectl' } });
      if (build.status !== 0) {
        console.error('run-tests: KUBEBUILDER_ASSETS has no kubectl and it could not be built');
        process.exit(1);
      }
      env.RELSYNC_KUBECTL = join(build.stdout.trim().split('\n').pop(), 'kubectl');
    }
  } else {
    const build = spawnSync('bash', ['scripts/build-control-plane.sh'], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8' });
    if (build.status !== 0) {
      console.error('run-tests: could not build kube-apiserver and etcd (see the output above); end-to-end tests cannot run');
      process.exit(1);
    }
    env.RELSYNC_CONTROL_PLANE_ASSETS = build.stdout.trim().split('\n').pop();
    console.log(`run-tests: using control-plane binaries from ${env.RELSYNC_CONTROL_PLANE_ASSETS}`);
  }
}

// Other binaries the end-to-end tests run, each built once from its Go module and cached by
// version by its script (the last line it prints is the folder); a failed build fails the run,
// as above: kcp (kcp as a platform), helm (deploy/helm/relsync), promtool (deploy/monitoring).
const tools = [
  { script: 'scripts/build-kcp.sh', env: 'RELSYNC_KCP_ASSETS', name: 'kcp', tests: 'the kcp end-to-end tests' },
  { script: 'scripts/build-helm.sh', env: 'RELSYNC_HELM_ASSETS', name: 'helm', tests: 'the Helm chart test' },
  { script: 'scripts/build-promtool.sh', env: 'RELSYNC_PROMTOOL_ASSETS', name: 'promtool', tests: 'the monitoring test' },
];
if (suites.includes('e2e')) {
  for (const tool of tools) {
    const build = spawnSync('bash', [tool.script], { stdio: ['ignore', 'pipe', 'inherit'], encoding: 'utf8', env });
    if (build.status !== 0) {
      console.error(`run-tests: could not build ${tool.name} (see the output above); ${tool.tests} cannot run`);
      process.exit(1);
    }
    env[tool.env] = build.stdout.trim().split('\n').pop();
    console.log(`run-tests: using ${tool.name} from ${env[tool.env]}`);
  }
}

// Files run two at a time (below), the longest first, so that none is left running alone at the
// end: these took 30 s or more each on this 2-core machine; the rest follow in name order.
// sharding and kcp-shards go before tenant-budget (10 min alone, 18 min here, the heaviest): a
// replica restarted beside it took longer than its Leases last, so its shards were taken meanwhile
// and the case that expects them resumed failed.
const slowFirst = ['sharding', 'kcp-shards', 'tenant-budget', 'tenant-memory', 'api-faults', 'kcp-sync', 'kcp-unbind-evidence', 'sweep-follow-ups', 'write-faults', 'ownership-gc', 'restart-and-sweeps', 'copy-namespaces', 'watch-liveness'];
const rank = (file) => {
  const i = slowFirst.findIndex((name) => file.endsWith(`${name}.test.js`));
  return i < 0 ? slowFirst.length : i;
};
const files = suites.flatMap((s) => testFiles(join('dist', 'test', s))).sort((x, y) => rank(x) - rank(y));
if (files.length === 0) {
  console.error(`run-tests: no compiled test files under dist/test/{${suites.join(',')}}; run 'npm run build' first`);
  process.exit(1);
}

const pidDir = mkdtempSync(join(tmpdir(), 'relsync-pids-'));
env.RELSYNC_PID_DIR = pidDir;
// A failed test file leaves relsync's last log lines here (test/harness/relsync-process.ts); they
// are printed again at the very end, where a CI page that shows only the tail still has them.
const failureDir = mkdtempSync(join(tmpdir(), 'relsync-failures-'));
env.RELSYNC_FAILURE_DIR = failureDir;

/**
 * The newest failed file's relsync logs again, the last FAILURE_TAIL lines of each (a CI page shows
 * about 140 lines; which relsync a failed test used is not known here, so each of the file's last
 * three gets its share); every failed file printed its whole report with its results above.
 */
const FAILURE_TAIL = 15;
function printFailureReports() {
  const reports = readdirSync(failureDir)
    .map((f) => join(failureDir, f))
    .sort((x, y) => statSync(x).mtimeMs - statSync(y).mtimeMs);
  const newest = reports.at(-1);
  if (newest) {
    const [title, ...lines] = readFileSync(newest, 'utf8').trimEnd().split('\n');
    console.log(`run-tests: ${reports.length} failed file(s) printed relsync's last log lines with their results; the newest again, the last ${FAILURE_TAIL} lines of each log:`);
    console.log(title);
    // The report is a header line per log ("# relsync's last N lines … of <file>:"), then its lines.
    let section = [];
    const flush = () => section.length > 0 && console.log([section[0], ...section.slice(1).slice(-FAILURE_TAIL)].join('\n'));
    for (const line of lines) {
      if (line.startsWith("# relsync's last ")) {
        flush();
        section = [];
      }
      section.push(line);
    }
    flush();
  }
  rmSync(failureDir, { recursive: true, force: true });
}

function reap() {
  let reaped = 0;
  const files = existsSync(pidDir) ? readdirSync(pidDir) : [];
  for (const f of files.filter((x) => x.endsWith('.pid'))) {
    const pid = Number(readFileSync(join(pidDir, f), 'utf8'));
    try {
      process.kill(pid, 'SIGKILL');
      reaped++;
    } catch {
      // already gone
    }
  }
  const started = files.includes('started.log') ? readFileSync(join(pidDir, 'started.log'), 'utf8').trim().split('\n').filter(Boolean) : [];
  rmSync(pidDir, { recursive: true, force: true });
  if (reaped > 0) console.error(`run-tests: killed ${reaped} control-plane process(es) left behind by a test file`);
  return started.map((line) => ({ pid: Number(line.split(' ')[0]), name: line.split(' ')[1] }));
}

/** The processes of `started` that still run (a SIGKILLed one may take a moment to go); their command lines are checked, since pids are reused. */
function stillRunning(started) {
  return started.filter(({ pid }) => {
    try {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      return /kube-apiserver|etcd|kcp/.test(cmdline); // empty for a zombie
    } catch {
      return false;
    }
  });
}

// Two test files at a time unless RELSYNC_TEST_CONCURRENCY says otherwise: each boots its own
// control planes, which mostly wait on each other, so two share two cores well (the whole suite:
// 11–14 minutes one at a time, about 6 two at a time); more starve the API servers of CPU and
// tests that measure time get slow. test-files.mjs keeps the order given (`node --test` sorts).
const child = spawn(process.execPath, ['scripts/test-files.mjs', ...files], { stdio: 'inherit', env });
for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
child.on('exit', async (code, signal) => {
  printFailureReports();
  const started = reap();
  let left = stillRunning(started);
  for (let i = 0; i < 50 && left.length > 0; i++) {
    await sleep(100);
    left = stillRunning(left);
  }
  if (left.length > 0) {
    console.error(`run-tests: ${left.length} control-plane process(es) still running after the tests: ${left.map((p) => `${p.name} (pid ${p.pid})`).join(', ')}`);
    process.exit(1);
  }
  if (started.length > 0) console.log(`run-tests: ${started.length} control-plane processes were started; none is left running`);
  process.exit(code ?? (signal ? 1 : 0));
});
