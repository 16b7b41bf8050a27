/**
 * A fault-injecting HTTPS proxy between relsync and one real API server (a
 * control plane's kube-apiserver, or a kcp: its workspaces under /clusters/
 * and its virtual workspaces under /services/ alike), on loopback. It
 * terminates TLS with the server's own serving certificate (so the
 * kubeconfig's CA still verifies it), forwards every request as it is
 * (credentials included), streams watches, and records what passed.
 * Faults are chosen per request by method and path: answer a status (500,
 * 503, 429 with Retry-After), reset the connection, hold the request for a
 * while before forwarding it, leave items out of a LIST's answer, answer
 * every page of a LIST with another continue token, or rewrite the objects
 * of an answer; open streams (watches)
 * can be cut. Tests, the chaos run and the benchmarks use
 * it; nothing in it is specific to relsync.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { jsonText } from '../../src/util/json-text.js';
import type { ControlPlane } from './control-plane.js';
import type { Kcp } from './kcp.js';

export type FaultAction =
  /** An answer without forwarding: a Kubernetes Status, or `text` as plain text (as for a path no API serves). */
  | { readonly kind: 'status'; readonly status: number; readonly retryAfterSeconds?: number; readonly text?: string }
  | { readonly kind: 'reset' }
  | { readonly kind: 'delay'; readonly ms: number }
  /**
   * Forwarded, and a LIST's answer (JSON with `items`) comes back with only the items `keep` accepts:
   * a server whose view lacks some objects. A watch streams through unchanged (held whole, it would never end).
   */
  | { readonly kind: 'filter'; readonly keep: (item: { readonly metadata?: { readonly name?: string; readonly annotations?: Readonly<Record<string, string>> } }) => boolean }
  /**
   * Forwarded, and a LIST's answer comes back with a continue token, a new one for every page: a
   * server that never says its list is complete. A request that carries one of these tokens is
   * forwarded without it (so the real server answers with its first page again). Watches stream
   * through unchanged.
   */
  | { readonly kind: 'endless' }
  /**
   * Forwarded, and a JSON answer comes back with each object as `object` returns it: a LIST's
   * items, or a GET's object (a server that answers with objects no etcd would hold). A watch
   * streams through unchanged.
   */
  | { readonly kind: 'rewrite'; readonly object: (object: Record<string, unknown>) => Record<string, unknown> };

export interface Fault {
  /** e.g. 'DELETE'; default: any method. */
  readonly method?: string;
  /** Matched against the path without the query; default: any path. */
  readonly path?: RegExp;
  /** Also required of the query string (e.g. /watch=true/); default: any. */
  readonly query?: RegExp;
  /** How many matching requests it applies to; default: all, until removed. */
  readonly times?: number;
  readonly action: FaultAction;
}

export interface ProxiedRequest {
  readonly method: string;
  readonly path: string;
  readonly query: string;
  /** Its Accept and Content-Type headers, when it had them. */
  readonly accept: string | undefined;
  readonly contentType: string | undefined;
  /** The status relsync saw; 'reset' when the connection was dropped. */
  status: number | 'reset' | undefined;
  /** The fault applied to it, if any. */
  readonly fault: FaultAction['kind'] | undefined;
  readonly at: number;
}

export interface FaultProxy {
  readonly url: string;
  /**
   * The API server's kubeconfig with the server URL pointing at the proxy (for kcp: the admin's,
   * at kcp's base URL; kcp.kubeconfig(file, `${proxy.url}/clusters/…`, token) writes others).
   */
  readonly kubeconfigPath: string;
  /** Every request that reached the proxy, oldest first (the last 100,000). */
  readonly requests: readonly ProxiedRequest[];
  /** Adds a fault; the returned function removes it. */
  inject(fault: Fault): () => void;
  /**
   * Drops the connections of forwarded requests still open whose path matches (a watch cut, as a
   * network fault would); returns how many. A fault injected before applies to the reconnect.
   */
  cut(path: RegExp): number;
  /** Removes every fault. */
  clear(): void;
  close(): Promise<void>;
}

const MAX_RECORDED = 100_000;

/** Faults that rewrite whole answers: a watch request is forwarded as it is. */
const PASSES_WATCHES: ReadonlySet<FaultAction['kind']> = new Set(['filter', 'endless', 'rewrite']);

