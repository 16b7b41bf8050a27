/**
 * Name templates: text with `{{ ... }}` actions, compiled once at config load.
 * An action is a value followed by optional pipes, Go-template style:
 *
 *   {{ name }}                           a variable
 *   {{ object.spec.tier }}               a path into a variable (see json-path.ts)
 *   {{ name | lower | trunc 20 }}        pipes; the piped value is the last argument
 *   {{ hash cluster namespace | trunc 6 }} a function call with arguments
 *   {{ "literal" }}
 *
 * Functions: lower, upper, trim, trunc N, join SEP A B... (the arguments
 * joined by SEP), hash A B... (sha256 hex of the arguments joined by "/"), replace OLD NEW, default D (D when the value is
 * empty). Variables depend on where the template is used: `cluster`,
 * `namespace`, `name`, `object` (the primary) everywhere; `value` in a
 * reference rewrite. The rendered text is trimmed.
 */
import { createHash } from 'node:crypto';
import { evaluateJsonPath, parseJsonPath, type JsonPath } from './json-path.js';
import { jsonText } from '../util/json-text.js';

export type TemplateContext = Readonly<Record<string, unknown>>;

type Arg = { kind: 'literal'; value: string } | { kind: 'number'; value: number } | { kind: 'path'; variable: string; path: JsonPath | undefined; text: string };
interface Call {
  readonly fn: string;
  readonly args: readonly Arg[];
}
interface Action {
  /** First segment: a single value, or a call. */
  readonly head: Arg | Call;
  readonly pipes: readonly Call[];
}
type Part = string | Action;

export class TemplateError extends Error {
  constructor(
    readonly template: string,
    problem: string,
  ) {
    super(`template "${template}": ${problem}`);
    this.name = 'TemplateError';
  }
}

const functions: Record<string, { arity: number | 'variadic'; apply: (args: unknown[]) => string }> = {
  lower: { arity: 1, apply: ([v]) => text(v).toLowerCase() },
  upper: { arity: 1, apply: ([v]) => text(v).toUpperCase() },
  trim: { arity: 1, apply: ([v]) => text(v).trim() },
  trunc: { arity: 2, apply: ([n, v]) => text(v).slice(0, Number(n)) },
  replace: { arity: 3, apply: ([from, to, v]) => text(v).split(text(from)).join(text(to)) },
  default: { arity: 2, apply: ([d, v]) => (text(v) === '' ? text(d) : text(v)) },
  join: { arity: 'variadic', apply: ([sep, ...parts]) => parts.map(text).join(text(sep)) },
  hash: { arity: 'variadic', apply: (args) => createHash('sha256').update(args.map(text).join('/')).digest('hex') },
};

export class Template {
  private constructor(
    readonly source: string,
    private readonly parts: readonly Part[],
  ) {}

  /** Parses a template; throws TemplateError naming what is wrong. */
  static parse(source: string, allowedVariables: readonly string[]): Template {
    const parts: Part[] = [];
    let rest = source;
    while (rest.length > 0) {
      const open = rest.indexOf('{{');
      if (open < 0) {
        if (rest.includes('}}')) throw new TemplateError(source, 'found "}}" without a matching "{{"');
        parts.push(rest);
        break;
      }
      if (open > 0) parts.push(rest.slice(0, open));
      const close = rest.indexOf('}}', open);
      if (close < 0) throw new TemplateError(source, 'unclosed "{{"');
      parts.push(parseAction(source, rest.slice(open + 2, close), allowedVariables));
      rest = rest.slice(close + 2);
    }
    return new Template(source, parts);
  }

  /** True when the template has no actions (a fixed name). */
  get isConstant(): boolean {
    return this.parts.every((p) => typeof p === 'string');
  }

  /** True when some action reads `variable` (as a value, a path into it, or a function's argument). */
  uses(variable: string): boolean {
    const reads = (a: Arg | Call): boolean => ('fn' in a ? a.args.some(reads) : a.kind === 'path' && a.variable === variable);
    return this.parts.some((p) => typeof p !== 'string' && (reads(p.head) || p.pipes.some(reads)));
  }

  render(context: TemplateContext): string {
    let out = '';
    for (const part of this.parts) out += typeof part === 'string' ? part : text(runAction(part, context));
    return out.trim();
  }
}

