/**
 * For unit tests of what relsync does with an answer's text (its size, what it says it takes once
 * parsed): a plain HTTP server on loopback that answers the LIST of one path from objects given as
 * JSON text, page by page as a kube-apiserver does (`limit`, `continue`: here the index to go on
 * from), and as metadata only when the request's Accept asks for a PartialObjectMetadataList. Any
 * other path answers the text set for it. With a kubeconfig for a Connection. Real answers from a
 * real API server: the end-to-end tests.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export interface ListServer {
  readonly kubeconfig: string;
  /** The objects of the LIST, as JSON text, in order. */
  objects: string[];
  /** Answers to other paths (a GET), by path. */
  readonly texts: Map<string, string>;
  /** Whether a metadata-only LIST is answered (a server that cannot: 406). */
  metadataOnly: boolean;
  /** Each request: its path with query, and its Accept header. */
  readonly requests: Array<{ readonly url: string; readonly accept: string }>;
  close(): Promise<void>;
}

export async function startListServer(path: string): Promise<ListServer> {
  const state: Omit<ListServer, 'kubeconfig' | 'close'> = { objects: [], texts: new Map(), metadataOnly: true, requests: [] };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const accept = req.headers.accept ?? '';
    state.requests.push({ url: req.url ?? '', accept });
    const text = state.texts.get(url.pathname);
    if (text !== undefined) return void res.end(text);
    if (url.pathname !== path) {
      res.writeHead(404, { 'content-type': 'application/json' });
      return void res.end(JSON.stringify({ kind: 'Status', code: 404 }));
    }
    const metadata = accept.includes('as=PartialObjectMetadataList');
    if (metadata && !state.metadataOnly) {
      res.writeHead(406, { 'content-type': 'application/json' });
      return void res.end(JSON.stringify({ kind: 'Status', code: 406 }));
    }
    const from = Number(url.searchParams.get('continue') ?? '0');
    const limit = Number(url.searchParams.get('limit') ?? String(state.objects.length));
    const page = state.objects.slice(from, from + limit);
    const next = from + page.length < state.objects.length ? String(from + page.length) : '';
    const items = metadata ? page.map((o) => JSON.stringify({ kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: (JSON.parse(o) as { metadata: unknown }).metadata })) : page;
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(`{"kind":"${metadata ? 'PartialObjectMetadataList' : 'List'}","metadata":{"resourceVersion":"7","continue":"${next}"},"items":[${items.join(',')}]}`);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const kubeconfig = localKubeconfig(server, 'relsync-list-server-');
  return Object.assign(state, {
    kubeconfig,
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  });
}

/** A kubeconfig (in a new temporary folder named from `prefix`) for a local plain-HTTP server, with a token. */
export function localKubeconfig(server: http.Server, prefix: string): string {
  const kubeconfig = join(mkdtempSync(join(tmpdir(), prefix)), 'kubeconfig');
  writeFileSync(kubeconfig, JSON.stringify({
    apiVersion: 'v1', kind: 'Config', 'current-context': 'c',
    clusters: [{ name: 'c', cluster: { server: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, 'insecure-skip-tls-verify': true } }],
    users: [{ name: 'u', user: { token: 't' } }],
    contexts: [{ name: 'c', context: { cluster: 'c', user: 'u' } }],
  }));
  return kubeconfig;
}

/** A ConfigMap-like object as JSON text; `junk` empty arrays make its text cheap and its parse costly (~43 bytes of heap said per character). */
export function objectText(name: string, junk = 0, labels: Record<string, string> = {}): string {
  return `{"metadata":{"name":"${name}","namespace":"team","resourceVersion":"5","labels":${JSON.stringify(labels)}},"data":{"junk":[${Array(junk).fill('[]').join(',')}]}}`;
}
