/**
 * Who may read /metrics (or /explain), asked of an API server as kubebuilder's default metrics
 * endpoint asks (controller-runtime's filters.WithAuthenticationAndAuthorization): the caller's
 * bearer token is checked with a TokenReview, and the user it names with a SubjectAccessReview
 * for `get` on the non-resource URL. Prometheus's ServiceAccount then needs a ClusterRole with
 * `nonResourceURLs: ["/metrics"], verbs: ["get"]`; relsync's own needs `create` on tokenreviews
 * and subjectaccessreviews. With `audience`, the token must have been minted for it (a
 * TokenRequest's `audiences`, `kubectl create token --audience`): a token meant for another
 * service, the API server's own included, is refused.
 *
 * Answers are kept by the token's hash: an allow for `allowedTtlMs` (a minute), a refusal for
 * 10 s, so a scrape every 15 s costs the API server two requests a minute per scraper. The port
 * may be reachable by anyone in the cluster, so a flood of made-up tokens must neither crowd out
 * Prometheus nor cost without bound:
 * - a token allowed in the last 10 minutes is asked about again in a lane of its own (at most 4
 *   at once), which made-up tokens never enter: its scrapes go on through the flood;
 * - any other token waits for no one: at most 4 reviews run at once, at most one per source
 *   address, and a source starts at most 5 at once then one a second; a request beyond that is
 *   answered 503 at once, not queued;
 * - one review runs per token at a time (others with it wait for its answer), and what is
 *   remembered is capped (100 allows, 1,000 refusals, 1,000 sources).
 */
import { createHash } from 'node:crypto';
import { ExpiringMap } from '../util/expiring-map.js';
import { SourceLimit } from '../util/source-limit.js';
import type { Connection } from './connection.js';
import { systemClock, type Clock } from '../util/clock.js';

/** Undefined: allowed; otherwise the status and the one line the caller gets. */
export type MetricsDecision = { readonly status: 401 | 403 | 503; readonly message: string } | undefined;

export interface MetricsAuthorizerOptions {
  /** The non-resource URL whose `get` the caller's user needs; default /metrics. */
  readonly path?: string;
  /** The audience the token must be for; default: the API server's own (any service-account token). */
  readonly audience?: string;
  /** How long an allow is trusted before the API server is asked again; default 60 s. */
  readonly allowedTtlMs?: number;
  readonly logger?: { warn(fields: object, message: string): void };
  /** What answers are remembered for on; default systemClock. */
  readonly clock?: Clock;
}

interface TokenReview {
  status?: { authenticated?: boolean; audiences?: string[]; error?: string; user?: { username?: string; uid?: string; groups?: string[]; extra?: Record<string, string[]> } };
}

interface SubjectAccessReview {
  status?: { allowed?: boolean; denied?: boolean; reason?: string };
}

/** Reviews of tokens not allowed before, in flight at once, at most. */
const REVIEWS_AT_ONCE = 4;
/** Reviews of tokens allowed before (their allow expired), in flight at once, at most. */
const KNOWN_REVIEWS_AT_ONCE = 4;
/** How long a token once allowed keeps its own lane. */
const KNOWN_FOR_MS = 10 * 60_000;
const REFUSED_FOR_MS = 10_000;

type Answer = NonNullable<MetricsDecision> | 'allowed';

export class MetricsAuthorizer {
  private readonly allowed: ExpiringMap<string, true>;
  /** Tokens allowed in the last KNOWN_FOR_MS: asked about again in the known lane. */
  private readonly known: ExpiringMap<string, true>;
  private readonly refused: ExpiringMap<string, NonNullable<MetricsDecision>>;
  /** Reviews running, by token hash: a second request with the token waits for the first's answer. */
  private readonly running = new Map<string, Promise<Answer>>();
  private unknownRunning = 0;
  private knownRunning = 0;
  private readonly sources: SourceLimit;
  private readonly path: string;
  private readonly allowedTtlMs: number;
  private readonly clock: Clock;

