/**
 * Who may read /metrics, asked of an API server as kubebuilder's default metrics endpoint asks
 * (controller-runtime's filters.WithAuthenticationAndAuthorization): the caller's bearer token is
 * checked with a TokenReview, and the user it names with a SubjectAccessReview for `get` on the
 * non-resource URL `/metrics`. Prometheus's ServiceAccount then needs a ClusterRole with
 * `nonResourceURLs: ["/metrics"], verbs: ["get"]`; relsync's own needs `create` on tokenreviews
 * and subjectaccessreviews.
 *
 * Answers are kept for a minute (a refusal for 10 s) by the token's hash, so a scrape every 15 s
 * costs the API server two requests a minute per scraper. Against a flood of made-up tokens (the
 * port may be reachable by anyone in the cluster): allowed tokens are remembered apart, so
 * refusals cannot push them out; one review runs per token at a time (others wait for it); and
 * at most 4 run at once, a request beyond that is answered 503 at once, not queued behind them.
 */
import { createHash } from 'node:crypto';
import { ExpiringMap } from '../util/expiring-map.js';
import type { Connection } from './connection.js';

/** Undefined: allowed; otherwise the status and the one line the caller gets. */
export type MetricsDecision = { readonly status: 401 | 403 | 503; readonly message: string } | undefined;

interface TokenReview {
  status?: { authenticated?: boolean; error?: string; user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> } };
}

interface SubjectAccessReview {
  status?: { allowed?: boolean; denied?: boolean; reason?: string };
}

/** Reviews in flight at once, at most. */
const REVIEWS_AT_ONCE = 4;

export class MetricsAuthorizer {
  private readonly allowed = new ExpiringMap<string, true>(100);
  private readonly refused = new ExpiringMap<string, NonNullable<MetricsDecision>>(1000);
  /** Reviews running, by token hash: a second request with the token waits for the first's answer. */
  private readonly running = new Map<string, Promise<NonNullable<MetricsDecision> | 'allowed'>>();

  constructor(
    private readonly connection: Pick<Connection, 'request'>,
    private readonly logger?: { warn(fields: object, message: string): void },
    private readonly path = '/metrics',
  ) {}

  async authorize(authorization: string | undefined): Promise<MetricsDecision> {
    const token = /^Bearer\s+(\S+)$/i.exec(authorization ?? '')?.[1];
    if (!token) return { status: 401, message: 'a bearer token is required (Authorization: Bearer <token>)' };
    const key = createHash('sha256').update(token).digest('base64url');
    if (this.allowed.get(key)) return undefined;
    const known = this.refused.get(key);
    if (known) return known;
    let review = this.running.get(key);
    if (!review) {
      if (this.running.size >= REVIEWS_AT_ONCE) return { status: 503, message: 'too many tokens are being checked; try again' };
      review = this.decide(token).finally(() => this.running.delete(key));
      this.running.set(key, review);
    }
    let decision: NonNullable<MetricsDecision> | 'allowed';
    try {
      decision = await review;
    } catch (err) {
      // The API server could not be asked: not remembered, the next scrape asks again. Why goes to the log, not to the caller.
      this.logger?.warn({ err: (err as Error).message }, 'could not check a /metrics token with the service cluster');
      return { status: 503, message: 'the token could not be checked' };
    }
    if (decision === 'allowed') this.allowed.set(key, true, 60_000);
    else this.refused.set(key, decision, 10_000);
    return decision === 'allowed' ? undefined : decision;
  }

  private async decide(token: string): Promise<NonNullable<MetricsDecision> | 'allowed'> {
    const review = await this.connection.request<TokenReview>('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token } },
    });
    const user = review.status?.user;
    if (!review.status?.authenticated || !user?.username) return { status: 401, message: 'the token is not valid' };
    const access = await this.connection.request<SubjectAccessReview>('POST', '/apis/authorization.k8s.io/v1/subjectaccessreviews', {
      body: {
        apiVersion: 'authorization.k8s.io/v1',
        kind: 'SubjectAccessReview',
        spec: { user: user.username, uid: user.uid, groups: user.groups, extra: user.extra, nonResourceAttributes: { path: this.path, verb: 'get' } },
      },
    });
    if (!access.status?.allowed) return { status: 403, message: `${user.username} may not get ${this.path}` };
    return 'allowed';
  }
}