function parseAction(source: string, body: string, allowed: readonly string[]): Action {
  const segments = splitPipes(body).map((s) => tokenize(source, s));
  if (segments.length === 0 || segments[0]!.length === 0) throw new TemplateError(source, 'empty action "{{ }}"');
  const [first, ...pipes] = segments;
  const head = first!.length === 1 && !(first![0]! in functions) ? parseArg(source, first![0]!, allowed) : parseCall(source, first!, allowed, 0);
  return { head, pipes: pipes.map((p) => parseCall(source, p, allowed, 1)) };
}

function parseCall(source: string, tokens: string[], allowed: readonly string[], piped: 0 | 1): Call {
  const [fn, ...rawArgs] = tokens;
  if (!fn) throw new TemplateError(source, 'empty pipe segment');
  const def = Object.hasOwn(functions, fn) ? functions[fn] : undefined;
  if (!def) throw new TemplateError(source, `unknown function "${fn}" (known: ${Object.keys(functions).join(', ')})`);
  const count = rawArgs.length + piped;
  if (def.arity !== 'variadic' && count !== def.arity) {
    throw new TemplateError(source, `function "${fn}" takes ${def.arity} argument(s), got ${count}`);
  }
  if (def.arity === 'variadic' && count === 0) throw new TemplateError(source, `function "${fn}" needs at least one argument`);
  return { fn, args: rawArgs.map((a) => parseArg(source, a, allowed)) };
}

function parseArg(source: string, token: string, allowed: readonly string[]): Arg {
  if (token.startsWith('"')) return { kind: 'literal', value: JSON.parse(token) as string };
  if (/^\d+$/.test(token)) return { kind: 'number', value: Number(token) };
  const dot = token.search(/[.[]/);
  const variable = dot < 0 ? token : token.slice(0, dot);
  if (!allowed.includes(variable)) {
    throw new TemplateError(source, `unknown variable "${variable}" (available here: ${allowed.join(', ')})`);
  }
  let path: JsonPath | undefined;
  if (dot >= 0) {
    try {
      path = parseJsonPath(token.slice(dot));
    } catch (err) {
      throw new TemplateError(source, (err as Error).message);
    }
  }
  return { kind: 'path', variable, path, text: token };
}

function splitPipes(body: string): string[] {
  const out: string[] = [];
  let current = '';
  let quoted = false;
  for (let i = 0; i < body.length; i++) {
    const ch = body[i]!;
    if (ch === '"' && body[i - 1] !== '\\') quoted = !quoted;
    if (ch === '|' && !quoted) {
      out.push(current);
      current = '';
    } else current += ch;
  }
  out.push(current);
  return out;
}

function tokenize(source: string, segment: string): string[] {
  const tokens: string[] = [];
  const re = /\s*("(?:[^"\\]|\\.)*"|[^\s"]+)/y;
  let m: RegExpExecArray | null;
  let last = 0;
  while ((m = re.exec(segment)) !== null) {
    tokens.push(m[1]!);
    last = re.lastIndex;
  }
  if (segment.slice(last).trim() !== '') throw new TemplateError(source, `cannot read "${segment.slice(last).trim()}"`);
  return tokens;
}

function runAction(action: Action, context: TemplateContext): unknown {
  let value = 'fn' in action.head ? runCall(action.head, context, []) : evalArg(action.head, context);
  for (const pipe of action.pipes) value = runCall(pipe, context, [value]);
  return value;
}

function runCall(call: Call, context: TemplateContext, piped: unknown[]): string {
  return functions[call.fn]!.apply([...call.args.map((a) => evalArg(a, context)), ...piped]);
}

function evalArg(arg: Arg, context: TemplateContext): unknown {
  if (arg.kind !== 'path') return arg.value;
  const root = context[arg.variable];
  if (!arg.path) return root;
  const [first] = evaluateJsonPath(arg.path, root, 1); // only the first value is used: a tenant's list is not walked
  return first;
}

function text(v: unknown): string {
  if (v === undefined || v === null) return '';
  if (typeof v === 'string') return v;
  if (typeof v === 'number' || typeof v === 'boolean') return String(v);
  // A tenant's value: at any depth (util/json-text.ts).
  return jsonText(v);
}
