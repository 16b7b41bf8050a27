// /healthz answers what a liveness probe needs: 200 while relsync works, 503
// naming the dead or stuck watch when a restart would help; /readyz says what
// it waits for.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import pino from 'pino';
import { Registry } from 'prom-client';
import { HttpServer } from '../../../src/server/http-server.js';

describe('health endpoints', () => {
  it('/healthz fails with the reason when a watch is dead or stuck, /readyz lists what is not ready', async () => {
    let dead: string[] = [];
    let waiting: string[] = ['watch service/configmaps is not in sync'];
    const stop = new AbortController();
    let port = 0;
    const server = new HttpServer({
      port: 0,
      host: '127.0.0.1',
      registry: new Registry(),
      logger: pino({ level: 'silent' }),
      readiness: { notReady: () => waiting, notLive: () => dead, role: () => 'leader' },
    });
    const running = server.start(stop.signal, (p) => (port = p));
    try {
      while (port === 0) await new Promise((r) => setTimeout(r, 10));
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
      stop.abort();
      await running;
    }
  });

  it('answers a failed /metrics with 500 and no internal text (the reason goes to the log)', async () => {
    const stop = new AbortController();
    let port = 0;
    const lines: string[] = [];
    const server = new HttpServer({
      port: 0,
      host: '127.0.0.1',
      registry: new Registry(),
      logger: pino({ level: 'error' }, { write: (l: string) => void lines.push(l) }),
      readiness: { notReady: () => [], notLive: () => [], role: () => 'leader' },
      beforeScrape: async () => {
        throw new Error('SQLITE_CORRUPT at /var/lib/relsync/relsync.db, tenant-a/shop');
      },
    });
    const running = server.start(stop.signal, (p) => (port = p));
    try {
      while (port === 0) await new Promise((r) => setTimeout(r, 10));
      const res = await fetch(`http://127.0.0.1:${port}/metrics`);
      const body = await res.text();
      assert.equal(res.status, 500);
      assert.doesNotMatch(body, /SQLITE|relsync\.db|tenant-a/);
      assert.ok(lines.some((l) => l.includes('SQLITE_CORRUPT')), 'the reason is in the log');
    } finally {
      stop.abort();
      await running;
    }
  });
});