  constructor(
    private readonly connection: Pick<Connection, 'request'>,
    private readonly options: MetricsAuthorizerOptions = {},
  ) {
    this.path = options.path ?? '/metrics';
    this.allowedTtlMs = options.allowedTtlMs ?? 60_000;
    this.clock = options.clock ?? systemClock;
    this.allowed = new ExpiringMap(100, this.clock);
    this.known = new ExpiringMap(100, this.clock);
    this.refused = new ExpiringMap(1000, this.clock);
    this.sources = new SourceLimit({ inFlight: 1, burst: 5, perSecond: 1, maxSources: 1000, clock: this.clock });
  }

  /** `source`: the caller's address, for the per-source limit on reviews of unknown tokens. */
  async authorize(authorization: string | undefined, source = 'unknown'): Promise<MetricsDecision> {
    const token = /^Bearer\s+(\S+)$/i.exec(authorization ?? '')?.[1];
    if (!token) return { status: 401, message: 'a bearer token is required (Authorization: Bearer <token>)' };
    const key = createHash('sha256').update(token).digest('base64url');
    const now = this.clock.now();
    if (this.allowed.get(key, now)) return undefined;
    const known = this.refused.get(key, now);
    if (known) return known;
    let review = this.running.get(key);
    if (!review) {
      const started = this.start(key, token, source, now);
      if (!started) return { status: 503, message: 'too many tokens are being checked; try again' };
      review = started;
    }
    let decision: Answer;
    try {
      decision = await review;
    } catch (err) {
      // The API server could not be asked: not remembered, the next scrape asks again. Why goes to the log, not to the caller.
      this.options.logger?.warn({ err: (err as Error).message }, `could not check a ${this.path} token with the service cluster`);
      return { status: 503, message: 'the token could not be checked' };
    }
    return decision === 'allowed' ? undefined : decision;
  }

  /** Starts the review of `token` in its lane, or undefined when the lane is full. */
  private start(key: string, token: string, source: string, now: number): Promise<Answer> | undefined {
    let release: () => void;
    if (this.known.get(key, now)) {
      if (this.knownRunning >= KNOWN_REVIEWS_AT_ONCE) return undefined;
      this.knownRunning++;
      release = () => this.knownRunning--;
    } else {
      if (this.unknownRunning >= REVIEWS_AT_ONCE) return undefined;
      const fromSource = this.sources.tryStart(source);
      if (!fromSource) return undefined;
      this.unknownRunning++;
      release = () => {
        this.unknownRunning--;
        fromSource();
      };
    }
    const review = this.decide(token)
      .then((decision) => {
        // Remembered as it is decided, before anyone waiting reads it: a later request finds it here.
        const at = this.clock.now();
        if (decision === 'allowed') {
          this.allowed.set(key, true, this.allowedTtlMs, at);
          this.known.set(key, true, KNOWN_FOR_MS, at);
        } else {
          this.refused.set(key, decision, REFUSED_FOR_MS, at);
          this.known.delete(key);
        }
        return decision;
      })
      .finally(() => {
        release();
        this.running.delete(key);
      });
    this.running.set(key, review);
    return review;
  }

  private async decide(token: string): Promise<Answer> {
    const { audience } = this.options;
    const review = await this.connection.request<TokenReview>('POST', '/apis/authentication.k8s.io/v1/tokenreviews', {
      body: { apiVersion: 'authentication.k8s.io/v1', kind: 'TokenReview', spec: { token, ...(audience ? { audiences: [audience] } : {}) } },
    });
    const user = review.status?.user;
    if (!review.status?.authenticated || !user?.username) {
      return { status: 401, message: audience ? `the token is not valid for the audience ${audience}` : 'the token is not valid' };
    }
    // An API server that does not know audiences answers without them: the token is then its own, not ours.
    if (audience && !(review.status.audiences ?? []).includes(audience)) return { status: 401, message: `the token is not valid for the audience ${audience}` };
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