interface ActiveFault {
  readonly fault: Fault;
  remaining: number;
}

/** What the proxy needs of the server it fronts. */
interface Upstream {
  readonly url: string;
  /** Its serving certificate and key, which the proxy presents. */
  readonly cert: Buffer;
  readonly key: Buffer;
  /** What verifies the server itself. */
  readonly ca: Buffer;
  /** Writes a kubeconfig for the proxy's URL; returns its path. */
  kubeconfig(server: string): string;
}

function upstreamOf(target: ControlPlane | Kcp, name: string): Upstream {
  if ('agentToken' in target) {
    // `kcp start` makes its serving certificate (for 127.0.0.1) in its root folder; kcp.ca verifies it.
    const root = join(target.dir, 'root');
    return {
      url: target.url,
      cert: readFileSync(join(root, 'apiserver.crt')),
      key: readFileSync(join(root, 'apiserver.key')),
      ca: target.ca,
      kubeconfig: (server) => target.kubeconfig(join(target.dir, `kubeconfig-${name}.yaml`), server),
    };
  }
  const certDir = join(target.dir, 'certs');
  const cert = readFileSync(join(certDir, 'apiserver.crt'));
  return {
    url: target.url,
    cert,
    key: readFileSync(join(certDir, 'apiserver.key')),
    ca: cert,
    kubeconfig: (server) => {
      const path = join(target.dir, `kubeconfig-${name}.yaml`);
      writeFileSync(path, readFileSync(target.kubeconfigPath, 'utf8').replace(target.url, server));
      return path;
    },
  };
}

/**
 * A proxy in front of a control plane's kube-apiserver or a kcp. For kcp, a virtual workspace URL
 * that an APIExportEndpointSlice lists names kcp itself, not the proxy: a client that must go
 * through the proxy is given that URL with kcp's base URL replaced by the proxy's.
 */
