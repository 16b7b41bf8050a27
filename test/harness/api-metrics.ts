/**
 * What a real API server says it served: its own request counter
 * (`apiserver_request_total` on /metrics), read with the admin token. Tests
 * use it to count the writes a step caused ("a sweep over a converged system
 * writes nothing"), without trusting relsync's own metrics.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import { join } from 'node:path';
import type { ControlPlane } from './control-plane.js';

const WRITE_VERBS = new Set(['POST', 'PUT', 'PATCH', 'DELETE', 'DELETECOLLECTION', 'APPLY']);

/** Write requests by `VERB resource[.group][/subresource]`, counted since the API server started. */
export function writeCounts(plane: ControlPlane): Promise<Map<string, number>> {
  return requestCounts(plane, WRITE_VERBS);
}

/** Requests of these verbs (GET, LIST, WATCH, POST, …) by `VERB resource[.group][/subresource]`, counted since the API server started. */
export async function requestCounts(plane: ControlPlane, verbs: ReadonlySet<string>): Promise<Map<string, number>> {
  const text = await get(plane, '/metrics');
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (!line.startsWith('apiserver_request_total{')) continue;
    const labels = Object.fromEntries([...line.matchAll(/(\w+)="([^"]*)"/g)].map((m) => [m[1], m[2]]));
    if (!verbs.has(labels.verb ?? '')) continue;
    const type = `${labels.resource}${labels.group ? `.${labels.group}` : ''}${labels.subresource ? `/${labels.subresource}` : ''}`;
    const key = `${labels.verb} ${type}`;
    counts.set(key, (counts.get(key) ?? 0) + Number(line.slice(line.lastIndexOf(' ') + 1)));
  }
  return counts;
}

/**
 * The requests between two counts to objects of these types (`resource` or
 * `resource.group`; subresources count with their type), as sorted
 * `VERB type ×n` lines. The API server writes some objects itself (its
 * Leases, the kubernetes Service's endpoints), so a test names the types it
 * watches.
 */
export function requestsBetween(before: Map<string, number>, after: Map<string, number>, types: readonly string[]): string[] {
  const lines: string[] = [];
  for (const [key, n] of after) {
    const type = key.slice(key.indexOf(' ') + 1).split('/')[0]!;
    if (!types.includes(type)) continue;
    const diff = n - (before.get(key) ?? 0);
    if (diff > 0) lines.push(`${key} ×${diff}`);
  }
  return lines.sort();
}

function get(plane: ControlPlane, path: string): Promise<string> {
  const ca = readFileSync(join(plane.dir, 'certs', 'apiserver.crt'));
  return new Promise((resolve, reject) => {
    const req = https.get(`${plane.url}${path}`, { headers: { Authorization: `Bearer ${plane.token}` }, ca, timeout: 10_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => (res.statusCode === 200 ? resolve(body) : reject(new Error(`GET ${path}: ${res.statusCode}`))));
    });
    req.on('timeout', () => req.destroy(new Error(`GET ${path}: timed out`)));
    req.on('error', reject);
  });
}
