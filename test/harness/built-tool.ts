/**
 * Where a binary built by one of scripts/build-*.sh is: the folder run-tests.mjs names in an
 * environment variable, or the script's cache for the version the tests expect.
 */
import { existsSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';

export interface BuiltTool {
  /** The binary's name, which is also its cache folder under ~/.cache/relsync/. */
  readonly binary: string;
  readonly version: string;
  /** Set by run-tests.mjs to the folder that holds the binary. */
  readonly assetsEnv: string;
  /** Overrides the cache root, as the script reads it. */
  readonly cacheEnv: string;
  readonly script: string;
}

export function builtToolPath(tool: BuiltTool): string {
  const cache = process.env[tool.cacheEnv] ?? join(process.env.XDG_CACHE_HOME ?? join(homedir(), '.cache'), 'relsync', tool.binary);
  for (const dir of [process.env[tool.assetsEnv], join(cache, tool.version)]) if (dir && existsSync(join(dir, tool.binary))) return join(dir, tool.binary);
  throw new Error(`no ${tool.binary} binary found (${tool.assetsEnv}=${process.env[tool.assetsEnv] ?? '<unset>'}, cache for ${tool.version}); build it with 'bash ${tool.script}'`);
}
