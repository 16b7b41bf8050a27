/** The promtool binary for the monitoring test (scripts/build-promtool.sh). */
import { builtToolPath } from './built-tool.js';

/** Prometheus 3.16.0, as its Go module numbers it. */
export const PROMETHEUS_VERSION = 'v0.316.0';

export function promtoolPath(): string {
  return builtToolPath({ binary: 'promtool', version: PROMETHEUS_VERSION, assetsEnv: 'RELSYNC_PROMTOOL_ASSETS', cacheEnv: 'RELSYNC_PROMTOOL_CACHE', script: 'scripts/build-promtool.sh' });
}
