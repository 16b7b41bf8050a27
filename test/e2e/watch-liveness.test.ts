// The liveness probe's view of a watch, on a real API server: a watch whose
// handler never returns is stuck (restart me); one whose API server is down
// keeps retrying and stays alive (a restart would not help: readiness says
// it is not in sync); one that ended without being stopped is dead.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { Connection } from '../../src/kube/connection.js';
import { ListWatch, wholeList, type WatchHandler } from '../../src/kube/list-watch.js';
import { ResourceClient } from '../../src/kube/resource-client.js';
import { startControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { eventually } from '../harness/kube.js';
import { ClusterClient } from '../harness/tenant.js';

const configMaps = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
const logger = pino({ level: 'silent' });

describe('a watch as the liveness probe sees it', () => {
  let plane: ControlPlane;
  let cluster: ClusterClient;
  const stop = new AbortController();

  before(async () => {
    plane = await startControlPlane('liveness');
    cluster = new ClusterClient('liveness', plane.kubeConfig);
    await cluster.ensureNamespace('team');
  });
  after(async () => {
    stop.abort();
    await plane?.stop();
  });

  const watch = (handler: Partial<WatchHandler>, extra: { stuckAfterMs?: number; failureGraceMs?: number; onReconnect?: (reason: string) => void } = {}) =>
    new ListWatch({
      client: new ResourceClient(new Connection({ name: 'liveness', kubeconfig: plane.kubeconfigPath, requestTimeoutMs: 2_000 }), configMaps),
      logger,
      handler: { onEvent: async () => undefined, beginList: () => wholeList(async () => undefined), ...handler },
      timeoutSeconds: 2,
      watchdogMs: 3_000,
      ...extra,
    });

  it('is stuck when its handler never returns, and only then', async () => {
    const seen: string[] = [];
    const hanging = watch({
      onEvent: (_change, object) => {
        seen.push(object.metadata.name ?? '');
        return object.metadata.name === 'hang' ? new Promise<void>(() => undefined) : Promise.resolve();
      },
    }, { stuckAfterMs: 5_000 });
    void hanging.start(stop.signal);
    await eventually('the watch in sync', async () => hanging.synced || undefined, 20_000);
    // Working: events come and go, and quiet periods (bookmarks, the server's timeout, the watchdog) are progress.
    await cluster.putConfigMap('team', 'fine', { v: '1' });
    await eventually('the event handled', async () => seen.includes('fine') || undefined, 10_000);
    await new Promise((r) => setTimeout(r, 7_000));
    assert.equal(hanging.problem(), undefined, 'a quiet watch is not stuck');
    await cluster.putConfigMap('team', 'hang', { v: '1' });
    await eventually('the hanging handler called', async () => seen.includes('hang') || undefined, 10_000);
    const problem = await eventually('the watch counted as stuck', async () => hanging.problem(), 15_000);
    assert.match(problem, /made no progress for \d+ s/);
  });

  it('stays alive while its API server is down, and is in sync again once it is back', async () => {
    const retrying = watch({}, { stuckAfterMs: 5_000, failureGraceMs: 1_000 });
    void retrying.start(stop.signal);
    await eventually('the watch in sync', async () => retrying.synced || undefined, 20_000);
    await plane.stopApiServer();
    try {
      await eventually('not in sync (readiness)', async () => !retrying.synced || undefined, 30_000);
      // Well past stuckAfterMs: retries are progress.
      await new Promise((r) => setTimeout(r, 8_000));
      assert.equal(retrying.problem(), undefined, 'an outage is not a reason to restart');
    } finally {
      await plane.startApiServer();
    }
    await eventually('in sync again', async () => retrying.synced || undefined, 60_000);
    assert.equal(retrying.problem(), undefined);
  });

  it('is dead when its loop ended without being stopped, and not when it was stopped', async () => {
    const own = new AbortController();
    const stopped = watch({});
    const run = stopped.start(own.signal);
    await eventually('the watch in sync', async () => stopped.synced || undefined, 20_000);
    own.abort();
    await run;
    assert.equal(stopped.problem(), undefined, 'stopped on purpose');
    // A loop that escapes (a bug in a callback outside every guard): start() returns while its signal is live.
    const escaping = watch(
      { beginList: () => { throw new Error('a list that fails'); } },
      { onReconnect: () => { throw new Error('a bug in the metrics callback'); } },
    );
    await escaping.start(stop.signal).catch(() => undefined);
    assert.match(escaping.problem() ?? '', /has stopped/);
  });
});
