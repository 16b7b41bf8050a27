/**
 * The world most end-to-end files start from: a control plane per platform
 * cluster and one named `service` (startClusters: the Database CRD on each),
 * a relsync config naming them (tenantsConfig: agent "e2e", the store in a
 * folder of its own) with what the file adds, and relsync running it. So a
 * file states only what differs: its resources, a schedule, limits.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startClusters, tenantsConfig, type Clusters } from './clusters.js';
import { startRelsync, writeConfig, type RelsyncProcess } from './relsync-process.js';

export interface RelsyncFixture<P extends string> {
  readonly clusters: Clusters<P | 'service'>;
  /** The file's own folder: the config, the store and each run's log (relsync-1.log, relsync-2.log, …). */
  readonly dir: string;
  readonly configPath: string;
  /** The process started last. */
  readonly relsync: RelsyncProcess;
  /** Starts relsync again on the same config (after the test stopped it), logging to the next file. */
  restart(): Promise<RelsyncProcess>;
  /** Stops relsync (if it still runs) and every control plane. */
  stop(): Promise<void>;
}

/**
 * `label` names the temporary folder (relsync-e2e-<label>-…); `config` is laid over the shared
 * part, key by key. When relsync does not start, the control planes are stopped before it throws,
 * since the caller has nothing to stop them with.
 */
export async function startTenants<P extends string>(label: string, platforms: readonly P[], config: Record<string, unknown>): Promise<RelsyncFixture<P>> {
  const dir = mkdtempSync(join(tmpdir(), `relsync-e2e-${label}-`));
  const clusters = await startClusters<P | 'service'>(...platforms, 'service');
  try {
    const configPath = writeConfig(dir, { ...tenantsConfig(clusters, platforms, dir), ...config });
    let runs = 0;
    const start = () => startRelsync(configPath, join(dir, `relsync-${++runs}.log`));
    let relsync = await start();
    return {
      clusters,
      dir,
      configPath,
      get relsync() {
        return relsync;
      },
      async restart() {
        relsync = await start();
        return relsync;
      },
      async stop() {
        await relsync.stop();
        await clusters.stop();
      },
    };
  } catch (err) {
    await clusters.stop();
    throw err;
  }
}
