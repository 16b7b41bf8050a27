/**
 * The PublishedResource manifests that `publishedResourceFiles` names, read
 * into `resources` before validation, so that they are checked and compiled
 * exactly like relsync's own entries (published-resource.ts translates one
 * manifest). A problem in an imported entry is pointed back at its file and
 * document: the user never wrote `resources[3]`.
 */
import { readFileSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import type { ConfigNotice, ConfigProblem } from './config-problem.js';
import { publishedResourcesFromYaml } from './published-resource.js';

/**
 * Appends the PublishedResources of `publishedResourceFiles` to `resources`
 * (in place, before validation). `rename` points a problem in an appended
 * entry back at its file and document; `notices` say what was read and not
 * synced on purpose.
 */
export function importPublishedResources(input: unknown, file: string): { problems: ConfigProblem[]; notices: ConfigNotice[]; rename: (p: ConfigProblem) => ConfigProblem; importedAs: ReadonlyMap<string, string> } {
  const none = { problems: [], notices: [], rename: (p: ConfigProblem) => p, importedAs: new Map<string, string>() };
  if (!input || typeof input !== 'object' || Array.isArray(input)) return none;
  const cfg = input as Record<string, unknown>;
  if (!Array.isArray(cfg.publishedResourceFiles)) return none;
  const own = Array.isArray(cfg.resources) ? cfg.resources : cfg.resources === undefined ? [] : undefined;
  if (!own) return none; // the schema reports the wrong type of "resources"
  const problems: ConfigProblem[] = [];
  const notices: ConfigNotice[] = [];
  const origins: string[] = [];
  cfg.publishedResourceFiles.forEach((entry, i) => {
    if (typeof entry !== 'string') return; // the schema reports it
    const where = `publishedResourceFiles[${i}] (${entry})`;
    const path = isAbsolute(entry) ? entry : resolve(dirname(file), entry);
    let text: string;
    try {
      text = readFileSync(path, 'utf8');
    } catch (err) {
      problems.push({ path: `publishedResourceFiles[${i}]`, message: `cannot read ${path}: ${(err as Error).message}` });
      return;
    }
    const { resources, problems: found, notices: noted } = publishedResourcesFromYaml(text, where);
    problems.push(...found);
    notices.push(...noted);
    resources.forEach((r, k) => {
      own.push(r);
      origins[own.length - 1] = `${where} PublishedResource ${k + 1}`;
    });
  });
  cfg.resources = own;
  const importedAs = new Map(origins.flatMap((origin, i) => (origin !== undefined ? [[`resources[${i}]`, origin] as const] : [])));
  const rename = (p: ConfigProblem): ConfigProblem => ({ path: importedPath(importedAs, p.path), message: p.message });
  return { problems, notices, rename, importedAs };
}

/**
 * A config path as the user wrote it: `resources[3].related[0]` of an imported manifest becomes
 * `publishedResourceFiles[0] (x.yaml) PublishedResource 1 (as resources[3].related[0])`.
 */
export function importedPath(importedAs: ReadonlyMap<string, string> | undefined, path: string): string {
  const m = /^(resources\[\d+\])(.*)$/.exec(path);
  const origin = m ? importedAs?.get(m[1]!) : undefined;
  return origin ? `${origin} (as ${path})` : path;
}
