/**
 * The helm binary for the chart's test: RELSYNC_HELM_ASSETS (set by run-tests.mjs) or the
 * build cache of scripts/build-helm.sh.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export const HELM_VERSION = 'v4.3.2';

export function helmPath(): string {
  const cache = process.env.RELSYNC_HELM_CACHE ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'relsync', 'helm');
  const candidates = [process.env.RELSYNC_HELM_ASSETS, join(cache, HELM_VERSION)];
  for (const dir of candidates) if (dir && existsSync(join(dir, 'helm'))) return join(dir, 'helm');
  throw new Error(`no helm binary found (RELSYNC_HELM_ASSETS=${process.env.RELSYNC_HELM_ASSETS ?? '<unset>'}, cache for ${HELM_VERSION}); build it with 'bash scripts/build-helm.sh'`);
}
