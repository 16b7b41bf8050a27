/**
 * The credentials of one connection, applied so that they refresh: tokens
 * that the kubelet rotates (the in-cluster service account), exec plugins
 * (EKS, GKE, AKS: tokens of minutes), OIDC, token files. client-node
 * refreshes them only when they are applied again, and caches what it can
 * (an exec credential until its expirationTimestamp, a token file for 60 s),
 * so relsync applies them again every `refreshMs` and at once after a 401.
 * After a 401 the kubeconfig file itself is read again, so that a rotated
 * kubeconfig (a mounted Secret) or a revoked exec credential is not reused.
 *
 * Two kubeconfig spellings client-node 1.4 misses are handled here: a
 * user's `tokenFile` (as kubectl writes it; client-node reads only
 * `token-file`, and only once) is read on every refresh, and its trailing
 * newline is trimmed; basic auth (`username`/`password`), which client-node
 * hands over as a request option relsync does not use, becomes a header.
 */
import { readFileSync } from 'node:fs';
import type https from 'node:https';
import { dirname, isAbsolute, join } from 'node:path';
import { KubeConfig } from '@kubernetes/client-node';
import { parse } from 'yaml';
import { systemClock, type Clock } from '../util/clock.js';

export interface CredentialSource {
  /** Path of a kubeconfig file; when absent the in-cluster service account is used. */
  readonly kubeconfig?: string | undefined;
  /** Context inside the kubeconfig; default: its current context. */
  readonly context?: string | undefined;
}

/** What a request needs: authentication headers and TLS options. */
export interface AppliedCredentials {
  readonly headers: Readonly<Record<string, string>>;
  readonly tls: Pick<https.RequestOptions, 'ca' | 'cert' | 'key' | 'rejectUnauthorized'>;
}

/** invalidate() within this long of the last apply keeps what was applied. */
const MIN_REAPPLY_MS = 5_000;

export class Credentials {
  /** The API server's base URL (without a trailing slash), from the kubeconfig as first read. */
  readonly server: string;
  private config: KubeConfig;
  private tokenFile: string | undefined;
  private applied: { value: AppliedCredentials; at: number } | undefined;
  private applying: Promise<AppliedCredentials> | undefined;
  /** Bumped by invalidate(): a refresh that started before it must not be kept. */
  private generation = 0;

  constructor(
    private readonly source: CredentialSource,
    private readonly refreshMs = 30_000,
    private readonly clock: Clock = systemClock,
  ) {
    this.config = load(source);
    this.tokenFile = source.kubeconfig ? tokenFileOf(source.kubeconfig, this.config) : undefined;
    const cluster = this.config.getCurrentCluster();
    if (!cluster) throw new Error('the kubeconfig has no current cluster');
    this.server = cluster.server.replace(/\/+$/, '');
  }

  /** The credentials to send now: applied again once `refreshMs` has passed. */
  async current(): Promise<AppliedCredentials> {
    if (this.applied && this.clock.now() - this.applied.at < this.refreshMs) return this.applied.value;
    if (!this.applying) {
      const applying = this.apply(this.generation).finally(() => {
        if (this.applying === applying) this.applying = undefined;
      });
      this.applying = applying;
    }
    return this.applying;
  }

  /**
   * The API server refused the credentials (401): read the kubeconfig again
   * and apply everything afresh on the next request. A kubeconfig that cannot
   * be read now keeps the one read before.
   */
  invalidate(): void {
    // Credentials applied a moment ago are as fresh as they get: a 401 now is not for staleness,
    // and reloading again (an exec plugin run each time) against a server that refuses them all
    // would only add load. The caller's retry with backoff takes it from here.
    if (this.applied && this.clock.now() - this.applied.at < MIN_REAPPLY_MS) return;
    this.generation++;
    this.applied = undefined;
    this.applying = undefined;
    try {
      this.config = load(this.source);
      this.tokenFile = this.source.kubeconfig ? tokenFileOf(this.source.kubeconfig, this.config) : undefined;
    } catch {
      // a kubeconfig being rewritten: the next 401 tries again
    }
  }

  private async apply(generation: number): Promise<AppliedCredentials> {
    const options: https.RequestOptions = {};
    await this.config.applyToHTTPSOptions(options);
    const headers: Record<string, string> = {};
    for (const [key, value] of Object.entries((options.headers ?? {}) as Record<string, unknown>)) {
      if (typeof value === 'string') headers[key] = value.trim();
    }
    if (options.auth) headers.Authorization = `Basic ${Buffer.from(options.auth).toString('base64')}`;
    if (this.tokenFile) headers.Authorization = `Bearer ${readFileSync(this.tokenFile, 'utf8').trim()}`;
    const value: AppliedCredentials = { headers, tls: { ca: options.ca, cert: options.cert, key: options.key, rejectUnauthorized: options.rejectUnauthorized } };
    if (generation === this.generation) this.applied = { value, at: this.clock.now() };
    return value;
  }
}

function load(source: CredentialSource): KubeConfig {
  const config = new KubeConfig();
  if (source.kubeconfig) {
    config.loadFromFile(source.kubeconfig);
    if (source.context) config.setCurrentContext(source.context);
  } else {
    config.loadFromCluster();
  }
  return config;
}

/**
 * The token file of the current context's user, under either spelling
 * (`tokenFile` as kubectl writes it, `token-file` as client-node reads it),
 * relative to the kubeconfig's folder as kubectl resolves it.
 */
function tokenFileOf(kubeconfigPath: string, config: KubeConfig): string | undefined {
  const userName = config.getCurrentUser()?.name;
  if (!userName) return undefined;
  let raw: { users?: Array<{ name?: string; user?: Record<string, unknown> }> } | null;
  try {
    raw = parse(readFileSync(kubeconfigPath, 'utf8')) as typeof raw;
  } catch {
    // client-node read it a moment ago; a parse error here (its message could quote a token) says nothing new
    return undefined;
  }
  const user = raw?.users?.find((u) => u.name === userName)?.user;
  if (typeof user?.token === 'string' && user.token !== '') return undefined; // a token given inline wins, as in kubectl
  const file = user?.tokenFile ?? user?.['token-file'];
  if (typeof file !== 'string' || file === '') return undefined;
  return isAbsolute(file) ? file : join(dirname(kubeconfigPath), file);
}
