/**
 * Copy and paste, as spreadsheets put ranges on the clipboard: tab-separated text, one line per
 * row, a cell in double quotes when it holds a tab, a line break or a quote (`""`). A paste is
 * one `set` of every cell from the selected one down and right, so it undoes as one step.
 */
import { formulaProblem, isFormula, MAX_COLS, MAX_ROWS, parseInput, refOf, type Value } from './model';

/** Most cells one paste writes (a larger range goes through Import). */
export const MAX_PASTE_CELLS = 50_000;
/** Most characters one cell holds (the server's limit). */
const MAX_TEXT = 32_767;

/** Tab-separated text → rows of cell texts. A final line break ends the last row; it adds none. */
export function parseTsv(text: string): string[][] {
  const rows: string[][] = [];
  let row: string[] = [];
  let i = 0;
  const n = text.length;
  while (i <= n) {
    let cell = '';
    if (text[i] === '"') {
      // Quoted: up to the closing quote, `""` is one quote; tabs and line breaks are kept.
      i++;
      for (;;) {
        const q = text.indexOf('"', i);
        if (q < 0) {
          cell += text.slice(i);
          i = n;
          break;
        }
        cell += text.slice(i, q);
        if (text[q + 1] === '"') {
          cell += '"';
          i = q + 2;
        } else {
          i = q + 1;
          break;
        }
      }
    }
    // Unquoted (or what follows a closing quote): up to the next tab or line break.
    let end = i;
    while (end < n && text[end] !== '\t' && text[end] !== '\n' && text[end] !== '\r') end++;
    cell += text.slice(i, end);
    row.push(cell);
    i = end;
    if (i >= n) break;
    if (text[i] === '\t') {
      i++;
      continue;
    }
    // A line break: \r\n, \n or \r.
    i += text[i] === '\r' && text[i + 1] === '\n' ? 2 : 1;
    rows.push(row);
    row = [];
    if (i >= n) return rows;
  }
  rows.push(row);
  return rows;
}

export interface Pasted {
  cells: { ref: string; value: Value; format?: string }[];
  /** Cells past the sheet's last row or column, left out. */
  dropped: number;
}

/**
 * The cells a paste of `text` at (row, col) writes: each as typed (numbers, TRUE, formulas, a
 * leading `'` for text), keeping the format the cell has (`formatOf`), as typing does. A reason
 * in words instead when the server would refuse it.
 */
export function pasted(
  text: string,
  row: number,
  col: number,
  formatOf: (row: number, col: number) => string | undefined,
): Pasted | string {
  const rows = parseTsv(text);
  const cells: Pasted['cells'] = [];
  let dropped = 0;
  for (const [i, line] of rows.entries()) {
    for (const [j, t] of line.entries()) {
      const r = row + i;
      const c = col + j;
      if (r >= MAX_ROWS || c >= MAX_COLS) {
        dropped++;
        continue;
      }
      if (t.length > MAX_TEXT) return `A pasted text has ${t.length} characters; a cell holds at most ${MAX_TEXT}.`;
      const value = parseInput(t);
      const problem = isFormula(value) ? formulaProblem(value) : undefined;
      if (problem) return `${refOf(r, c)}: ${problem}`;
      const format = formatOf(r, c);
      cells.push({ ref: refOf(r, c), value, ...(format ? { format } : {}) });
      if (cells.length > MAX_PASTE_CELLS)
        return `That is more than ${MAX_PASTE_CELLS.toLocaleString('en')} cells to paste at once: import the file instead.`;
    }
  }
  return { cells, dropped };
}

/** A cell's text on the clipboard: quoted when it holds a tab, a line break or a quote. */
export function tsvField(text: string): string {
  return /[\t\n\r"]/.test(text) ? `"${text.replaceAll('"', '""')}"` : text;
}
