/** Columns padded to their widest cell, the header row first; no trailing spaces. */
export function formatTable (rows: readonly (readonly string[])[]): string {
  const widths = (rows[0] ?? []).map((_, col) => Math.max(...rows.map((row) => (row[col] ?? '').length)))
  return rows.map((row) => row.map((cell, col) => cell.padEnd(widths[col] ?? 0)).join('  ').trimEnd()).join('\n') + '\n'
}