export async function startFaultProxy(target: ControlPlane | Kcp, name = 'proxy'): Promise<FaultProxy> {
  const { url: upstreamUrl, cert, key, ca, kubeconfig } = upstreamOf(target, name);
  const upstream = new URL(upstreamUrl);
  const agent = new https.Agent({ keepAlive: true, ca });
  const faults: ActiveFault[] = [];
  const requests: ProxiedRequest[] = [];
  /** Forwarded requests whose answer is still open (watches, mostly), for cut(). */
  const open = new Set<{ readonly path: string; readonly res: ServerResponse }>();

  const faultFor = (method: string, path: string, query: string): FaultAction | undefined => {
    for (const active of faults) {
      const { fault } = active;
      if (active.remaining <= 0) continue;
      if (fault.method && fault.method !== method) continue;
      if (fault.path && !fault.path.test(path)) continue;
      if (fault.query && !fault.query.test(query)) continue;
      // A fault that passes watches on (it rewrites whole answers) does not stand in the way of one that applies to them.
      if (PASSES_WATCHES.has(fault.action.kind) && /(^|&)watch=(true|1)(&|$)/.test(query)) continue;
      active.remaining--;
      return fault.action;
    }
    return undefined;
  };

  /** The proxy's own continue tokens ('endless'), numbered so that each page gets another. */
  let tokens = 0;
  const ownToken = /^relsync-fault-proxy-[0-9]+$/;

  /**
   * Forwards a request (to `url`, default the request's own); `rewrite`: a LIST's answer (JSON)
   * is held whole and passed on as it returns (`anyAnswer`: any JSON object answer, a GET's too).
   */
  const forward = (req: IncomingMessage, res: ServerResponse, record: ProxiedRequest, rewrite?: (list: Record<string, unknown>) => Record<string, unknown>, url = req.url, anyAnswer = false) => {
    const entry = { path: record.path, res };
    open.add(entry);
    res.once('close', () => open.delete(entry));
    // A LIST to rewrite is held whole: asked for without compression, so that it can be read.
    const headers = { ...req.headers, host: upstream.host };
    if (rewrite) delete headers['accept-encoding'];
    const out = https.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: url, headers, agent },
      (answer) => {
        record.status = answer.statusCode;
        answer.once('error', () => res.destroy());
        if (!rewrite || answer.statusCode !== 200) {
          res.writeHead(answer.statusCode ?? 502, answer.headers);
          // Now, not with the first byte of the body: kcp's watches send nothing until an event,
          // and the client waits for the headers.
          res.flushHeaders();
          answer.pipe(res);
          return;
        }
        const chunks: Buffer[] = [];
        answer.on('data', (c: Buffer) => chunks.push(c));
        answer.once('end', () => {
          let body = Buffer.concat(chunks);
          try {
            const list = JSON.parse(body.toString('utf8')) as Record<string, unknown>;
            // At any depth: a tenant's object in the list may be nested deeper than JSON.stringify goes.
            if (Array.isArray(list.items) || (anyAnswer && list !== null && typeof list === 'object')) body = Buffer.from(jsonText(rewrite(list)));
          } catch {
            // not JSON: passed on as it came
          }
          const headers = { ...answer.headers, 'content-length': String(body.length) };
          delete headers['transfer-encoding'];
          res.writeHead(200, headers);
          res.end(body);
        });
      },
    );
    out.once('error', () => {
      record.status = 'reset';
      res.destroy();
    });
    // relsync went away (a watch it closed): stop the upstream request too.
    res.once('close', () => out.destroy());
    req.pipe(out);
  };

  const server = https.createServer({ cert, key }, (req, res) => {
    const [path = '', query = ''] = (req.url ?? '').split('?', 2);
    const method = req.method ?? 'GET';
    const action = faultFor(method, path, query);
    const record: ProxiedRequest = { method, path, query, accept: req.headers.accept, contentType: req.headers['content-type'], status: undefined, fault: action?.kind, at: Date.now() };
    requests.push(record);
    if (requests.length > MAX_RECORDED) requests.splice(0, requests.length - MAX_RECORDED);
    if (!action) return forward(req, res, record);
    switch (action.kind) {
      case 'filter': {
        if (/(^|&)watch=(true|1)(&|$)/.test(query)) return forward(req, res, record);
        const { keep } = action;
        return forward(req, res, record, (list) => ({ ...list, items: (list.items as unknown[]).filter((item) => keep(item as Parameters<typeof keep>[0])) }));
      }
      case 'endless': {
        if (/(^|&)watch=(true|1)(&|$)/.test(query)) return forward(req, res, record);
        const params = new URLSearchParams(query);
        if (ownToken.test(params.get('continue') ?? '')) params.delete('continue');
        const rest = params.toString();
        return forward(req, res, record, (list) => ({ ...list, metadata: { ...(list.metadata as object), continue: `relsync-fault-proxy-${++tokens}` } }), rest ? `${path}?${rest}` : path);
      }
      case 'rewrite': {
        if (/(^|&)watch=(true|1)(&|$)/.test(query)) return forward(req, res, record);
        const { object } = action;
        const each = (answer: Record<string, unknown>) => (Array.isArray(answer.items) ? { ...answer, items: (answer.items as Array<Record<string, unknown>>).map(object) } : object(answer));
        return forward(req, res, record, each, req.url, true);
      }
      case 'status': {
        record.status = action.status;
        const headers: Record<string, string> = { 'content-type': action.text === undefined ? 'application/json' : 'text/plain; charset=utf-8' };
        if (action.retryAfterSeconds !== undefined) headers['retry-after'] = String(action.retryAfterSeconds);
        res.writeHead(action.status, headers);
        res.end(action.text ?? JSON.stringify({ kind: 'Status', apiVersion: 'v1', status: 'Failure', message: `injected by the fault proxy (${action.status})`, code: action.status }));
        return;
      }
      case 'reset':
        record.status = 'reset';
        req.socket.destroy();
        return;
      case 'delay': {
        const timer = setTimeout(() => forward(req, res, record), action.ms);
        res.once('close', () => clearTimeout(timer));
        return;
      }
    }
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}`;

  const kubeconfigPath = kubeconfig(url);

  return {
    url,
    kubeconfigPath,
    requests,
    inject(fault) {
      const active: ActiveFault = { fault, remaining: fault.times ?? Number.POSITIVE_INFINITY };
      faults.push(active);
      return () => {
        const i = faults.indexOf(active);
        if (i >= 0) faults.splice(i, 1);
      };
    },
    cut(path) {
      let cut = 0;
      for (const entry of open) {
        if (!path.test(entry.path)) continue;
        entry.res.destroy();
        cut++;
      }
      return cut;
    },
    clear() {
      faults.length = 0;
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      agent.destroy();
    },
  };
}
