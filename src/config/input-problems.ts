/**
 * Problems of the raw input, before compiling: the schema's, with the path
 * of the field as the user wrote it, and the duplicates the schema cannot
 * see. Found together, so that one run reports them all.
 */
import type { z } from 'zod';
import type { ConfigProblem } from './config-problem.js';

/** Duplicate cluster names and duplicate rule ids within a resource. */
export function duplicateProblems(input: unknown): ConfigProblem[] {
  const problems: ConfigProblem[] = [];
  const record = (v: unknown): Record<string, unknown> => (v && typeof v === 'object' && !Array.isArray(v) ? (v as Record<string, unknown>) : {});
  const list = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
  const cfg = record(input);
  const clusters = new Map<string, string>();
  list(cfg.platformClusters).forEach((c, i) => {
    const name = record(c).name;
    if (typeof name !== 'string') return;
    const first = clusters.get(name);
    if (first) problems.push({ path: `platformClusters[${i}].name`, message: `duplicate cluster name "${name}" (also ${first})` });
    else clusters.set(name, `platformClusters[${i}]`);
  });
  const serviceName = record(cfg.serviceCluster).name ?? 'service';
  if (typeof serviceName === 'string' && clusters.has(serviceName)) {
    problems.push({ path: 'serviceCluster.name', message: `"${serviceName}" is also the name of ${clusters.get(serviceName)}; name the service cluster differently` });
  }
  list(cfg.resources).forEach((res, i) => {
    const ids = new Map<string, number>();
    list(record(res).related).forEach((rule, j) => {
      const id = record(rule).id;
      if (typeof id !== 'string') return;
      const first = ids.get(id);
      if (first !== undefined) problems.push({ path: `resources[${i}].related[${j}].id`, message: `duplicate rule id "${id}" (also related[${first}])` });
      else ids.set(id, j);
    });
  });
  return problems;
}

export function zodProblems(error: z.ZodError): ConfigProblem[] {
  return error.issues.map((issue) => ({ path: formatPath(issue.path), message: issue.message }));
}

export function formatPath(path: ReadonlyArray<PropertyKey>): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else out += out ? `.${String(part)}` : String(part);
  }
  return out;
}
