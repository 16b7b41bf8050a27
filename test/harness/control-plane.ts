/**
 * Real Kubernetes control planes for end-to-end tests: one etcd and one
 * kube-apiserver per named cluster, on free loopback ports, each with its own
 * data and certificate folders. Nothing is faked.
 *
 * Binaries come from `KUBEBUILDER_ASSETS` when it names a folder holding both
 * `kube-apiserver` and `etcd`, otherwise from the version cache that
 * `scripts/build-control-plane.sh` fills (scripts/run-tests.mjs runs it before
 * the tests and passes the folder as RELSYNC_CONTROL_PLANE_ASSETS).
 *
 * Every process started here is killed when the test process exits, however
 * it exits; its pid is also written to RELSYNC_PID_DIR so that the test
 * runner's parent can reap anything a crashed test process left behind.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { generateKeyPairSync } from 'node:crypto';
import { appendFileSync, createWriteStream, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { homedir, tmpdir } from 'node:os';
import { join } from 'node:path';
import https from 'node:https';
import { KubeConfig } from '@kubernetes/client-node';

export const KUBE_VERSION = 'v1.36.3';

export interface ControlPlane {
  readonly name: string;
  readonly url: string;
  readonly kubeconfigPath: string;
  readonly kubeConfig: KubeConfig;
  /** Admin bearer token (system:masters). */
  readonly token: string;
  readonly dir: string;
  /** etcd's client URL, e.g. for compaction through its HTTP gateway. */
  readonly etcdUrl: string;
  /** The API server's audit log (one JSON event per line, level Metadata), when started with `audit`. */
  readonly auditLogPath?: string;
  /** Stops the API server and etcd and removes the data folder. */
  stop(): Promise<void>;
  /** Sends a signal to the kube-apiserver process (e.g. SIGSTOP/SIGCONT). */
  signalApiServer(signal: NodeJS.Signals): void;
  /** Restarts kube-apiserver (etcd keeps its data). */
  restartApiServer(): Promise<void>;
  /** Stops kube-apiserver: its port refuses connections until startApiServer(). */
  stopApiServer(): Promise<void>;
  startApiServer(): Promise<void>;
}

const live = new Set<ChildProcess>();

function killAll(): void {
  for (const child of live) {
    try {
      child.kill('SIGKILL');
    } catch {
      // already gone
    }
  }
  live.clear();
}
process.once('exit', killAll);
for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
  process.once(signal, () => {
    killAll();
    process.exit(130);
  });
}

/** The folder holding kube-apiserver and etcd; throws with the reason when none. */
export function controlPlaneAssets(): string {
  const candidates = [
    process.env.KUBEBUILDER_ASSETS,
    process.env.RELSYNC_CONTROL_PLANE_ASSETS,
    join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'relsync', 'control-plane', KUBE_VERSION),
  ];
  for (const dir of candidates) {
    if (dir && existsSync(join(dir, 'kube-apiserver')) && existsSync(join(dir, 'etcd'))) return dir;
  }
  throw new Error(
    `no kube-apiserver and etcd binaries found (looked in KUBEBUILDER_ASSETS=${process.env.KUBEBUILDER_ASSETS ?? '<unset>'} ` +
      `and the cache for ${KUBE_VERSION}); build them with 'npm run control-plane' (scripts/build-control-plane.sh)`,
  );
}

/** kubectl, built beside the control plane (or from KUBEBUILDER_ASSETS). */
export function kubectlPath(): string {
  if (process.env.RELSYNC_KUBECTL && existsSync(process.env.RELSYNC_KUBECTL)) return process.env.RELSYNC_KUBECTL;
  const path = join(controlPlaneAssets(), 'kubectl');
  if (!existsSync(path)) throw new Error(`no kubectl in ${controlPlaneAssets()}; build it with 'npm run control-plane'`);
  return path;
}

/** Ports this process handed out: never twice, even once they are free again. */
const handedOut = new Set<number>();

