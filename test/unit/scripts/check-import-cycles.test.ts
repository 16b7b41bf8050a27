import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { after, describe, it } from 'node:test';
import { fileURLToPath } from 'node:url';

// dist/test/unit/scripts/ → the repository's scripts/ (the check is plain JavaScript, not compiled).
const script = fileURLToPath(new URL('../../../../scripts/check-import-cycles.mjs', import.meta.url));

describe('check-import-cycles', () => {
  const root = mkdtempSync(join(tmpdir(), 'relsync-cycles-'));
  after(() => rmSync(root, { recursive: true, force: true }));

  /** A made-up source tree of `files` (path → text), checked; what the check said. */
  function check(name: string, files: Record<string, string>) {
    const dir = join(root, name);
    for (const [path, text] of Object.entries(files)) {
      mkdirSync(dirname(join(dir, path)), { recursive: true });
      writeFileSync(join(dir, path), text);
    }
    const run = spawnSync(process.execPath, [script, dir], { encoding: 'utf8' });
    return { status: run.status, out: run.stdout + run.stderr, dir };
  }

  it('passes a tree whose imports only point one way', () => {
    const { status, out } = check('acyclic', {
      'a/wiring.ts': "import { relist } from './workspaces.js';\nimport type { Shape } from '../b/shape.js';\n",
      'a/workspaces.ts': "import type { Shape } from '../b/shape.js';\nexport const relist = 1;\n",
      'b/shape.ts': 'export interface Shape { readonly n: number }\n',
    });
    assert.equal(status, 0, out);
    assert.match(out, /no import cycle/);
  });

  it('fails on a cycle made only of a type-only import, naming each file and line', () => {
    // The shape of the cycle issue #37 found: wiring imports a function, the other file a type back.
    const { status, out, dir } = check('type-only', {
      'controller/wiring.ts': "// wiring\nimport { relist } from './workspaces.js';\nexport interface Wiring { readonly n: number }\n",
      'controller/workspaces.ts': "import type { Wiring } from './wiring.js';\nexport const relist = (w: Wiring) => w.n;\n",
    });
    assert.equal(status, 1, out);
    assert.ok(out.includes(`import cycle: ${dir}/controller/wiring.ts:2 → ${dir}/controller/workspaces.ts:1 → ${dir}/controller/wiring.ts`), out);
  });

  it('fails on a longer cycle through re-exports and folders, and on a file that imports itself', () => {
    // A multi-line import is named by the line of its path.
    const { status, out, dir } = check('longer', {
      'x/one.ts': "export { two } from '../y/two.js';\n",
      'y/two.ts': "export const two = 2;\nexport type { Three } from './three.js';\n",
      'y/three.ts': "import type {\n  One,\n} from '../x/one.js';\nexport type Three = One;\n",
      'z/self.ts': "import type { Me } from './self.js';\nexport type Me = { me?: Me };\n",
    });
    assert.equal(status, 1, out);
    assert.ok(out.includes(`import cycle: ${dir}/x/one.ts:1 → ${dir}/y/two.ts:2 → ${dir}/y/three.ts:3 → ${dir}/x/one.ts (3 files take part`), out);
    assert.ok(out.includes(`import cycle: ${dir}/z/self.ts:1 → ${dir}/z/self.ts`), out);
  });
});
