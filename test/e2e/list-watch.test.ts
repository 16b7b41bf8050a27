// relsync's list/watch loop on a real API server: it resumes from a stored
// resourceVersion without listing, lists again (and says so) when that
// version has expired (410 Gone), and a handler that throws makes it list
// again, so that the event it failed on is not lost.
import assert from 'node:assert/strict';
import { after, before, describe, it } from 'node:test';
import pino from 'pino';
import { Connection } from '../../src/kube/connection.js';
import { ListWatch, type ChangeType, type ListSink } from '../../src/kube/list-watch.js';
import type { KubeObject } from '../../src/core/object.js';
import { ResourceClient } from '../../src/kube/resource-client.js';
import { compactEtcd, startControlPlane, type ControlPlane } from '../harness/control-plane.js';
import { eventually } from '../harness/kube.js';
import { ClusterClient } from '../harness/tenant.js';

const configMaps = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
const logger = pino({ level: 'silent' });

/** What a loop handed over: events, and each complete list's names. */
class Recorder {
  readonly events: string[] = [];
  readonly lists: string[][] = [];
  relists = 0;
  failOn: string | undefined;
  onEvent = async (change: ChangeType, object: KubeObject) => {
    const name = object.metadata.name ?? '';
    if (name === this.failOn) {
      this.failOn = undefined;
      throw new Error('a handler that fails once');
    }
    if (object.metadata.namespace === 'lw') this.events.push(`${change} ${name}`);
  };
  beginList = (): ListSink => {
    const names: string[] = [];
    return {
      page: async (items) => void names.push(...items.filter((o) => o.metadata.namespace === 'lw').map((o) => o.metadata.name ?? '')),
      end: async () => void this.lists.push(names.sort()),
    };
  };
}

describe('the list/watch loop (real API server)', () => {
  let plane: ControlPlane;
  let cluster: ClusterClient;
  const stop = new AbortController();
  const client = () => new ResourceClient(new Connection({ name: 'lw', kubeconfig: plane.kubeconfigPath }), configMaps);
  const loop = (r: Recorder, resumeFrom?: string) =>
    new ListWatch({ client: client(), logger, handler: { onEvent: r.onEvent, beginList: r.beginList }, resumeFrom, timeoutSeconds: 5, onRelist: () => void r.relists++ });

  before(async () => {
    plane = await startControlPlane('list-watch');
    cluster = new ClusterClient('lw', plane.kubeConfig);
    await cluster.ensureNamespace('lw');
    await cluster.putConfigMap('lw', 'a', { v: '1' });
  });
  after(async () => {
    stop.abort();
    await plane?.stop();
  });

  it('resumes from a stored resourceVersion without listing, and delivers what changed since', async () => {
    const rv = (await client().listPage({ limit: 1 })).resourceVersion;
    await cluster.putConfigMap('lw', 'b', { v: '1' });
    const r = new Recorder();
    void loop(r, rv).start(stop.signal);
    await eventually('b delivered', async () => r.events.includes('ADDED b') || undefined, 15_000);
    assert.deepEqual(r.lists, [], 'no LIST: the stored version was still good');
    assert.ok(!r.events.includes('ADDED a'), 'nothing from before the stored version');
  });

  it('lists again when its stored resourceVersion has expired (410 Gone), and says so', async () => {
    const old = (await client().listPage({ limit: 1 })).resourceVersion;
    for (let i = 0; i < 3; i++) await cluster.putConfigMap('lw', `c${i}`, { v: '1' });
    await compactEtcd(plane);
    await plane.restartApiServer(); // its watch cache forgets the compacted versions
    const r = new Recorder();
    void loop(r, old).start(stop.signal);
    await eventually('a complete list', async () => r.lists[0], 30_000);
    assert.equal(r.relists, 1, 'the relist is counted');
    for (const name of ['a', 'c0', 'c1', 'c2']) assert.ok(r.lists[0]!.includes(name), `${name} in the relist`);
  });

  it('lists again after a handler threw, so the event it failed on is not lost', async () => {
    const r = new Recorder();
    void loop(r).start(stop.signal);
    await eventually('the first list', async () => r.lists[0], 15_000);
    r.failOn = 'd';
    await cluster.putConfigMap('lw', 'd', { v: '1' });
    await eventually('a second list, with d', async () => (r.lists.length >= 2 ? r.lists[1] : undefined), 30_000);
    assert.ok(r.lists[1]!.includes('d'), 'd is in the list after the failure');
    await cluster.putConfigMap('lw', 'e', { v: '1' });
    await eventually('and the loop watches on', async () => r.events.includes('ADDED e') || undefined, 15_000);
  });
});
