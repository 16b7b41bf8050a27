/**
 * Mutation rules (api-syncagent's `mutation`): what a copy holds may differ
 * from its source at given paths — a value deleted, a string rewritten by a
 * regular expression, or a value set from a template. `spec` rules apply to
 * what is copied (the fields other than metadata and status), in the copy's
 * direction; `status` rules to a status copied (a primary's, back to it; a
 * related object's with syncStatus, along with it). They are applied to what
 * relsync would write, before it is compared with the copy, so a copy is up
 * to date when it holds the mutated content and a mutation never makes a
 * write loop.
 *
 * Paths are relsync paths without wildcards (`spec.tls.secretName`,
 * `spec.ports.0`, `data['a.b']`); a `spec` rule's path names a copied field,
 * a `status` rule's starts with `status`. Setting a path creates the maps on
 * the way; a step into something that is not a map (or an index past an
 * array's end) makes the rule do nothing, said as a problem.
 */
import type { JsonPath, PathStep } from './json-path.js';
import type { Template } from './template.js';

export type Mutation =
  | { readonly kind: 'delete'; readonly path: JsonPath; readonly where: string }
  | { readonly kind: 'regex'; readonly path: JsonPath; readonly pattern: RegExp | undefined; readonly replacement: string; readonly where: string }
  | { readonly kind: 'template'; readonly path: JsonPath; readonly template: Template; readonly where: string };

export interface MutationRules {
  readonly spec: readonly Mutation[];
  readonly status: readonly Mutation[];
}

/** The longest string a regex mutation rewrites (64 KiB: a few milliseconds at worst). */
export const MAX_REGEX_INPUT = 65_536;

/** The variables a mutation's template may use: the value at its path and the object copied. */
export const MUTATION_VARIABLES = ['value', 'object'] as const;

/**
 * What a `spec` rule's template sees as `object`: the object without its status and without the
 * metadata that changes at every write (resourceVersion, managedFields, generation, …) — a spec
 * that followed them would change the copy, whose operator changes its status, which comes back to
 * the primary: a loop.
 */
export function specView(object: { readonly metadata: { readonly name?: string | undefined; readonly namespace?: string | undefined; readonly labels?: Record<string, string> | undefined; readonly annotations?: Record<string, string> | undefined } } & Record<string, unknown>): Record<string, unknown> {
  const { status: _status, metadata, ...rest } = object;
  return { ...rest, metadata: { name: metadata.name, namespace: metadata.namespace, labels: metadata.labels, annotations: metadata.annotations } };
}

/**
 * `root` with `mutations` applied, in order, to a deep copy (the caller's object is not changed);
 * `object`: what templates see as `object`. Problems name the rule and what stopped it.
 */
export function mutated<T extends Record<string, unknown>>(root: T, mutations: readonly Mutation[], object: unknown): { result: T; problems: string[] } {
  if (mutations.length === 0) return { result: root, problems: [] };
  const result = structuredClone(root);
  const problems: string[] = [];
  for (const m of mutations) {
    const problem = apply(result, m, object);
    if (problem) problems.push(`${m.where}: ${problem}`);
  }
  return { result, problems };
}

function apply(root: Record<string, unknown>, m: Mutation, object: unknown): string | undefined {
  const steps = m.path.steps;
  const parent = walk(root, steps.slice(0, -1), m.kind !== 'delete');
  if (parent === undefined) return m.kind === 'delete' ? undefined : `the path ${m.path.source} goes through something that is not a map`;
  const last = steps.at(-1)!;
  const current = read(parent, last);
  if (m.kind === 'delete') {
    remove(parent, last);
    return undefined;
  }
  if (m.kind === 'regex') {
    if (current === undefined) return undefined;
    if (typeof current !== 'string') return `the value at ${m.path.source} is not a string`;
    // Linear per match attempt, but a global replace tries every position: the work grows with the square of the length.
    if (current.length > MAX_REGEX_INPUT) return `the value at ${m.path.source} is longer than ${MAX_REGEX_INPUT} characters and is not rewritten`;
    return write(parent, last, m.pattern ? current.replace(m.pattern, m.replacement) : m.replacement);
  }
  return write(parent, last, m.template.render({ value: current === undefined ? '' : typeof current === 'string' ? current : JSON.stringify(current), object }));
}

type Container = Record<string, unknown> | unknown[];

/** The container at `steps`, made where missing when `create` (maps only). */
function walk(root: Container, steps: readonly PathStep[], create: boolean): Container | undefined {
  let at: Container = root;
  for (const step of steps) {
    let next = read(at, step);
    if (next === undefined && create && !Array.isArray(at)) {
      next = {};
      setOwn(at, keyOf(step), next);
    }
    if (next === null || typeof next !== 'object') return undefined;
    at = next as Container;
  }
  return at;
}

function keyOf(step: PathStep): string {
  return step.kind === 'field' || step.kind === 'elementOrKey' ? step.name : String(step.kind === 'index' ? step.index : '*');
}

function read(at: Container, step: PathStep): unknown {
  if (Array.isArray(at)) return step.kind === 'index' || step.kind === 'elementOrKey' ? at[step.index] : undefined;
  return step.kind === 'all' ? undefined : Object.hasOwn(at, keyOf(step)) ? at[keyOf(step)] : undefined;
}

function write(at: Container, step: PathStep, value: unknown): string | undefined {
  if (Array.isArray(at)) {
    if ((step.kind !== 'index' && step.kind !== 'elementOrKey') || step.index >= at.length) return `no element ${keyOf(step)} to set`;
    at[step.index] = value;
    return undefined;
  }
  setOwn(at, keyOf(step), value);
  return undefined;
}

/** An own property, whatever its name: `__proto__` as a key must not set the prototype. */
function setOwn(at: Record<string, unknown>, key: string, value: unknown): void {
  Object.defineProperty(at, key, { value, enumerable: true, writable: true, configurable: true });
}

function remove(at: Container, step: PathStep): void {
  if (Array.isArray(at)) {
    if ((step.kind === 'index' || step.kind === 'elementOrKey') && step.index < at.length) at.splice(step.index, 1);
    return;
  }
  delete at[keyOf(step)];
}
