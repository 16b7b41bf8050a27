/**
 * CPU time of the bench's processes, by name: its own (the floor clients run
 * in it) and its children's (etcd, kube-apiserver, relsync), read from
 * /proc. Two snapshots give what each spent in a phase, which says whether
 * relsync's time went to relsync or to the API servers it made work.
 */
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/** Linux's USER_HZ: /proc/PID/stat counts CPU time in 1/100 s. */
const TICKS_PER_SECOND = 100;

/** CPU seconds by pid, with the process's name. */
export type CpuSnapshot = Map<number, { name: string; seconds: number }>;

/**
 * The names the test harness gave the processes it started ("pid name" lines in
 * $RELSYNC_PID_DIR/started.log, e.g. kube-apiserver-platform), so that each cluster's API server
 * and etcd count apart.
 */
export function harnessNames(): Map<number, string> {
  const dir = process.env.RELSYNC_PID_DIR;
  const file = dir && join(dir, 'started.log');
  if (!file || !existsSync(file)) return new Map();
  return new Map(readFileSync(file, 'utf8').split('\n').filter(Boolean).map((line) => {
    const [pid, name] = line.split(' ');
    return [Number(pid), name ?? ''] as const;
  }));
}

export function cpuSnapshot(names: ReadonlyMap<number, string> = harnessNames()): CpuSnapshot {
  const snapshot: CpuSnapshot = new Map();
  const self = process.cpuUsage();
  snapshot.set(process.pid, { name: 'bench', seconds: (self.user + self.system) / 1e6 });
  for (const entry of readdirSync('/proc')) {
    const pid = Number(entry);
    if (!Number.isInteger(pid)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    } catch {
      continue; // exited meanwhile
    }
    // "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ')'.
    const close = stat.lastIndexOf(')');
    const fields = stat.slice(close + 2).split(' ');
    if (Number(fields[1]) !== process.pid) continue;
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    // utime and stime are fields 14 and 15 of stat, 12 and 13 after the comm.
    const seconds = (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
    snapshot.set(pid, { name: names.get(pid) ?? comm, seconds });
  }
  return snapshot;
}

/** CPU seconds spent between two snapshots, summed by name (a process that started meanwhile counts from zero). */
export function cpuSpent(before: CpuSnapshot, after: CpuSnapshot): Record<string, number> {
  const spent: Record<string, number> = {};
  for (const [pid, { name, seconds }] of after) {
    const delta = seconds - (before.get(pid)?.seconds ?? 0);
    spent[name] = Math.round(((spent[name] ?? 0) + delta) * 10) / 10;
  }
  return spent;
}

export function formatCpu(spent: Record<string, number>): string {
  return Object.entries(spent)
    .sort(([, a], [, b]) => b - a)
    .map(([name, s]) => `${name} ${s} s`)
    .join(', ');
}
