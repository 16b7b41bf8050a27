/**
 * The credentials of one connection, applied so that they refresh: tokens
 * that the kubelet rotates (the in-cluster service account), exec plugins
 * (EKS, GKE, AKS: tokens of minutes), OIDC, token files. client-node's
 * authenticators refresh them only when they are applied again, and cache
 * what they can (an exec credential until its expirationTimestamp), so
 * relsync applies them again every `refreshMs` (a token file is read at each)
 * and at once after a 401. After a 401 the kubeconfig file itself is read again, so that
 * a rotated kubeconfig (a mounted Secret) or a revoked exec credential is not
 * reused. How a kubeconfig is read and applied: kubeconfig.ts.
 */
import { systemClock, type Clock } from '../util/clock.js';
import { applyKubeconfig, loadInCluster, loadKubeconfig, type AppliedCredentials, type Kubeconfig } from './kubeconfig.js';

export interface CredentialSource {
  /** Path of a kubeconfig file; when absent the in-cluster service account is used. */
  readonly kubeconfig?: string | undefined;
  /** Context inside the kubeconfig; default: its current context. */
  readonly context?: string | undefined;
}

/** invalidate() within this long of the last apply keeps what was applied. */
const MIN_REAPPLY_MS = 5_000;

export class Credentials {
  /** The API server's base URL (without a trailing slash), from the kubeconfig as first read. */
  readonly server: string;
  private config: Kubeconfig;
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
    this.server = this.config.cluster.server.replace(/\/+$/, '');
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
    } catch {
      // a kubeconfig being rewritten: the next 401 tries again
    }
  }

  private async apply(generation: number): Promise<AppliedCredentials> {
    const value = await applyKubeconfig(this.config);
    if (generation === this.generation) this.applied = { value, at: this.clock.now() };
    return value;
  }
}

function load(source: CredentialSource): Kubeconfig {
  return source.kubeconfig ? loadKubeconfig(source.kubeconfig, source.context) : loadInCluster();
}
