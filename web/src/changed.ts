/**
 * A `view=none` pull's `meta/changed` (docs/sync.md, "Pull"): the events that took the server's
 * state from the pull's cookie to its new sequence, when they only set and style cells. The page
 * shows the new sequence by patching the blocks it read at the old one with them, with the
 * server's rules (a `set` keeps a cell's look, a style patch keeps its value: `overlaid` and
 * `restyled` in styles.ts, held to the server's results by web/test/fixtures/style-patches.json),
 * instead of reading those blocks again: an edit made in another page shows one request sooner.
 */
import { type Cell, type ChangedEvent, isFormula, parseRef, refOf, type Value } from './model';
import { overlaid, restyled, type Style, type StylePatch } from './styles';

/** One change to one cell: its value (and number format) set, or its look patched. */
export type CellOp = { set: { value: Value; format?: string } } | { style: StylePatch };

/**
 * Each cell's changes in order, by A1 ref; undefined when an event is not one the page can apply
 * (another type, a reference it cannot read, a formula, whose value only a read brings).
 */
export function cellOps(events: readonly ChangedEvent[]): Map<string, CellOp[]> | undefined {
  const ops = new Map<string, CellOp[]>();
  const add = (row: number, col: number, op: CellOp) => {
    const ref = refOf(row, col);
    const list = ops.get(ref);
    if (list) list.push(op);
    else ops.set(ref, [op]);
  };
  for (const e of events) {
    if (e.type === 'set') {
      for (const c of e.body.cells) {
        const at = parseRef(c.ref);
        if (!at || isFormula(c.value)) return undefined;
        add(at.row, at.col, { set: { value: c.value, ...(c.format ? { format: c.format } : {}) } });
      }
    } else if (e.type === 'style') {
      for (const range of e.body.ranges) {
        const [a, b = a] = range.split(':');
        const p = parseRef(a);
        const q = parseRef(b);
        if (!p || !q) return undefined;
        for (let r = Math.min(p.row, q.row); r <= Math.max(p.row, q.row); r++)
          for (let c = Math.min(p.col, q.col); c <= Math.max(p.col, q.col); c++) add(r, c, { style: e.body.style });
      }
    } else if (e.type !== 'resize-columns' && e.type !== 'resize-rows' && e.type !== 'freeze') return undefined;
    // The layout's entries change no cell (docs/sheet-model.md, "Layout").
  }
  return ops;
}

/** The parts of a block of the server's cells that changes apply to (sheet-view.ts). */
export interface CellBlock {
  /** The block's first cell. */
  row: number;
  col: number;
  /** Input form, `rows` × `cols`. */
  values: Value[][];
  formats: Record<string, string>;
  styles: Record<string, Style>;
}

/** A copy of block `b` (`rows` × `cols` cells) with the changes of its cells in `ops` applied. */
export function patchedBlock<B extends CellBlock>(b: B, ops: Map<string, CellOp[]>, rows: number, cols: number): B {
  const values = b.values.map((line) => line.slice());
  const formats = { ...b.formats };
  const styles = { ...b.styles };
  for (const [ref, list] of ops) {
    const at = parseRef(ref);
    if (!at) continue;
    const [i, j] = [at.row - b.row, at.col - b.col];
    if (i < 0 || j < 0 || i >= rows || j >= cols) continue;
    const fmt = formats[ref];
    const look = styles[ref];
    let cell: Cell | undefined = {
      value: values[i]?.[j] ?? null,
      ...(fmt ? { format: fmt } : {}),
      ...(look ? { style: look } : {}),
    };
    for (const op of list)
      cell = 'set' in op ? overlaid<Value>(cell, op.set, undefined, null) : restyled<Value>(cell, op.style, null);
    while (values.length <= i) values.push([]);
    const line = values[i];
    while (line.length < j) line.push(null);
    line[j] = cell?.value ?? null;
    if (cell?.format) formats[ref] = cell.format;
    else delete formats[ref];
    if (cell?.style) styles[ref] = cell.style;
    else delete styles[ref];
  }
  return { ...b, values, formats, styles };
}
