/**
 * /healthz (alive: no watch dead or stuck; a restart would help), /readyz
 * (store open, every watch synced once and not failing for longer than its
 * grace; the body lists what is not ready) and /metrics (for whom authorizeMetrics allows: the
 * probes stay open, as the kubelet calls them without a token). Over TLS where a certificate is
 * given (certificate-watcher.ts reads it again when it changes), plain HTTP otherwise, with a
 * warning at start when bearer tokens would cross the network in clear text.
 */
import http from 'node:http';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import type { Logger } from 'pino';
import type { Registry } from 'prom-client';
import { CertificateWatcher, readCertificatePair, type CertificateFiles } from './certificate-watcher.js';
import type { Clock } from '../util/clock.js';
import { aborted } from '../util/on-abort.js';

export interface Readiness {
  /** Names of what is not ready yet; empty when ready. */
  notReady(): string[];
  /** Why the process should be restarted; empty while it works. */
  notLive(): string[];
  /** One line saying what this process is doing, e.g. "leader" or "standby (leader: x)". */
  role(): string;
}

export interface HttpServerOptions {
  readonly port: number;
  readonly host?: string;
  readonly registry: Registry;
  readonly readiness: Readiness;
  readonly logger: Logger;
  readonly beforeScrape?: () => Promise<void>;
  /**
   * Who may read /metrics, from the Authorization header and the caller's address: undefined
   * allows the request, otherwise its status and why (default: everyone).
   */
  readonly authorizeMetrics?: Authorize;
  /** Serve TLS with this certificate and key (read again when they change); default: plain HTTP. */
  readonly tls?: CertificateFiles;
  /**
   * /explain?type=…&object=…[&cluster=…] (`relsync explain --server`): served only with `authorize`
   * (tenants' object names and messages are not for anyone who reaches the port); `answer` gives
   * the JSON, or a status and why.
   */
  readonly explain?: {
    readonly authorize: Authorize;
    readonly answer: (query: URLSearchParams) => Promise<{ readonly status: number; readonly body: unknown }>;
  };
  /** What the certificate's files are read again on; default systemClock. */
  readonly clock?: Clock;
}

export type Authorize = (authorization: string | undefined, source: string) => Promise<{ readonly status: number; readonly message: string } | undefined>;

export class HttpServer {
  private server: http.Server | https.Server | undefined;

  constructor(private readonly options: HttpServerOptions) {}

  private async explain(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const { explain, logger } = this.options;
    try {
      if (!explain) return reply(res, 404, 'not served: /explain needs --metrics-auth kubernetes (it shows tenants\' object names and messages)\n');
      if (req.method !== 'GET') {
        res.setHeader('Allow', 'GET');
        return reply(res, 405, 'only GET\n');
      }
      const refused = await explain.authorize(req.headers.authorization, sourceOf(req));
      if (refused) {
        logger.debug({ status: refused.status, why: refused.message }, '/explain refused');
        return refuse(res, refused);
      }
      const { status, body } = await explain.answer(new URL(req.url ?? '/', 'http://relsync').searchParams);
      if (status === 503) res.setHeader('Retry-After', '1');
      reply(res, status, `${JSON.stringify(body)}\n`, 'application/json');
    } catch (err) {
      logger.warn({ err: (err as Error).message }, '/explain failed');
      reply(res, 500, 'explain failed; see relsync\'s log\n');
    }
  }

  /** Listens until `signal` aborts; calls `onListening` with the bound port. */
  async start(signal: AbortSignal, onListening?: (port: number) => void): Promise<void> {
    const { registry, readiness, logger } = this.options;
    const handler: http.RequestListener = (req, res) => {
      const url = (req.url ?? '/').split('?')[0];
      if (url === '/healthz') {
        const dead = readiness.notLive();
        if (dead.length > 0) logger.error({ problems: dead }, 'liveness check failed: a watch is dead or stuck; restart me');
        return dead.length === 0 ? reply(res, 200, 'ok\n') : reply(res, 503, `not alive:\n${dead.map((d) => `- ${d}\n`).join('')}`);
      }
      if (url === '/readyz') {
        const waiting = readiness.notReady();
        const role = readiness.role();
        return waiting.length === 0 ? reply(res, 200, `ok: ${role}\n`) : reply(res, 503, `not ready: ${role}\n${waiting.map((w) => `- ${w}\n`).join('')}`);
      }
      if (url === '/explain') {
        void this.explain(req, res);
        return;
      }
      if (url === '/metrics') {
        void (async () => {
          try {
            const refused = await this.options.authorizeMetrics?.(req.headers.authorization, sourceOf(req));
            if (refused) {
              // Said to the caller; at debug level only in the log (a scraper without its token scrapes every few seconds).
              logger.debug({ status: refused.status, why: refused.message }, '/metrics refused');
              return refuse(res, refused);
            }
            await this.options.beforeScrape?.();
            reply(res, 200, await registry.metrics(), registry.contentType);
          } catch (err) {
            // The reason goes to the log, not to whoever asked: an error's text may name internals.
            logger.error({ err: (err as Error).message }, '/metrics failed');
            reply(res, 500, 'internal error (see relsync\'s log)\n');
          }
        })();
        return;
      }
      reply(res, 404, 'not found\n');
    };
    const server = this.createServer(handler, signal);
    this.server = server;
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(this.options.port, this.options.host ?? '0.0.0.0', () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    const tls = this.options.tls !== undefined;
    logger.info({ port, tls, explain: this.options.explain !== undefined }, 'serving /healthz, /readyz and /metrics');
    if (!tls && (this.options.authorizeMetrics || this.options.explain)) {
      logger.warn('bearer tokens for /metrics and /explain reach this port over plain HTTP, readable on the network: give --tls-cert-file and --tls-private-key-file');
    }
    onListening?.(port);
    await aborted(signal);
    await new Promise<void>((resolve) => {
      server.close(() => resolve());
      server.closeAllConnections();
    });
  }

  /** Plain HTTP, or HTTPS whose certificate follows its files (throws naming a file that is not a valid pair). */
  private createServer(handler: http.RequestListener, signal: AbortSignal): http.Server | https.Server {
    const files = this.options.tls;
    if (!files) return http.createServer(handler);
    const pair = readCertificatePair(files);
    const server = https.createServer({ cert: pair.cert, key: pair.key }, handler);
    new CertificateWatcher(files, pair, this.options.logger, (next) => server.setSecureContext({ cert: next.cert, key: next.key }), this.options.clock).start(signal);
    this.options.logger.info({ subject: pair.subject, notAfter: pair.notAfter }, 'serving TLS');
    return server;
  }
}

/** The caller's address, for per-source limits (what the socket says: a proxy in front would be one source). */
function sourceOf(req: http.IncomingMessage): string {
  return req.socket.remoteAddress ?? 'unknown';
}

function refuse(res: http.ServerResponse, refused: { readonly status: number; readonly message: string }): void {
  if (refused.status === 401) res.setHeader('WWW-Authenticate', 'Bearer');
  if (refused.status === 503) res.setHeader('Retry-After', '1');
  reply(res, refused.status, `${refused.message}\n`);
}

function reply(res: http.ServerResponse, status: number, body: string, contentType = 'text/plain; charset=utf-8'): void {
  res.writeHead(status, { 'Content-Type': contentType });
  res.end(body);
}
