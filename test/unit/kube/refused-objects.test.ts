// One object too costly to parse, alone on its page (a custom resource of empty arrays where
// etcd's request limit was raised, or a tenant's own API server): the LIST refuses it alone, by
// the name its metadata-only page says, and goes on, instead of failing at every page size down
// to one, which stopped the type's watch and sweeps for every tenant of the cluster. Through the
// real Connection (its text check, its Accept header) against a local HTTP server. On a real
// API server: test/e2e/parse-cap.test.ts.
import assert from 'node:assert/strict';
import { after, before, beforeEach, describe, it } from 'node:test';
import { AnswerTooCostlyError, Connection } from '../../../src/kube/connection.js';
import { ResourceClient, type ListPage } from '../../../src/kube/resource-client.js';
import { LiveReads } from '../../../src/cache/object-reads.js';
import { objectText, startListServer, type ListServer } from '../../harness/list-server.js';

const configMaps = { group: '', version: 'v1', resource: 'configmaps', kind: 'ConfigMap', namespaced: true };
/** 1.2 million empty arrays: 3.6 MiB of text that says ~150 MiB once parsed. */
const COSTLY = 1_200_000;
/** What a kube-apiserver answers with a PartialObjectMetadataList. */
const METADATA_ONLY = 'application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1';

describe('an object too costly to parse, alone on its page', () => {
  let server: ListServer;

  before(async () => {
    server = await startListServer('/api/v1/configmaps');
  });
  after(async () => {
    await server.close();
  });
  beforeEach(() => {
    server.requests.length = 0;
    server.metadataOnly = true;
    server.objects = [
      ...Array.from({ length: 30 }, (_, i) => objectText(`a${i}`)),
      objectText('costly', COSTLY, { app: 'x' }),
      ...Array.from({ length: 30 }, (_, i) => objectText(`b${i}`)),
    ];
  });

  const list = async (): Promise<ListPage[]> => {
    const connection = new Connection({ name: 'c', kubeconfig: server.kubeconfig });
    try {
      const pages: ListPage[] = [];
      for await (const page of new ResourceClient(connection, configMaps).pages()) pages.push(page);
      return pages;
    } finally {
      connection.close();
    }
  };

  it('is refused alone, named by its metadata, and the list goes on to its end', async () => {
    const pages = await list();
    const names = pages.flatMap((p) => p.items.map((o) => o.metadata.name));
    assert.deepEqual(names, [...Array.from({ length: 30 }, (_, i) => `a${i}`), ...Array.from({ length: 30 }, (_, i) => `b${i}`)], 'every neighbour, once, in order');
    const refused = pages.flatMap((p) => p.refused ?? []);
    assert.equal(refused.length, 1);
    const [only] = refused;
    assert.deepEqual(only!.object, { apiVersion: 'v1', kind: 'ConfigMap', metadata: { name: 'costly', namespace: 'team', resourceVersion: '5' } }, 'its identity (nothing else of its metadata is kept), as the type\'s object');
    assert.match(only!.why, /GET \/api\/v1\/configmaps: the answer \(\d+ bytes\) would take about \d+ MiB of memory once parsed, more than 72 MiB \(limits.parsedBytes\)/);
    const metadataAsked = server.requests.filter((r) => r.accept === METADATA_ONLY);
    assert.equal(metadataAsked.length, 1, 'its page asked for again once, as metadata only');
    assert.match(metadataAsked[0]!.url, /limit=1&continue=30/, 'that page: one object, from where the list was');
  });

  it("fails a rule's LIST that meets it, naming it: what it holds cannot be told, so no answer without it is complete", async () => {
    const connection = new Connection({ name: 'c', kubeconfig: server.kubeconfig });
    try {
      const reads = new LiveReads({ client: (_cluster, type) => new ResourceClient(connection, type) });
      await assert.rejects(reads.list('tenant-a', configMaps, {}), /^Error: configmaps team\/costly in tenant-a is not read: GET \/api\/v1\/configmaps: .* more than 72 MiB \(limits\.parsedBytes\)/);
    } finally {
      connection.close();
    }
  });

  it('refuses alone an object whose metadata alone says more than limits.parsedBytes (a megabyte of tiny labels)', async () => {
    const labels = Object.fromEntries(Array.from({ length: 120_000 }, (_, i) => [`k${i}`, '']));
    server.objects[30] = objectText('costly', COSTLY, labels);
    const connection = new Connection({ name: 'c', kubeconfig: server.kubeconfig, maxParsedBytes: 16 * 1024 * 1024 });
    try {
      const pages: ListPage[] = [];
      for await (const page of new ResourceClient(connection, configMaps).pages()) pages.push(page);
      assert.equal(pages.flatMap((p) => p.items).length, 60, 'every neighbour');
      assert.deepEqual(pages.flatMap((p) => p.refused ?? []).map((r) => r.object.metadata), [{ name: 'costly', namespace: 'team', resourceVersion: '5' }], 'refused by name, its labels not kept');
    } finally {
      connection.close();
    }
  });

  it("fails listAll(), whose callers take what a list lacks for gone", async () => {
    const connection = new Connection({ name: 'c', kubeconfig: server.kubeconfig });
    try {
      await assert.rejects(new ResourceClient(connection, configMaps).listAll(), /^Error: LIST \/api\/v1\/configmaps of c: .*limits\.parsedBytes.*; the whole list is not known/);
    } finally {
      connection.close();
    }
  });

  it('ends the list as before when the server cannot answer with metadata only', async () => {
    server.metadataOnly = false;
    await assert.rejects(list(), AnswerTooCostlyError);
  });
});
