/** The helm binary for the chart's test (scripts/build-helm.sh). */
import { builtToolPath } from './built-tool.js';

export const HELM_VERSION = 'v4.3.2';

export function helmPath(): string {
  return builtToolPath({ binary: 'helm', version: HELM_VERSION, assetsEnv: 'RELSYNC_HELM_ASSETS', cacheEnv: 'RELSYNC_HELM_CACHE', script: 'scripts/build-helm.sh' });
}