/**
 * A free loopback port for a server a test starts. Taken below Linux's
 * ephemeral range (32768–60999): a port the OS picks with listen(0) is free
 * only until the server binds it, and meanwhile any outgoing connection on
 * the machine may take it as its local port ("address already in use").
 * Ports below the range are never handed to outgoing connections.
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 200; attempt++) {
    const port = 20_000 + Math.floor(Math.random() * 12_000);
    if (handedOut.has(port) || !(await canListen(port))) continue;
    handedOut.add(port);
    return port;
  }
  throw new Error('could not find a free port between 20000 and 32000');
}

function canListen(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = createServer();
    server.unref();
    server.once('error', () => resolve(false));
    server.listen(port, '127.0.0.1', () => server.close(() => resolve(true)));
  });
}

function track(child: ChildProcess, name: string): void {
  live.add(child);
  const pidDir = process.env.RELSYNC_PID_DIR;
  if (pidDir && child.pid) {
    writeFileSync(join(pidDir, `${name}-${child.pid}.pid`), String(child.pid));
    // Every process ever started, so that run-tests can check at the end that none is left.
    appendFileSync(join(pidDir, 'started.log'), `${child.pid} ${name}\n`);
  }
  child.once('exit', () => {
    live.delete(child);
    if (pidDir && child.pid) rmSync(join(pidDir, `${name}-${child.pid}.pid`), { force: true });
  });
}

/** Starts a process whose output goes to `logFile`; killed when the test process exits. */
export function startTracked(binary: string, args: string[], logFile: string, name: string): ChildProcess {
  const log = createWriteStream(logFile, { flags: 'a' });
  const child = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  child.stdout?.pipe(log);
  child.stderr?.pipe(log);
  track(child, name);
  return child;
}

export async function stopProcess(child: ChildProcess, graceMs = 5000): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGCONT');
  child.kill('SIGTERM');
  const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
  await exited;
  clearTimeout(timer);
}

async function probe(url: string, token: string | undefined, ca: Buffer | undefined): Promise<number> {
  return new Promise((resolve) => {
    const req = https.get(
      url,
      { headers: token ? { Authorization: `Bearer ${token}` } : {}, ca, rejectUnauthorized: ca !== undefined, timeout: 2000 },
      (res) => {
        res.resume();
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('timeout', () => req.destroy());
    req.on('error', () => resolve(0));
  });
}

async function waitFor(what: string, check: () => Promise<boolean>, timeoutMs: number, logFile: string): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    if (await check()) return;
    await new Promise((r) => setTimeout(r, 200));
  }
  const tail = existsSync(logFile) ? readFileSync(logFile, 'utf8').split('\n').slice(-30).join('\n') : '';
  throw new Error(`${what} did not become ready within ${timeoutMs} ms; last log lines of ${logFile}:\n${tail}`);
}

