/**
 * Runs relsync as a real process from the built CLI (dist/src/cli/main.js),
 * with its JSON log captured to a file for assertions and for debugging a
 * failed test.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parse, stringify } from 'yaml';
import { eventually } from './kube.js';

/** RELSYNC_CLI: another build of relsync, for a benchmark's before/after comparison. */
export const cliPath = process.env.RELSYNC_CLI ?? fileURLToPath(new URL('../../src/cli/main.js', import.meta.url));

export interface RelsyncProcess {
  readonly logFile: string;
  readonly httpPort: number;
  /** The lines of this run (not those an earlier run appended to the same file). */
  log(): string;
  /**
   * Waits until a log line satisfies `match`. The child's output reaches the
   * file through this process's pipe, asynchronously: a line relsync wrote
   * before an effect the test has already seen (an Event, a copy) may still be
   * on its way to the file, so a log assertion after such an effect waits.
   */
  waitForLog(what: string, match: RegExp | ((line: string) => boolean), timeoutMs?: number): Promise<string>;
  /** SIGTERM and wait for exit; returns the exit code. */
  stop(): Promise<number | null>;
  /** SIGKILL, no cleanup. */
  kill(): Promise<void>;
  readonly child: ChildProcess;
}

const running = new Set<ChildProcess>();
/** Every log file a relsync of this test file wrote, for the failure report below. */
const logFiles = new Set<string>();
/** What the failure report prints of each log: its last lines of level info and above, cut short. */
const FAILURE_LINES = 40;
const FAILURE_LINE_CHARS = 400;
process.once('exit', (code) => {
  for (const c of running) c.kill('SIGKILL');
  // A failed file (the runner sets a non-zero exit code) says what its relsyncs said last: a CI run
  // on another machine leaves no temporary folder to read afterwards.
  if (code === 0) return;
  const report: string[] = [];
  for (const file of [...logFiles].slice(-3)) {
    let lines: string[];
    try {
      lines = readFileSync(file, 'utf8').split('\n').filter((l) => l && !l.startsWith('{"level":"debug"'));
    } catch {
      continue;
    }
    const shown = lines.slice(-FAILURE_LINES).map((l) => (l.length > FAILURE_LINE_CHARS ? `${l.slice(0, FAILURE_LINE_CHARS)}…` : l));
    report.push(`# relsync's last ${shown.length} lines (info and above) of ${file}:`, ...shown.map((l) => `#   ${l}`));
  }
  if (report.length === 0) return;
  process.stdout.write(`${report.join('\n')}\n`);
  // The runner prints these again after the summary (scripts/run-tests.mjs): a CI page that shows
  // only the end of the output then still shows them.
  const dir = process.env.RELSYNC_FAILURE_DIR;
  if (dir) {
    try {
      writeFileSync(join(dir, `${process.pid}.txt`), `# ${process.argv[1] ?? 'a test file'} failed\n${report.join('\n')}\n`);
    } catch {
      // the runner's folder is gone: the lines above are all there is
    }
  }
});

export function writeConfig(dir: string, config: unknown, file = 'relsync.yaml'): string {
  const path = join(dir, file);
  writeFileSync(path, stringify(config));
  return path;
}

/**
 * A config made only of one PublishedResource manifest (written to published.yaml) for one
 * platform (`tenant-a`) and the service cluster; `extra`: more top-level config. Returns the config's
 * path and the store's.
 */
export function writePublishedConfig(dir: string, kubeconfigs: { platform: string; service: string }, manifest: string, extra: Record<string, unknown> = {}): { configPath: string; dbPath: string } {
  writeFileSync(join(dir, 'published.yaml'), manifest);
  const dbPath = join(dir, 'relsync.db');
  const configPath = writeConfig(dir, {
    agentName: 'e2e',
    platformClusters: [{ name: 'tenant-a', kubeconfig: kubeconfigs.platform }],
    serviceCluster: { name: 'service', kubeconfig: kubeconfigs.service },
    store: { path: dbPath },
    publishedResourceFiles: ['published.yaml'],
    ...extra,
  });
  return { configPath, dbPath };
}

/** A gauge's one series on relsync's /metrics whose labels `match` accepts (undefined when none). */
export async function metricGauge(httpPort: number, name: string, match: (line: string) => boolean = () => true): Promise<number | undefined> {
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && match(l));
  return line === undefined ? undefined : Number(line.split(' ').at(-1));
}

