/**
 * A fault-injecting HTTPS proxy between relsync and one real API server, on
 * loopback. It terminates TLS with the API server's own serving certificate
 * (so the kubeconfig's CA still verifies it), forwards every request as it
 * is (credentials included), streams watches, and records what passed.
 * Faults are chosen per request by method and path: answer a status (500,
 * 503, 429 with Retry-After), reset the connection, or hold the request for
 * a while before forwarding it. Tests, the chaos run and the benchmarks use
 * it; nothing in it is specific to relsync.
 */
import { readFileSync, writeFileSync } from 'node:fs';
import https from 'node:https';
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import type { ControlPlane } from './control-plane.js';

export type FaultAction =
  /** An answer without forwarding: a Kubernetes Status, or `text` as plain text (as for a path no API serves). */
  | { readonly kind: 'status'; readonly status: number; readonly retryAfterSeconds?: number; readonly text?: string }
  | { readonly kind: 'reset' }
  | { readonly kind: 'delay'; readonly ms: number };

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
  /** The status relsync saw; 'reset' when the connection was dropped. */
  status: number | 'reset' | undefined;
  /** The fault applied to it, if any. */
  readonly fault: FaultAction['kind'] | undefined;
  readonly at: number;
}

export interface FaultProxy {
  readonly url: string;
  /** The API server's kubeconfig with the server URL pointing at the proxy. */
  readonly kubeconfigPath: string;
  /** Every request that reached the proxy, oldest first (the last 100,000). */
  readonly requests: readonly ProxiedRequest[];
  /** Adds a fault; the returned function removes it. */
  inject(fault: Fault): () => void;
  /** Removes every fault. */
  clear(): void;
  close(): Promise<void>;
}

const MAX_RECORDED = 100_000;

interface ActiveFault {
  readonly fault: Fault;
  remaining: number;
}

export async function startFaultProxy(plane: ControlPlane, name = 'proxy'): Promise<FaultProxy> {
  const certDir = join(plane.dir, 'certs');
  const cert = readFileSync(join(certDir, 'apiserver.crt'));
  const key = readFileSync(join(certDir, 'apiserver.key'));
  const upstream = new URL(plane.url);
  const agent = new https.Agent({ keepAlive: true, ca: cert });
  const faults: ActiveFault[] = [];
  const requests: ProxiedRequest[] = [];

  const faultFor = (method: string, path: string, query: string): FaultAction | undefined => {
    for (const active of faults) {
      const { fault } = active;
      if (active.remaining <= 0) continue;
      if (fault.method && fault.method !== method) continue;
      if (fault.path && !fault.path.test(path)) continue;
      if (fault.query && !fault.query.test(query)) continue;
      active.remaining--;
      return fault.action;
    }
    return undefined;
  };

  const forward = (req: IncomingMessage, res: ServerResponse, record: ProxiedRequest) => {
    const out = https.request(
      { host: upstream.hostname, port: upstream.port, method: req.method, path: req.url, headers: { ...req.headers, host: upstream.host }, agent },
      (answer) => {
        record.status = answer.statusCode;
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
        answer.once('error', () => res.destroy());
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
    const record: ProxiedRequest = { method, path, query, status: undefined, fault: action?.kind, at: Date.now() };
    requests.push(record);
    if (requests.length > MAX_RECORDED) requests.splice(0, requests.length - MAX_RECORDED);
    if (!action) return forward(req, res, record);
    switch (action.kind) {
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

  const kubeconfigPath = join(plane.dir, `kubeconfig-${name}.yaml`);
  writeFileSync(kubeconfigPath, readFileSync(plane.kubeconfigPath, 'utf8').replace(plane.url, url));

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