/** Ready, or an error with the log's tail at once if the process already exited (a port it could not bind). */
async function exitedOrOk(child: ChildProcess, logFile: string, url: string): Promise<boolean> {
  const exited = () => {
    if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode}; last log lines of ${logFile}:\n${readFileSync(logFile, 'utf8').split('\n').slice(-30).join('\n')}`);
  };
  exited();
  if (!(await httpOk(url))) return false;
  // Another test's server on the same port answers too, while ours fails to bind it and exits: it must still run.
  await new Promise((r) => setTimeout(r, 500));
  exited();
  return true;
}

async function httpOk(url: string): Promise<boolean> {
  try {
    const res = await fetch(url, { signal: AbortSignal.timeout(2000) });
    return res.ok;
  } catch {
    return false;
  }
}

export interface ControlPlaneOptions {
  /** Write an audit log of every request (who, verb, resource, answer): to check RBAC against real calls. */
  readonly audit?: boolean;
  /**
   * etcd's `--max-request-bytes` (default 1.5 MiB, etcd's): raised, as k3s's kine and some
   * installations do, the API server stores objects that big (up to ~2 MiB, its etcd client's
   * limit on what it sends).
   */
  readonly etcdMaxRequestBytes?: number;
}

/**
 * Runs `start` again, with new ports, when a server it started could not bind
 * one. Test files run in parallel processes, each with its own record of the
 * ports it handed out, so two of them can pick the same free port in the same
 * instant (seen in CI: etcd's "bind: address already in use"). Any other
 * failure is the test's to report.
 */
export async function retryOnPortClash<T>(what: string, start: () => Promise<T>, attempts = 3): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await start();
    } catch (err) {
      const clash = err instanceof Error && /address already in use/.test(err.message);
      if (!clash || attempt >= attempts) throw err;
      process.stderr.write(`${what}: a port was taken by another process; starting again on new ports (attempt ${attempt + 1} of ${attempts})\n`);
    }
  }
}

/** Starts one control plane and waits until its /readyz answers 200. */
export function startControlPlane(name: string, options: ControlPlaneOptions = {}): Promise<ControlPlane> {
  return retryOnPortClash(`control plane ${name}`, () => startControlPlaneOnce(name, options));
}

async function startControlPlaneOnce(name: string, options: ControlPlaneOptions): Promise<ControlPlane> {
  const assets = controlPlaneAssets();
  const dir = mkdtempSync(join(tmpdir(), `relsync-cp-${name}-`));
  const token = `admin-${name}-${Math.random().toString(36).slice(2)}`;
  const [etcdClientPort, etcdPeerPort, apiPort] = [await freePort(), await freePort(), await freePort()];

  const etcdLog = join(dir, 'etcd.log');
  const etcd = startTracked(
    join(assets, 'etcd'),
    [
      '--name=default',
      `--data-dir=${join(dir, 'etcd')}`,
      `--listen-client-urls=http://127.0.0.1:${etcdClientPort}`,
      `--advertise-client-urls=http://127.0.0.1:${etcdClientPort}`,
      `--listen-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
      `--initial-advertise-peer-urls=http://127.0.0.1:${etcdPeerPort}`,
      `--initial-cluster=default=http://127.0.0.1:${etcdPeerPort}`,
      '--unsafe-no-fsync',
      '--log-level=warn',
      ...(options.etcdMaxRequestBytes !== undefined ? [`--max-request-bytes=${options.etcdMaxRequestBytes}`] : []),
    ],
    etcdLog,
    `etcd-${name}`,
  );
  await waitFor(`etcd of ${name}`, () => exitedOrOk(etcd, etcdLog, `http://127.0.0.1:${etcdClientPort}/health`), 30_000, etcdLog).catch(async (err: unknown) => {
    await stopProcess(etcd);
    throw err;
  });

  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  writeFileSync(join(dir, 'sa.key'), privateKey.export({ type: 'pkcs8', format: 'pem' }));
  writeFileSync(join(dir, 'sa.pub'), publicKey.export({ type: 'spki', format: 'pem' }));
  writeFileSync(join(dir, 'tokens.csv'), `${token},admin,admin-uid,"system:masters"\n`);
  const certDir = join(dir, 'certs');

  const apiArgs = [
    `--etcd-servers=http://127.0.0.1:${etcdClientPort}`,
    `--cert-dir=${certDir}`,
    `--secure-port=${apiPort}`,
    '--bind-address=127.0.0.1',
    '--advertise-address=127.0.0.1',
    '--service-cluster-ip-range=10.0.0.0/24',
    '--allow-privileged=true',
    '--disable-admission-plugins=ServiceAccount',
    '--authorization-mode=RBAC',
    `--token-auth-file=${join(dir, 'tokens.csv')}`,
    '--service-account-issuer=https://relsync.test',
    `--service-account-key-file=${join(dir, 'sa.pub')}`,
    `--service-account-signing-key-file=${join(dir, 'sa.key')}`,
    '--v=0',
  ];
  const auditLogPath = options.audit ? join(dir, 'audit.log') : undefined;
  if (auditLogPath) {
    writeFileSync(join(dir, 'audit-policy.yaml'), 'apiVersion: audit.k8s.io/v1\nkind: Policy\nomitStages: [RequestReceived]\nrules:\n  - level: Metadata\n');
    apiArgs.push(`--audit-policy-file=${join(dir, 'audit-policy.yaml')}`, `--audit-log-path=${auditLogPath}`, '--audit-log-mode=blocking');
  }
  const apiLog = join(dir, 'kube-apiserver.log');
  let apiServer = startTracked(join(assets, 'kube-apiserver'), apiArgs, apiLog, `kube-apiserver-${name}`);
  const url = `https://127.0.0.1:${apiPort}`;

  const waitApi = async (): Promise<Buffer> => {
    const exited = () => {
      if (apiServer.exitCode !== null) throw new Error(`kube-apiserver of ${name} exited with ${apiServer.exitCode}; last log lines of ${apiLog}:\n${readFileSync(apiLog, 'utf8').split('\n').slice(-30).join('\n')}`);
    };
    await waitFor(`kube-apiserver of ${name}`, async () => (exited(), existsSync(join(certDir, 'apiserver.crt'))), 60_000, apiLog);
    // Read again at each probe: the file may be seen while the API server is still writing it, and a
    // certificate read half-written would fail every probe of a server that is ready (seen in CI).
    let ca = readFileSync(join(certDir, 'apiserver.crt'));
    await waitFor(`kube-apiserver of ${name}`, async () => {
      exited();
      ca = readFileSync(join(certDir, 'apiserver.crt'));
      return (await probe(`${url}/readyz`, token, ca)) === 200;
    }, 90_000, apiLog);
    return ca;
  };
  let ca: Buffer;
  try {
    ca = await waitApi();
  } catch (err) {
    // A start that failed leaves nothing running: a process left would keep the test file from ending.
    await stopProcess(apiServer);
    await stopProcess(etcd);
    throw err;
  }
  const stopApiServer = () => stopProcess(apiServer);
  const startApiServer = async () => {
    apiServer = startTracked(join(assets, 'kube-apiserver'), apiArgs, apiLog, `kube-apiserver-${name}`);
    await waitApi();
  };

  const kubeconfigPath = join(dir, 'kubeconfig.yaml');
  writeFileSync(
    kubeconfigPath,
    [
      'apiVersion: v1',
      'kind: Config',
      `clusters: [{name: ${name}, cluster: {server: '${url}', certificate-authority-data: ${ca.toString('base64')}}}]`,
      `users: [{name: admin, user: {token: ${token}}}]`,
      `contexts: [{name: ${name}, context: {cluster: ${name}, user: admin}}]`,
      `current-context: ${name}`,
      '',
    ].join('\n'),
  );
  const kubeConfig = new KubeConfig();
  kubeConfig.loadFromFile(kubeconfigPath);

  return {
    name,
    url,
    kubeconfigPath,
    kubeConfig,
    token,
    dir,
    etcdUrl: `http://127.0.0.1:${etcdClientPort}`,
    ...(auditLogPath ? { auditLogPath } : {}),
    async stop() {
      await stopProcess(apiServer);
      await stopProcess(etcd);
      if (!process.env.RELSYNC_KEEP_CONTROL_PLANES) rmSync(dir, { recursive: true, force: true });
    },
    signalApiServer(signal) {
      apiServer.kill(signal);
    },
    async restartApiServer() {
      await stopApiServer();
      await startApiServer();
    },
    stopApiServer,
    startApiServer,
  };
}

