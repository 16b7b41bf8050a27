import { printable } from './printable.js';

/** Prints rows as an aligned text table, like kubectl get. */
export function printTable<T extends Record<string, string>>(given: readonly T[], columns: ReadonlyArray<keyof T & string>): void {
  const rows = given.map((r) => Object.fromEntries(Object.entries(r).map(([k, v]) => [k, printable(v)])) as T);
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => (r[c] ?? '').length)));
  const line = (cells: string[]) => cells.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd();
  console.log(line(columns.map((c) => c.toUpperCase())));
  // Cells hold a tenant's names and messages: escaped before they are measured and printed.
  for (const row of rows) console.log(line(columns.map((c) => row[c] ?? '')));
}
