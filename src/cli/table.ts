/** Prints rows as an aligned text table, like kubectl get. */
export function printTable<T extends Record<string, string>>(rows: readonly T[], columns: ReadonlyArray<keyof T & string>): void {
  const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => (r[c] ?? '').length)));
  const line = (cells: string[]) => cells.map((cell, i) => cell.padEnd(widths[i]!)).join('  ').trimEnd();
  console.log(line(columns.map((c) => c.toUpperCase())));
  for (const row of rows) console.log(line(columns.map((c) => row[c] ?? '')));
}
