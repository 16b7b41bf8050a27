// Which shard a platform cluster is in: configured clusters dealt round-robin
// by name (six over three: two each, whatever their order in the config), kcp
// logical clusters by a hash of their name; and a fingerprint that changes
// whenever the map would.
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import { ShardMap } from '../../../src/config/shard-map.js';
import type { ClusterConfig } from '../../../src/kube/cluster-config.js';

const plain = (name: string): ClusterConfig => ({ name, kubeconfig: `/k/${name}`, context: undefined });
const kcp = (name: string): ClusterConfig => ({ ...plain(name), kcp: { endpointSlice: 'slice', url: undefined } });

describe('shard map', () => {
  it('deals configured clusters round-robin by name, whatever their order', () => {
    const names = ['f', 'b', 'e', 'a', 'd', 'c'];
    const map = new ShardMap(3, names.map(plain));
    assert.deepEqual(['a', 'b', 'c', 'd', 'e', 'f'].map((n) => map.shardOf(n)), [0, 1, 2, 0, 1, 2]);
    assert.equal(new ShardMap(3, [...names].reverse().map(plain)).fingerprint, map.fingerprint, 'the order in the config does not matter');
    assert.deepEqual(map.platformsOf(1, names.map(plain)).map((c) => c.name).sort(), ['b', 'e']);
  });

  it('puts every kcp platform in every shard, and spreads logical clusters by name', () => {
    const clusters = [plain('a'), kcp('root')];
    const map = new ShardMap(4, clusters);
    for (let s = 0; s < 4; s++) assert.ok(map.platformsOf(s, clusters).some((c) => c.name === 'root'));
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 400; i++) counts[map.shardOf(`2abc${i.toString(36)}`)]!++;
    assert.ok(counts.every((n) => n > 60), `spread ${counts.join(',')}`);
    assert.equal(map.shardOf('2abcx'), new ShardMap(4, clusters).shardOf('2abcx'), 'every replica computes the same');
  });

  it('changes its fingerprint when the shards or the clusters change', () => {
    const base = new ShardMap(3, [plain('a'), plain('b')]).fingerprint;
    assert.notEqual(new ShardMap(4, [plain('a'), plain('b')]).fingerprint, base);
    assert.notEqual(new ShardMap(3, [plain('a'), plain('b'), plain('c')]).fingerprint, base);
    assert.notEqual(new ShardMap(3, [plain('a'), kcp('b')]).fingerprint, base);
  });
});
