/** One CSV line's cells (RFC 4180: quoted cells with doubled quotes; this export writes no line break inside a cell). */
export function parseCsvLine(line: string): string[] {
  const cells: string[] = [];
  let i = 0;
  for (;;) {
    let cell = "";
    if (line[i] === '"') {
      i++;
      for (;;) {
        const quote = line.indexOf('"', i);
        if (quote < 0) throw new Error(`unterminated quoted cell in ${JSON.stringify(line)}`);
        cell += line.slice(i, quote);
        i = quote + 1;
        if (line[i] !== '"') break;
        cell += '"';
        i++;
      }
    } else {
      const comma = line.indexOf(",", i);
      cell = line.slice(i, comma < 0 ? line.length : comma);
      i = comma < 0 ? line.length : comma;
    }
    cells.push(cell);
    if (i >= line.length) return cells;
    if (line[i] !== ",") throw new Error(`text after a quoted cell in ${JSON.stringify(line)}`);
    i++;
  }
}
