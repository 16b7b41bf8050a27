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
export function importPublishedResources(input: unknown, file: string): { problems: ConfigProblem[]; notices: ConfigNotice[]; rename: (p: ConfigProblem) => ConfigProblem } {
  const none = { problems: [], notices: [], rename: (p: ConfigProblem) => p };
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
  const rename = (p: ConfigProblem): ConfigProblem => {
    const m = /^resources\[(\d+)\](.*)$/.exec(p.path);
    const origin = m ? origins[Number(m[1])] : undefined;
    return origin ? { path: `${origin} (as resources[${m![1]}]${m![2]})`, message: p.message } : p;
  };
  return { problems, notices, rename };
}
