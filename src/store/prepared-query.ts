/**
 * Queries built once. kysely builds and compiles a query's SQL on every call
 * (parsing each `where`, visiting the tree, freezing nodes): in a profile of
 * relsync's initial sync of 1,000 primaries that cost about two thirds of
 * what SQLite took to run the queries. The queries that every watch event and
 * every reconcile runs have a fixed shape with only their values changing, so
 * they are built once with placeholder values, and each call binds its own
 * values to the compiled SQL (the statement cache, statement-cache.ts, then
 * prepares it once too).
 *
 * Only for scalar parameters compared with `=` (identity columns and the
 * like): a value that changes the query's shape (an `in` list, an optional
 * clause) must not go through here.
 */
import { CompiledQuery, type Compilable, type Kysely } from 'kysely';

/**
 * Starts a placeholder value. Only the parameters of the query as built are compared with the
 * placeholders (a constant of a builder must not be one); the values of each call are bound as
 * they are, whatever they hold.
 */
const MARK = '\u0000relsync-param:';

export type PreparedQuery<P, R> = (params: P) => Promise<R[]>;

export function preparedQuery<DB, N extends string, R>(db: Kysely<DB>, names: readonly N[], build: (params: Record<N, string>) => Compilable<R>): PreparedQuery<Record<N, string>, R> {
  const placeholders = Object.fromEntries(names.map((n) => [n, `${MARK}${n}`])) as Record<N, string>;
  const compiled = build(placeholders).compile();
  /** For each parameter of the SQL: the name whose value it takes, or a constant of the query. */
  const bindings = compiled.parameters.map((value): { name: N } | { value: unknown } => {
    const name = names.find((n) => value === placeholders[n]);
    return name !== undefined ? { name } : { value };
  });
  for (const name of names) {
    if (!bindings.some((b) => 'name' in b && b.name === name)) throw new Error(`prepared query: parameter "${name}" is not used by ${compiled.sql}`);
  }
  return async (params) => {
    const values = bindings.map((b) => ('name' in b ? params[b.name] : b.value));
    return (await db.executeQuery<R>(CompiledQuery.raw(compiled.sql, values))).rows;
  };
}
