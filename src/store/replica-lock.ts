/**
 * The replica a store belongs to. A relsync process that runs with a store
 * holds the store's replica lock for as long as it runs; the lock file keeps
 * the replica's leader-election identity across restarts. So a process that
 * restarts after a crash (SIGKILL, OOM) with the same store is the same
 * replica: the Lease still names it, and it leads again at once instead of
 * waiting a whole lease duration for its own stale record to expire.
 *
 * Two processes never share an identity: the lock is an exclusive SQLite
 * lock on `<store>.replica` (locking_mode=EXCLUSIVE keeps it after the first
 * write until the connection closes), which the operating system releases
 * when the process dies, however it dies. A second process on the same store
 * is refused; each replica needs a store of its own, on a local disk (file
 * locks over NFS are not to be trusted). The identity is kept only on the
 * host and at the path it was made for, so a copied store starts a new one,
 * and only on the same machine since its last boot (its boot id): a pod of a
 * StatefulSet rescheduled to another node keeps its name and its volume, and
 * the lock proves nothing across machines (the old pod may still run on a
 * partitioned node), so it starts as a new replica and waits for the Leases
 * its old identity holds to expire instead of writing beside it.
 */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { mkdirSync, readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { isoTime, systemClock, type Clock } from '../util/clock.js';

export class StoreInUseError extends Error {
  override name = 'StoreInUseError';
}

export interface ReplicaLock {
  /** This replica's identity in the leader Lease. */
  readonly identity: string;
  release(): void;
}

/** The machine and its boot: Linux's boot id, or the host name where there is none. */
export function machineBoot(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim() || hostname();
  } catch {
    return hostname();
  }
}

export function acquireReplicaLock(storePath: string, machine: string = machineBoot(), clock: Clock = systemClock): ReplicaLock {
  const path = `${storePath}.replica`;
  mkdirSync(dirname(resolve(path)), { recursive: true }); // as openStore does for the store
  const db = new Database(path);
  try {
    db.pragma('busy_timeout = 0');
    db.pragma('locking_mode = EXCLUSIVE');
    db.pragma('journal_mode = DELETE');
    const host = hostname();
    const where = resolve(storePath);
    const identity = db.transaction(() => {
      // replica_v2: with the machine's boot (a lock file of an older relsync starts a new identity once).
      db.exec('CREATE TABLE IF NOT EXISTS replica_v2 (id INTEGER PRIMARY KEY CHECK (id = 1), identity TEXT NOT NULL, host TEXT NOT NULL, store_path TEXT NOT NULL, machine TEXT NOT NULL, created_at TEXT NOT NULL)');
      const row = db.prepare('SELECT identity, host, store_path, machine FROM replica_v2 WHERE id = 1').get() as { identity: string; host: string; store_path: string; machine: string } | undefined;
      // A copied store (cp -r into another replica's volume, a restored backup, a cloned volume on
      // another pod) is not the same replica, nor is a volume that moved to another machine (or
      // outlived a reboot): only the same host, path and machine boot keep the identity.
      if (row && row.host === host && row.store_path === where && row.machine === machine) return row.identity;
      const fresh = `${host}-${randomBytes(4).toString('hex')}`;
      db.prepare('INSERT OR REPLACE INTO replica_v2 (id, identity, host, store_path, machine, created_at) VALUES (1, ?, ?, ?, ?, ?)').run(fresh, host, where, machine, isoTime(clock));
      return fresh;
    }).exclusive();
    return {
      identity,
      release: () => db.close(),
    };
  } catch (err) {
    db.close();
    if ((err as { code?: string }).code === 'SQLITE_BUSY') {
      throw new StoreInUseError(`the store ${storePath} is in use by another relsync process (${path} is locked); each replica needs a store of its own`);
    }
    throw err;
  }
}
