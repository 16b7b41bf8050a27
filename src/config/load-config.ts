/**
 * Reads the YAML config: parses it, imports the PublishedResource files it
 * names, validates it against the schema and compiles it. Every problem is
 * collected (not only the first) and reported as `path.to.field: what is
 * wrong`.
 */
import { readFileSync } from 'node:fs';
import { parseDocument } from 'yaml';
import { compileConfig } from './compile-config.js';
import type { Config } from './config.js';
import { ConfigError, type ConfigProblem } from './config-problem.js';
import { duplicateProblems, zodProblems } from './input-problems.js';
import { importPublishedResources } from './published-resource-files.js';
import { configSchema } from './schema.js';

export function loadConfig(file: string): Config {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new ConfigError(file, [{ path: '', message: `cannot read the file: ${(err as Error).message}` }]);
  }
  return parseConfig(text, file);
}

export function parseConfig(text: string, file: string): Config {
  const doc = parseDocument(text);
  if (doc.errors.length > 0) {
    throw new ConfigError(
      file,
      doc.errors.map((e) => ({ path: `line ${e.linePos?.[0]?.line ?? '?'}`, message: e.message.split('\n')[0] ?? e.message })),
    );
  }
  const input: unknown = doc.toJS() ?? {};
  const imported = importPublishedResources(input, file);
  const parsed = configSchema.safeParse(input);
  // Uniqueness is checked on the raw input so that it is reported together
  // with schema problems (zod skips refinements of objects that have some).
  const duplicates = duplicateProblems(input);
  // A manifest that could not be read leaves "resources" short: that is not a second problem.
  const schemaProblems = parsed.success ? [] : zodProblems(parsed.error).filter((p) => imported.problems.length === 0 || p.path !== 'resources');
  const problems = [...imported.problems, ...schemaProblems, ...duplicates].map(imported.rename);
  // Skipped manifests explain an empty "resources" (each had its synchronization disabled).
  const withNotices = (found: readonly ConfigProblem[]) =>
    found.some((p) => p.path === 'resources') ? [...found, ...imported.notices.filter((n) => n.level === 'warn').map((n) => ({ path: n.path, message: `(note) ${n.message}` }))] : [...found];
  if (!parsed.success || problems.length > 0) throw new ConfigError(file, withNotices(problems));
  try {
    const config = compileConfig(parsed.data, file);
    return { ...config, notices: [...imported.notices, ...(config.notices ?? []).map((n) => ({ ...n, ...imported.rename(n) }))], importedAs: imported.importedAs };
  } catch (err) {
    if (err instanceof ConfigError) throw new ConfigError(file, withNotices(err.problems.map(imported.rename)));
    throw err;
  }
}
