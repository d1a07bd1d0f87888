/**
 * References moved by a row or column change, by the server's rules (`functions/sheet/src/formula/
 * rewrite.rs`): inserting a row above `A5` makes `=A5` read `=A6`; a range grows when lines are
 * inserted inside it and shrinks when some of its lines are deleted; a reference whose every cell
 * was deleted becomes `#REF!`; whole columns ignore row changes and whole rows column changes.
 * The engine's own row and column changes break a range whose first or last line is deleted
 * (`SUM(#REF!:A9)`) where the server shrinks it, so the page moves formulas itself, with the
 * engine's lexer (`getTokens`), and the cases in `web/test/fixtures/formula-moves.json` hold both.
 */
import type { MarkedToken } from '@ironcalc/wasm';
import { colName, MAX_COLS, MAX_ROWS, type ShapeOp } from './model';

interface Ref {
  row: number;
  column: number;
  absolute_row: boolean;
  absolute_column: boolean;
}

/** The last 1-based line of the axis `s` changes. */
function edge(s: ShapeOp): number {
  return s.axis === 'rows' ? MAX_ROWS : MAX_COLS;
}

/** Where 1-based line `n` goes, or null when it was deleted or pushed past the sheet's edge. */
function line(s: ShapeOp, n: number): number | null {
  const at = s.at + 1;
  if (n < at) return n;
  if (s.op === 'insert') return n + s.count <= edge(s) ? n + s.count : null;
  return n < at + s.count ? null : n - s.count;
}

/** Where the 1-based span `first..last` goes (rewrite.rs `Displace::span`). */
function span(s: ShapeOp, first: number, last: number): [number, number] | null {
  if (s.op === 'insert') {
    const a = line(s, first);
    return a === null ? null : [a, line(s, last) ?? edge(s)];
  }
  const d = s.at + 1;
  const e = d + s.count;
  const a = first < d ? first : first >= e ? first - s.count : d;
  const b = last < d ? last : last >= e ? last - s.count : d - 1;
  return a <= b ? [a, b] : null;
}

const col = (r: Ref) => `${r.absolute_column ? '$' : ''}${colName(Math.max(1, r.column) - 1)}`;
const row = (r: Ref) => `${r.absolute_row ? '$' : ''}${r.row}`;
const cell = (r: Ref) => col(r) + row(r);

function moveCell(r: Ref, s: ShapeOp): string {
  const to = line(s, s.axis === 'rows' ? r.row : r.column);
  if (to === null) return '#REF!';
  return cell(s.axis === 'rows' ? { ...r, row: to } : { ...r, column: to });
}

function moveRange(left: Ref, right: Ref, s: ShapeOp): string {
  const fullRows = left.absolute_row && right.absolute_row && left.row === 1 && right.row === MAX_ROWS;
  const fullCols = left.absolute_column && right.absolute_column && left.column === 1 && right.column === MAX_COLS;
  let [l, r] = [left, right];
  const key = s.axis === 'rows' ? 'row' : 'column';
  if ((s.axis === 'rows' && !fullRows) || (s.axis === 'columns' && !fullCols)) {
    const reversed = left[key] > right[key];
    const moved = span(s, Math.min(left[key], right[key]), Math.max(left[key], right[key]));
    if (!moved) return '#REF!';
    const [a, b] = reversed ? [moved[1], moved[0]] : moved;
    l = { ...left, [key]: a };
    r = { ...right, [key]: b };
  }
  if (fullRows) return `${col(l)}:${col(r)}`;
  if (fullCols) return `${row(l)}:${row(r)}`;
  return `${cell(l)}:${cell(r)}`;
}

/**
 * `text` (a formula without `=`, whose tokens are `tokens`) with its references moved by `s`, or
 * null when none changes. References to other tabs than `tab` stay.
 */
export function displaceFormula(text: string, tokens: readonly MarkedToken[], s: ShapeOp, tab: string): string | null {
  // The engine leaves `sheet` out of a token without a sheet prefix.
  const own = (sheet: string | null | undefined) =>
    sheet === null || sheet === undefined || sheet.toLowerCase() === tab.toLowerCase();
  let out = '';
  let copied = 0;
  let changed = false;
  for (const { token, start, end } of tokens) {
    if (token === 'Illegal' || token === 'EOF') break;
    if (typeof token !== 'object') continue;
    let next: string;
    if ('Reference' in token && own(token.Reference.sheet)) next = moveCell(token.Reference, s);
    else if ('Range' in token && own(token.Range.sheet)) next = moveRange(token.Range.left, token.Range.right, s);
    else continue;
    // The token's own text, after any whitespace before it and after a sheet prefix.
    const slice = text.slice(start, end);
    const lead = slice.length - slice.trimStart().length;
    const body = slice.slice(lead);
    const prefix = body.lastIndexOf('!') + 1;
    if (next.toUpperCase() === body.slice(prefix).toUpperCase()) continue;
    changed = true;
    // A reference that is gone loses its sheet prefix too, as the server writes it.
    const from = start + lead + (next === '#REF!' ? 0 : prefix);
    out += text.slice(copied, from) + next;
    copied = end;
  }
  return changed ? out + text.slice(copied) : null;
}
