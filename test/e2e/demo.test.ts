// `npm run demo` works end to end: control planes up, a related change shown
// arriving, the store's view printed, and everything cleaned up on Ctrl-C.
import assert from 'node:assert/strict';
import { spawn, spawnSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, it } from 'node:test';
import { eventually } from '../harness/kube.js';

const script = fileURLToPath(new URL('../demo/demo.js', import.meta.url));

describe('demo', () => {
  it('shows a related change arriving and cleans up on SIGINT', async () => {
    const child = spawn(process.execPath, [script], { stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, NO_COLOR: '1' } });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));
    try {
      await eventually('the demo hands over to the user', async () => out.includes('press Ctrl-C'), 90_000);
    } finally {
      child.kill('SIGINT');
    }
    assert.equal(await exited, 0, out);
    assert.match(out, /arrived in the service cluster after \d+ ms: data \{"mode":"safe"\}/);
    assert.match(out, /"rule":"credentials","origin":"service"/);
    const dir = /removed (\S+)/.exec(out)?.[1];
    assert.ok(dir && !existsSync(dir), 'the demo folder is removed');
    const leftovers = spawnSync('pgrep', ['-f', 'relsync-cp-platform'], { encoding: 'utf8' });
    assert.equal(leftovers.stdout.trim(), '', 'no control-plane process of the demo is left');
  });
});