/** The sum of a counter's series on relsync's /metrics whose labels `match` accepts. */
export async function metricTotal(httpPort: number, name: string, match: (line: string) => boolean = () => true): Promise<number> {
  const text = await (await fetch(`http://127.0.0.1:${httpPort}/metrics`)).text();
  return text.split('\n').filter((l) => l.startsWith(`${name}{`) && match(l)).reduce((n, l) => n + Number(l.split(' ').at(-1)), 0);
}

export interface StartOptions {
  /** Another build's dist/src/cli/main.js, for a bench's before/after in one run. */
  readonly cli?: string;
  /** Node's own flags, e.g. a heap limit. */
  readonly nodeArgs?: readonly string[];
  /** Added to the test's environment, e.g. MALLOC_ARENA_MAX. */
  readonly env?: Readonly<Record<string, string>>;
}

/**
 * Node's flags and the environment that deploy/statefulset.yaml gives the relsync container
 * (NODE_OPTIONS split into flags), so that a test can run relsync as deploy/ runs it.
 */
export function asDeployed(): Required<Pick<StartOptions, 'nodeArgs' | 'env'>> {
  const file = fileURLToPath(new URL('../../../deploy/statefulset.yaml', import.meta.url));
  const doc = parse(readFileSync(file, 'utf8')) as {
    spec: { template: { spec: { containers: { name: string; env?: { name: string; value?: string }[] }[] } } };
  };
  const container = doc.spec.template.spec.containers.find((c) => c.name === 'relsync');
  if (!container) throw new Error(`${file}: no container named relsync`);
  const env: Record<string, string> = {};
  let nodeArgs: string[] = [];
  for (const { name, value } of container.env ?? []) {
    if (value === undefined) continue;
    if (name === 'NODE_OPTIONS') nodeArgs = value.split(' ').filter(Boolean);
    else env[name] = value;
  }
  return { nodeArgs, env };
}

export async function startRelsync(configPath: string, logFile: string, extraArgs: string[] = [], options: StartOptions = {}): Promise<RelsyncProcess> {
  // A log appended to by an earlier run (a restart): only this run's lines say its port.
  const logFrom = existsSync(logFile) ? statSync(logFile).size : 0;
  // RELSYNC_TEST_PROFILE_DIR: every relsync a test starts writes a CPU profile there when it exits (docs/testing.md).
  const profile = process.env.RELSYNC_TEST_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.RELSYNC_TEST_PROFILE_DIR}`] : [];
  const child = spawn(process.execPath, [...profile, ...(options.nodeArgs ?? []), options.cli ?? cliPath, 'run', '--config', configPath, '--http-port', '0', '--log-level', 'debug', ...extraArgs], {
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, ...options.env },
  });
  running.add(child);
  // Last used last: a restart's log file moves to the end.
  logFiles.delete(logFile);
  logFiles.add(logFile);
  const out = createWriteStream(logFile, { flags: 'a' });
  child.stdout!.pipe(out);
  child.stderr!.pipe(out);
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => {
    running.delete(child);
    resolve(code);
  }));
  // This run's lines only: a log appended to by an earlier run (a restart) holds that run's too.
  const log = () => readFileSync(logFile).subarray(logFrom).toString('utf8');
  const httpPort = await eventually(
    `relsync serving HTTP (log ${logFile})`,
    async () => {
      if (child.exitCode !== null) throw new Error(`relsync exited with ${child.exitCode}:\n${log().slice(-3000)}`);
      const line = log().split('\n').find((l) => l.includes('serving /healthz'));
      return line ? (JSON.parse(line) as { port: number }).port : undefined;
    },
    20_000,
  );
  return {
    logFile,
    httpPort,
    child,
    log,
    waitForLog: (what, match, timeoutMs = 5_000) => {
      const test = typeof match === 'function' ? match : (l: string) => match.test(l);
      return eventually(`log line: ${what}`, async () => log().split('\n').find(test), timeoutMs);
    },
    async stop() {
      child.kill('SIGTERM');
      return exited;
    },
    async kill() {
      child.kill('SIGKILL');
      await exited;
    },
  };
}

/** Runs the CLI to completion (validate, inspect) and returns its output. */
export async function runCli(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  // RELSYNC_CLI_NODE_ARGS, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof", to profile a one-shot command such as a bench's sweep.
  const nodeArgs = process.env.RELSYNC_CLI_NODE_ARGS?.split(' ').filter(Boolean) ?? [];
  const child = spawn(process.execPath, [...nodeArgs, cliPath, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, stdout, stderr };
}