/**
 * Compacts etcd at its current revision (through etcd's HTTP gateway), so
 * that watches from older resourceVersions expire once the API server's
 * watch cache no longer holds them (e.g. after restartApiServer).
 */
export async function compactEtcd(plane: ControlPlane): Promise<number> {
  const range = await fetch(`${plane.etcdUrl}/v3/kv/range`, { method: 'POST', body: JSON.stringify({ key: Buffer.from('/').toString('base64') }) });
  const { header } = (await range.json()) as { header: { revision: string } };
  const revision = Number(header.revision);
  const res = await fetch(`${plane.etcdUrl}/v3/kv/compaction`, { method: 'POST', body: JSON.stringify({ revision, physical: true }) });
  if (!res.ok) throw new Error(`etcd compaction failed: ${res.status} ${await res.text()}`);
  return revision;
}

/**
 * Makes the API server accept exactly these bearer tokens besides the admin
 * token, each for a user in system:masters unless groups are given, and
 * restarts it so that the list takes effect: a token left out stops being
 * accepted.
 */
export async function acceptTokens(plane: ControlPlane, tokens: Record<string, string | { token: string; groups: string[] }>): Promise<void> {
  const line = (user: string, t: string | { token: string; groups: string[] }) => {
    const { token, groups } = typeof t === 'string' ? { token: t, groups: ['system:masters'] } : t;
    return `${token},${user},${user}-uid,"${groups.join(',')}"`;
  };
  const lines = [`${plane.token},admin,admin-uid,"system:masters"`, ...Object.entries(tokens).map(([user, t]) => line(user, t))];
  writeFileSync(join(plane.dir, 'tokens.csv'), `${lines.join('\n')}\n`);
  await plane.restartApiServer();
}

/** Starts several control planes side by side. */
export async function startControlPlanes(...names: string[]): Promise<ControlPlane[]> {
  const started = await Promise.allSettled(names.map((n) => startControlPlane(n)));
  const failed = started.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (!failed) return started.map((s) => (s as PromiseFulfilledResult<ControlPlane>).value);
  // Those that did start are stopped: the test's after hook has no planes to stop, and they would keep the file from ending.
  await Promise.all(started.flatMap((s) => (s.status === 'fulfilled' ? [s.value.stop()] : [])));
  throw failed.reason;
}
