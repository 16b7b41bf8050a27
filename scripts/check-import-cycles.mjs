// No file of src/ reaches itself through its imports (run by `npm run lint`):
// type-only imports count, since a cycle of types is still two files that
// cannot be read, or moved to another floor, one without the other. The fix
// is to put what both need below both, or to let the lower one declare the
// small shape it takes (as a consumer's interface does).
//
//   node scripts/check-import-cycles.mjs [dir]    # default: src
//
// Prints each cycle once, every import of it with file and line, and exits 1.
import { existsSync } from 'node:fs';
import { dirname, join, normalize } from 'node:path';
import { relativeImports, sourceFiles } from './source-imports.mjs';

const root = process.argv[2] ?? 'src';

/** The file a specifier names: compiled `.js`/`.mjs` names stand for the `.ts`/`.mts` sources. */
function target(from, spec) {
  const path = normalize(join(dirname(from), spec));
  for (const candidate of [path.replace(/\.js$/, '.ts').replace(/\.mjs$/, '.mts'), path]) {
    if (existsSync(candidate)) return candidate;
  }
  return undefined; // the compiler reports a missing module
}

const problems = [];
/** file → [{ to, line }] */
const edges = new Map();
for (const file of sourceFiles(root)) {
  const { imports, problems: unreadable } = relativeImports(file);
  problems.push(...unreadable);
  edges.set(file, imports.flatMap(({ spec, line }) => {
    const to = target(file, spec);
    return to === undefined ? [] : [{ to, line }];
  }));
}

// Tarjan's strongly connected components, iterative (a deep import chain must not overflow the stack).
const index = new Map();
const low = new Map();
const onStack = new Set();
const stack = [];
const components = [];
let next = 0;
for (const start of edges.keys()) {
  if (index.has(start)) continue;
  const frames = [{ file: start, i: 0 }];
  index.set(start, next); low.set(start, next); next++;
  stack.push(start); onStack.add(start);
  while (frames.length > 0) {
    const frame = frames[frames.length - 1];
    const out = edges.get(frame.file) ?? [];
    if (frame.i < out.length) {
      const { to } = out[frame.i++];
      if (!index.has(to)) {
        index.set(to, next); low.set(to, next); next++;
        stack.push(to); onStack.add(to);
        frames.push({ file: to, i: 0 });
      } else if (onStack.has(to)) {
        low.set(frame.file, Math.min(low.get(frame.file), index.get(to)));
      }
      continue;
    }
    frames.pop();
    if (frames.length > 0) {
      const parent = frames[frames.length - 1].file;
      low.set(parent, Math.min(low.get(parent), low.get(frame.file)));
    }
    if (low.get(frame.file) === index.get(frame.file)) {
      const component = [];
      let member;
      do {
        member = stack.pop();
        onStack.delete(member);
        component.push(member);
      } while (member !== frame.file);
      components.push(component);
    }
  }
}

/** The shortest way round from `start` back to itself inside `members`, as the imports taken. */
function cycleThrough(start, members) {
  const cameFrom = new Map();
  const queue = [start];
  while (queue.length > 0) {
    const file = queue.shift();
    for (const edge of edges.get(file) ?? []) {
      if (!members.has(edge.to) || cameFrom.has(edge.to)) continue;
      cameFrom.set(edge.to, { from: file, line: edge.line });
      if (edge.to === start) {
        const steps = [];
        for (let at = start; ;) {
          const step = cameFrom.get(at);
          steps.unshift(`${step.from}:${step.line}`);
          at = step.from;
          if (at === start) return steps;
        }
      }
      queue.push(edge.to);
    }
  }
  return [];
}

for (const component of components) {
  const members = new Set(component);
  const selfImport = component.length === 1 && (edges.get(component[0]) ?? []).some((e) => e.to === component[0]);
  if (component.length === 1 && !selfImport) continue;
  const start = [...members].sort()[0];
  // The shortest way round is what to cut first; a tangle of many files is named by its size alone.
  const names = component.length <= 8 ? `: ${[...members].sort().join(', ')}` : '';
  const others = component.length > 2 ? ` (${component.length} files take part${names})` : '';
  problems.push(`import cycle: ${cycleThrough(start, members).join(' → ')} → ${start}${others}`);
}

if (problems.length > 0) {
  console.error(`imports in ${root} that go round in a cycle (type-only ones count):\n${problems.join('\n')}`);
  process.exit(1);
}
console.log(`check-import-cycles: no import cycle in ${root}`);
