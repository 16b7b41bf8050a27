#!/usr/bin/env node
/**
 * The relsync command line: `run`, `validate`, `sweep`, `explain`, `inspect`, `demo`. Exit codes: 0 ok,
 * 1 runtime failure, 2 invalid config or arguments.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { readFileSync } from 'node:fs';
import { logFormats, logLevels } from '../util/logger.js';
import { runCommand } from './run-command.js';
import { DEFAULT_EXPLAIN_AUDIENCE } from '../controller/manager.js';
import { demoCommand } from './demo-command.js';
import { sweepCommand } from './sweep-command.js';
import { validateCommand } from './validate-command.js';
import { explainCommand } from './explain-command.js';
import { inspectOwners, inspectPrimary, inspectShards, inspectWorkspaces } from './inspect-command.js';

/** The version of the package this runs from (dist/src/cli/ → the package's root). */
const version = (JSON.parse(readFileSync(new URL('../../../package.json', import.meta.url), 'utf8')) as { version: string }).version;

const program = new Command('relsync')
  .version(version, '-V, --version', 'print the version and exit')
  .description('Sync agent: copies primary objects from platform clusters into a service cluster, copies status back, and keeps their related resources in sync both ways.')
  .showHelpAfterError()
  .exitOverride((err) => {
    process.exit(err.exitCode === 0 ? 0 : 2);
  });

const port = (value: string): number => {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new InvalidArgumentError('must be a port number (0 picks a free port)');
  return n;
};

const seconds = (value: string): number => {
  const n = Number(value);
  if (!Number.isFinite(n) || n <= 0 || n > 3600) throw new InvalidArgumentError('must be a number of seconds, more than 0 and at most 3600');
  return n;
};

const audience = (value: string): string => {
  if (!/^\S{1,253}$/.test(value)) throw new InvalidArgumentError('must be 1-253 characters without spaces');
  return value;
};

program
  .command('run')
  .description('run the agent: watch, route, reconcile until SIGTERM/SIGINT')
  .requiredOption('-c, --config <file>', 'config file (YAML)')
  .addOption(new Option('--log-level <level>', 'log level').choices(logLevels).default('info'))
  .addOption(new Option('--log-format <format>', 'log lines as JSON (for collectors) or text (for people)').choices(logFormats).default('json'))
  .option('--http-port <port>', 'port for /healthz, /readyz and /metrics (0: any free port)', port, 8080)
  .option('--no-http', 'serve no HTTP endpoints')
  .addOption(new Option('--metrics-auth <mode>', 'who may read /metrics: none (anyone who reaches the port) or kubernetes (a bearer token the service cluster authenticates, whose user may get /metrics: a TokenReview and a SubjectAccessReview, as kubebuilder\'s default; also serves /explain)').choices(['none', 'kubernetes']).default('none'))
  .option('--metrics-auth-cache-ttl <seconds>', 'with --metrics-auth kubernetes: how long an allowed token is trusted before the service cluster is asked again (a revoked right works that long)', seconds, 60)
  .option('--explain-audience <audience>', 'with --metrics-auth kubernetes: the audience a token for /explain must be minted for (kubectl create token NAME --audience relsync); a token for another service, the API server\'s own included, is refused', audience, DEFAULT_EXPLAIN_AUDIENCE)
  .option('--tls-cert-file <file>', 'serve the HTTP port over TLS with this PEM certificate (chain); read again within 10 s when it changes (a renewed Secret); default: plain HTTP')
  .option('--tls-private-key-file <file>', 'the PEM private key of --tls-cert-file')
  .option('--shutdown-timeout <seconds>', 'how long in-flight reconciles may take after SIGTERM', Number, 20)
  .action(runCommand);

program
  .command('sweep')
  .description('run one full-resync sweep (relist everything, repair, prune) and exit with a summary')
  .requiredOption('-c, --config <file>', 'config file (YAML)')
  .addOption(new Option('--log-level <level>', 'log level').choices(logLevels).default('warn'))
  .addOption(new Option('--log-format <format>', 'log lines (on stderr) as JSON or text').choices(logFormats).default('json'))
  .addOption(new Option('-o, --output <format>', 'summary format').choices(['text', 'json']).default('text'))
  .option('--force', 'sweep even while a relsync leader holds the lease (it races the leader)')
  .option('--dry-run', 'write nothing: print what the sweep would create, update and delete (-o json too); reads a copy of the store, so it is safe beside a running leader')
  .action(sweepCommand);

program
  .command('validate')
  .description('check a config file and exit: 0 when valid, 2 with every problem listed when not')
  .requiredOption('-c, --config <file>', 'config file (YAML)')
  .action(validateCommand);

program
  .command('demo')
  .description('start two local control planes, run relsync against them and show a related change arriving (needs a clone of the repository and Go)')
  .action(demoCommand);

program
  .command('explain <type> <object>')
  .description('why an object is or is not synced: the config, the store and the API servers side by side, for a primary, a related object or a copy; <type> is e.g. secrets or databases.demo.relsync.dev, <object> is namespace/name (name for a cluster-scoped one); read-only, safe beside a running leader')
  .option('-c, --config <file>', 'config file (YAML): read the store and the clusters from here')
  .option('--server <url>', 'ask a running relsync instead (its leader\'s HTTP address, e.g. https://relsync-metrics.relsync-system:8080; needs --metrics-auth kubernetes there and `get` on the non-resource URL /explain)')
  .option('--token-file <file>', 'the bearer token for --server, minted for the server\'s --explain-audience (kubectl create token NAME --audience relsync; default: $RELSYNC_TOKEN)')
  .option('--certificate-authority <file>', 'with an https --server: the PEM certificate(s) to trust for it (default: the system\'s)')
  .option('--cluster <name>', 'the cluster the object lives in (default: those the store names, and every configured one)')
  .addOption(new Option('-o, --output <format>', 'output format').choices(['text', 'json']).default('text'))
  .action(explainCommand);

const inspect = program.command('inspect').description('read the store: who owns what, and when it was last synced');
for (const [name, description, action] of [
  ['owners', 'the primaries that own a related object (as source or as copy)', inspectOwners],
  ['primary', 'what a primary relates to, and the state of each relation', inspectPrimary],
] as const) {
  inspect
    .command(`${name} <type> <object>`)
    .description(`${description}; <type> is e.g. secrets or databases.demo.relsync.dev, <object> is namespace/name`)
    .option('--cluster <name>', 'cluster the object lives in (default: any)')
    .option('-c, --config <file>', 'config file, to find the store')
    .option('--store <file>', 'store file (default: from --config, else ./relsync.db)')
    .addOption(new Option('-o, --output <format>', 'output format').choices(['table', 'json']).default('table'))
    .action(action);
}

inspect
  .command('workspaces')
  .description('kcp: the workspaces (logical clusters) relsync knows through each kcp platform, with their primaries')
  .option('-c, --config <file>', 'config file, to find the store')
  .option('--store <file>', 'store file (default: from --config, else ./relsync.db)')
  .addOption(new Option('-o, --output <format>', 'output format').choices(['table', 'json']).default('table'))
  .action(inspectWorkspaces);

inspect
  .command('shards')
  .description('sharding.shards > 1: the shards this replica holds (as it last wrote), and the clusters of each')
  .option('-c, --config <file>', 'config file, to find the store')
  .option('--store <file>', 'store file (default: from --config, else ./relsync.db)')
  .addOption(new Option('-o, --output <format>', 'output format').choices(['table', 'json']).default('table'))
  .action(inspectShards);

await program.parseAsync(process.argv);
