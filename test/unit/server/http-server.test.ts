// /healthz answers what a liveness probe needs: 200 while relsync works, 503
// naming the dead or stuck watch when a restart would help; /readyz says what
// it waits for.
import assert from 'node:assert/strict';
import { copyFileSync, mkdtempSync } from 'node:fs';
import https from 'node:https';
import { tmpdir } from 'node:os';
import type { TLSSocket } from 'node:tls';
import { join } from 'node:path';
import { describe, it } from 'node:test';
import pino from 'pino';
import { selfSignedCertificate } from '../../harness/certificates.js';
import { Registry } from 'prom-client';
import { HttpServer, type HttpServerOptions } from '../../../src/server/http-server.js';

/** A server on a free loopback port with `options` over the defaults; its log lines at `level` and up are kept. */
async function serving(options: Partial<HttpServerOptions> = {}, level = 'info'): Promise<{ port: number; lines: string[]; stop(): Promise<void> }> {
  const lines: string[] = [];
  const stop = new AbortController();
  let port = 0;
  const server = new HttpServer({
    port: 0,
    host: '127.0.0.1',
    registry: new Registry(),
    logger: pino({ level }, { write: (l: string) => void lines.push(l) }),
    readiness: { notReady: () => [], notLive: () => [], role: () => 'leader' },
    ...options,
  });
  const running = server.start(stop.signal, (p) => (port = p));
  while (port === 0) await new Promise((r) => setTimeout(r, 10));
  return { port, lines, stop: () => (stop.abort(), running) };
}

describe('health endpoints', () => {
  it('/healthz fails with the reason when a watch is dead or stuck, /readyz lists what is not ready', async () => {
    let dead: string[] = [];
    let waiting: string[] = ['watch service/configmaps is not in sync'];
    const { port, stop } = await serving({ readiness: { notReady: () => waiting, notLive: () => dead, role: () => 'leader' } });
    try {
      const get = async (path: string) => {
        const res = await fetch(`http://127.0.0.1:${port}${path}`);
        return { status: res.status, body: await res.text() };
      };
      assert.deepEqual(await get('/healthz'), { status: 200, body: 'ok\n' }, 'not ready is still alive');
      assert.deepEqual(await get('/readyz'), { status: 503, body: 'not ready: leader\n- watch service/configmaps is not in sync\n' });
      dead = ['watch service/configmaps made no progress for 400 s'];
      waiting = [];
      assert.deepEqual(await get('/healthz'), { status: 503, body: 'not alive:\n- watch service/configmaps made no progress for 400 s\n' });
      assert.deepEqual(await get('/readyz'), { status: 200, body: 'ok: leader\n' });
    } finally {
      await stop();
    }
  });

  it('answers a failed /metrics with 500 and no internal text (the reason goes to the log)', async () => {
    const { port, lines, stop } = await serving({
      beforeScrape: async () => {
        throw new Error('SQLITE_CORRUPT at /var/lib/relsync/relsync.db, tenant-a/shop');
      },
    }, 'error');
    try {
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      const body = await res.text();
      assert.equal(res.status, 500);
      assert.doesNotMatch(body, /SQLITE|relsync\.db|tenant-a/);
      assert.ok(lines.some((l) => l.includes('SQLITE_CORRUPT')), 'the reason is in the log');
    } finally {
      await stop();
    }
  });

  it('serves TLS with the given certificate, and a new one once its files change; a half-written pair is not taken', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'relsync-tls-'));
    const first = selfSignedCertificate(dir, 'first');
    const second = selfSignedCertificate(dir, 'second');
    const certFile = join(dir, 'tls.crt');
    const keyFile = join(dir, 'tls.key');
    copyFileSync(first.certFile, certFile);
    copyFileSync(first.keyFile, keyFile);
    const { port, lines, stop } = await serving({ authorizeMetrics: async () => undefined, tls: { certFile, keyFile, intervalMs: 50 } });
    // Each on a new connection, trusting both certificates: which one the server shows, and its answer.
    const served = () => new Promise<{ fingerprint: string; status: number }>((resolve, reject) => {
      https.get({ host: '127.0.0.1', port, path: '/healthz', ca: [first.pem, second.pem], agent: false }, (res) => {
        const fingerprint = (res.socket as TLSSocket).getPeerCertificate().fingerprint256;
        res.resume();
        res.on('end', () => resolve({ fingerprint, status: res.statusCode ?? 0 }));
      }).on('error', reject);
    });
    const until = async (what: string, check: () => Promise<boolean> | boolean) => {
      for (const started = Date.now(); !(await check()); await new Promise((r) => setTimeout(r, 20))) {
        if (Date.now() - started > 5000) assert.fail(`not within 5 s: ${what}`);
      }
    };
    try {
      assert.deepEqual(await served(), { fingerprint: first.fingerprint256, status: 200 });
      await assert.rejects(fetch(`http://127.0.0.1:${port}/healthz`), 'plain HTTP is not answered on a TLS port');
      // A rotation caught half-way: the new key beside the old certificate.
      copyFileSync(second.keyFile, keyFile);
      await until('a warning about the pair', () => lines.some((l) => l.includes('TLS certificate not reloaded') && l.includes(keyFile)));
      assert.equal((await served()).fingerprint, first.fingerprint256, 'the pair served stays');
      copyFileSync(second.certFile, certFile);
      await until('the new certificate served', async () => (await served()).fingerprint === second.fingerprint256);
      assert.ok(lines.some((l) => l.includes('TLS certificate reloaded')));
      assert.ok(!lines.some((l) => l.includes('BEGIN')), 'no key or certificate text in the log');
      assert.ok(!lines.some((l) => l.includes('plain HTTP')), 'no clear-text warning over TLS');
    } finally {
      await stop();
    }
  });

  it('warns at start when bearer tokens would reach the port over plain HTTP', async () => {
    for (const guarded of [true, false]) {
      const { lines, stop } = await serving(guarded ? { authorizeMetrics: async () => undefined } : {});
      await stop();
      // onListening is called after the warning would be written: the lines are complete.
      assert.equal(lines.some((l) => /"level":40.*plain HTTP/.test(l)), guarded, `guarded ${guarded}`);
    }
  });
});
