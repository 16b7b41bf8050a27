import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

/** `relsync demo`: runs `npm run demo` in the repository this CLI was built from. */
export function demoCommand(): void {
  const root = fileURLToPath(new URL('../../../', import.meta.url));
  if (!existsSync(`${root}scripts/build-control-plane.sh`) || !existsSync(`${root}test/demo/demo.ts`)) {
    console.error('relsync demo runs from a clone of the relsync repository (it builds local control planes with Go): clone it, then `npm ci && npm run demo`.');
    process.exit(2);
  }
  const child = spawn('npm', ['run', 'demo'], { cwd: root, stdio: 'inherit' });
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.on(signal, () => child.kill(signal));
  child.on('exit', (code) => process.exit(code ?? 1));
}
