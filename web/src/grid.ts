/**
 * A grid virtualized in both directions over Excel's full 1,048,576 × 16,384 cells: only the
 * cells in view exist in the DOM. A million 24-pixel rows are taller than browsers let an element
 * be (Chrome stops near 33.5M px, Firefox near 17.9M), so past `MAX_SCROLL_PX` the scrollbar is
 * scaled: its position picks a fraction of the sheet, and the rows are drawn from there.
 */
import { Axis, type Run, resized } from './axis';
import { tsvField } from './clipboard';
import { colName, type Drawn, MAX_COLS, MAX_ROWS, refOf } from './model';
import { paint } from './styles';

export const ROW_H = 24;
export const COL_W = 104;
const HEAD_W = 64;
const HEAD_H = 24;
const MAX_SCROLL_PX = 8_000_000;
/** The widest a column is dragged (the server's limit, functions/sheet/src/layout.rs). */
const MAX_SIZE_PX = 2_000;

/**
 * What the grid shows in a cell: its text and alignment, nothing, or a placeholder while its
 * block loads (or its formula's value is computed).
 */
export type Shown = Drawn | undefined | 'loading';

export interface GridSource {
  cell(row: number, col: number): Shown;
  /**
   * The cells in view changed (scroll, resize): fetch what they need. `frozen` rows and columns
   * from the first are in view too, whatever the scroll.
   */
  viewport(rows: [number, number], cols: [number, number], frozen: { rows: number; columns: number }): void;
  /** A column's edge was dragged to `width` pixels (`null`: double-clicked, back to the default). */
  resizeColumn?(col: number, width: number | null): void;
  edit(row: number, col: number, text: string): void;
  clear(row: number, col: number): void;
  selected(row: number, col: number): void;
  /** The raw text an editor starts with. */
  editText(row: number, col: number): string;
  /** The in-place editor's text as it is typed (the formula bar shows it). */
  typing?(text: string): void;
  /** An edit was tried on a read-only grid (a viewer's sheet, history): say why nothing happens. */
  refused?(): void;
  /** Clipboard text pasted with (row, col) selected: a range from there (clipboard.ts). */
  paste?(row: number, col: number, text: string): void;
}

export class Grid {
  readonly el: HTMLElement;
  readOnly = false;
  private readonly scroller: HTMLElement;
  private readonly pane: HTMLElement;
  private readonly spacer: HTMLElement;
  private readonly body: HTMLElement;
  private readonly editor: HTMLInputElement;
  private sel = { row: 0, col: 0 };
  /** The corner of the selected range opposite the active cell (`sel` when one cell is selected). */
  private ext = { row: 0, col: 0 };
  private dragging = false;
  private editing = false;
  private frame = 0;
  private rows: [number, number] = [0, 0];
  private cols: [number, number] = [0, 0];
  private readonly colAxis = new Axis(MAX_COLS, COL_W);
  private readonly rowAxis = new Axis(MAX_ROWS, ROW_H);
  private frozen = { rows: 0, columns: 0 };
  private colRuns: Run[] = [];
  private layoutKey = '';
  /** A column edge being dragged: the column, where the drag started, its width then and now. */
  private drag: { col: number; x: number; from: number; width: number } | undefined;

  constructor(
    host: HTMLElement,
    private readonly source: GridSource,
  ) {
    this.el = document.createElement('div');
    this.el.className = 'grid';
    this.el.tabIndex = 0;
    this.el.setAttribute('role', 'grid');
    this.el.setAttribute('aria-rowcount', String(MAX_ROWS));
    this.el.setAttribute('aria-colcount', String(MAX_COLS));
    this.scroller = div('scroller');
    this.pane = div('pane');
    this.spacer = div('spacer');
    this.body = div('body');
    this.editor = document.createElement('input');
    this.editor.className = 'editor';
    this.editor.hidden = true;
    this.editor.setAttribute('aria-label', 'cell editor');
    this.pane.append(this.body, this.editor);
    this.scroller.append(this.pane, this.spacer);
    this.el.append(this.scroller);
    host.append(this.el);

    this.scroller.addEventListener('scroll', () => this.schedule());
    new ResizeObserver(() => this.schedule()).observe(this.scroller);
    this.body.addEventListener('mousedown', (e) => {
      const grip = (e.target as HTMLElement).closest<HTMLElement>('.col-grip');
      if (grip) {
        const col = Number(grip.dataset.col);
        const from = this.colAxis.size(col);
        this.drag = { col, x: e.clientX, from, width: from };
        e.preventDefault();
        return;
      }
      const ref = (e.target as HTMLElement).closest<HTMLElement>('[data-row]');
      if (!ref) return;
      if (this.editing) this.commit();
      const at = { row: Number(ref.dataset.row), col: Number(ref.dataset.col) };
      // Shift-click extends the selection to a range; a plain click selects one cell, and a drag
      // from it selects the range it covers.
      if (e.shiftKey) this.extend(at.row, at.col);
      else this.select(at.row, at.col);
      this.dragging = !e.shiftKey;
      e.preventDefault();
      this.el.focus();
    });
    this.body.addEventListener('mousemove', (e) => {
      if (!this.dragging || !(e.buttons & 1)) return;
      const ref = (e.target as HTMLElement).closest<HTMLElement>('[data-row]');
      if (ref && (Number(ref.dataset.row) !== this.ext.row || Number(ref.dataset.col) !== this.ext.col))
        this.extend(Number(ref.dataset.row), Number(ref.dataset.col));
    });
    window.addEventListener('mousemove', (e) => {
      if (!this.drag) return;
      this.drag.width = clamp(Math.round(this.drag.from + e.clientX - this.drag.x), 8, MAX_SIZE_PX);
      this.colAxis.set(resized(this.colRuns, this.drag.col, 1, this.drag.width));
      this.schedule();
    });
    window.addEventListener('mouseup', () => {
      this.dragging = false;
      const d = this.drag;
      if (!d) return;
      this.drag = undefined;
      this.colAxis.set(this.colRuns);
      if (d.width === d.from) return;
      if (this.readOnly) this.source.refused?.();
      else this.source.resizeColumn?.(d.col, d.width);
      this.schedule();
    });
    this.body.addEventListener('dblclick', (e) => {
      const grip = (e.target as HTMLElement).closest<HTMLElement>('.col-grip');
      if (!grip) return;
      e.stopPropagation();
      if (this.readOnly) this.source.refused?.();
      else this.source.resizeColumn?.(Number(grip.dataset.col), null);
    });
    this.body.addEventListener('dblclick', (e) => {
      if (!(e.target as HTMLElement).closest('.col-grip'))
        this.startEdit(this.source.editText(this.sel.row, this.sel.col));
    });
    this.el.addEventListener('keydown', (e) => this.onKey(e));
    this.el.addEventListener('paste', (e) => {
      const text = e.clipboardData?.getData('text/plain');
      if (e.target !== this.el || this.editing || text === undefined) return;
      e.preventDefault();
      if (this.readOnly) this.source.refused?.();
      else this.source.paste?.(this.sel.row, this.sel.col, text);
    });
    this.el.addEventListener('copy', (e) => {
      if (e.target !== this.el || this.editing || !e.clipboardData) return;
      e.preventDefault();
      e.clipboardData.setData('text/plain', tsvField(this.source.editText(this.sel.row, this.sel.col)));
    });
    this.editor.addEventListener('keydown', (e) => this.onEditorKey(e));
    this.editor.addEventListener('input', () => this.source.typing?.(this.editor.value));
    this.editor.addEventListener('blur', () => {
      if (this.editing) this.commit();
    });
  }

  get selection(): { row: number; col: number } {
    return { ...this.sel };
  }

  /** The selected range, corners ordered: one cell unless the selection was extended. */
  get range(): { r0: number; c0: number; r1: number; c1: number } {
    return {
      r0: Math.min(this.sel.row, this.ext.row),
      c0: Math.min(this.sel.col, this.ext.col),
      r1: Math.max(this.sel.row, this.ext.row),
      c1: Math.max(this.sel.col, this.ext.col),
    };
  }

  /** Moves the range's far corner to (row, col), keeping the active cell. */
  extend(row: number, col: number): void {
    this.ext = { row: clamp(row, 0, MAX_ROWS - 1), col: clamp(col, 0, MAX_COLS - 1) };
    this.schedule();
  }

  /** The sheet's layout: sized runs of columns and of rows (0-based), and the frozen split. */
  setLayout(columns: Run[], rows: Run[], freeze: { rows: number; columns: number }): void {
    // Called with every view shown: only a change is drawn again.
    const key = JSON.stringify([columns, rows, freeze]);
    if (key === this.layoutKey) return;
    this.layoutKey = key;
    this.colRuns = columns;
    if (!this.drag) this.colAxis.set(columns);
    this.rowAxis.set(rows);
    this.frozen = { rows: clamp(freeze.rows, 0, MAX_ROWS - 1), columns: clamp(freeze.columns, 0, MAX_COLS - 1) };
    this.el.dataset.frozen = `${this.frozen.rows},${this.frozen.columns}`;
    this.schedule();
  }

  /** Redraw on the next frame (coalesces bursts of scroll events and data arrivals). */
  schedule(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame(() => {
      this.frame = 0;
      this.render();
    });
  }

  select(row: number, col: number): void {
    this.sel = { row: clamp(row, 0, MAX_ROWS - 1), col: clamp(col, 0, MAX_COLS - 1) };
    this.ext = { ...this.sel };
    this.source.selected(this.sel.row, this.sel.col);
    this.reveal();
    this.schedule();
  }

  /** Scrolls so the selected cell is in view (past the frozen rows and columns), if it is not. */
  private reveal(): void {
    const { row, col } = this.sel;
    const fr = this.frozen.rows;
    const fixedH = this.rowAxis.offset(fr);
    const y = this.rowAxis.offset(row) - this.virtualTop();
    if (row >= fr && (y < fixedH || y + this.rowAxis.size(row) > this.bodyH())) {
      const third = Math.floor((this.bodyH() - fixedH) / ROW_H / 3);
      this.scrollToRow(Math.max(fr, row - third));
    }
    const fc = this.frozen.columns;
    const fixedW = this.colAxis.offset(fc);
    const x = this.colAxis.offset(col) - this.scroller.scrollLeft;
    if (col >= fc && (x < fixedW || x + this.colAxis.size(col) > this.bodyW()))
      this.scroller.scrollLeft = Math.max(0, this.colAxis.offset(Math.max(fc, col - 1)) - fixedW);
  }

  private bodyH(): number {
    return Math.max(0, this.scroller.clientHeight - HEAD_H);
  }
  private bodyW(): number {
    return Math.max(0, this.scroller.clientWidth - HEAD_W);
  }
  private contentH(): number {
    return this.rowAxis.total();
  }

  /** Sets the scrollbar so `row` is the first row drawn under the frozen ones. */
  private scrollToRow(row: number): void {
    const maxTop = this.scroller.scrollHeight - this.scroller.clientHeight;
    const span = this.contentH() - this.bodyH();
    const want = this.rowAxis.offset(row) - this.rowAxis.offset(this.frozen.rows);
    this.scroller.scrollTop = span > 0 ? Math.round((want / span) * maxTop) : 0;
  }

  /** The virtual pixel offset of the top of the drawn area. */
  private virtualTop(): number {
    const maxTop = this.scroller.scrollHeight - this.scroller.clientHeight;
    const span = this.contentH() - this.bodyH();
    if (maxTop <= 0 || span <= 0) return 0;
    return (Math.min(this.scroller.scrollTop, maxTop) / maxTop) * span;
  }

  render(): void {
    const w = this.scroller.clientWidth;
    const h = this.scroller.clientHeight;
    this.pane.style.width = `${w}px`;
    this.pane.style.height = `${h}px`;
    const virtH = Math.min(this.contentH(), MAX_SCROLL_PX);
    this.spacer.style.height = `${Math.max(0, HEAD_H + virtH - h)}px`;
    this.spacer.style.width = `${HEAD_W + this.colAxis.total()}px`;

    const rows = lines(this.rowAxis, this.frozen.rows, this.virtualTop(), this.bodyH());
    const cols = lines(this.colAxis, this.frozen.columns, this.scroller.scrollLeft, this.bodyW());
    const span = (ls: Line[], frozen: number): [number, number] => {
      const scrolled = ls.filter((l) => !l.frozen);
      return scrolled.length ? [scrolled[0].i, scrolled[scrolled.length - 1].i + 1] : [frozen, frozen];
    };
    const [rs, cs] = [span(rows, this.frozen.rows), span(cols, this.frozen.columns)];
    const moved = this.rows[0] !== rs[0] || this.rows[1] !== rs[1] || this.cols[0] !== cs[0] || this.cols[1] !== cs[1];
    this.rows = rs;
    this.cols = cs;
    if (moved) this.source.viewport(this.rows, this.cols, this.frozen);

    // Scrolled cells first: the frozen ones are drawn over any scrolled one under them.
    const frag = document.createDocumentFragment();
    const range = this.range;
    const order = (ls: Line[]) => [...ls.filter((l) => !l.frozen), ...ls.filter((l) => l.frozen)];
    for (const col of order(cols)) {
      const c = col.i;
      const head = div(c === this.sel.col ? 'head col on' : 'head col');
      if (col.frozen) head.classList.add('frozen');
      if (c === this.frozen.columns - 1) head.classList.add('split-right');
      head.textContent = colName(c);
      const grip = div('col-grip');
      grip.dataset.col = String(c);
      head.append(grip);
      place(head, HEAD_W + col.at, 0, col.size, HEAD_H);
      frag.append(head);
    }
    for (const row of order(rows)) {
      const r = row.i;
      const y = HEAD_H + row.at;
      const head = div(r === this.sel.row ? 'head row on' : 'head row');
      if (row.frozen) head.classList.add('frozen');
      if (r === this.frozen.rows - 1) head.classList.add('split-below');
      head.textContent = String(r + 1);
      place(head, 0, y, HEAD_W, row.size);
      frag.append(head);
      for (const col of order(cols)) {
        const c = col.i;
        const shown = this.source.cell(r, c);
        const cell = div('cell');
        if (row.frozen || col.frozen) cell.classList.add('frozen');
        if (r === this.frozen.rows - 1) cell.classList.add('split-below');
        if (c === this.frozen.columns - 1) cell.classList.add('split-right');
        cell.dataset.ref = refOf(r, c);
        cell.dataset.row = String(r);
        cell.dataset.col = String(c);
        cell.setAttribute('role', 'gridcell');
        if (shown === 'loading') cell.classList.add('loading');
        else if (shown) {
          cell.textContent = shown.text;
          // Numbers right; TRUE, FALSE and errors centred, as spreadsheets show them, so they do
          // not read as typed text.
          if (shown.kind) cell.classList.add(shown.kind);
          if (shown.title) cell.title = shown.title;
          paint(cell, shown.style);
        }
        if (r === this.sel.row && c === this.sel.col) {
          cell.classList.add('selected');
          cell.setAttribute('aria-selected', 'true');
        } else if (r >= range.r0 && r <= range.r1 && c >= range.c0 && c <= range.c1) {
          cell.classList.add('in-range');
          cell.setAttribute('aria-selected', 'true');
        }
        place(cell, HEAD_W + col.at, y, col.size, row.size);
        frag.append(cell);
      }
    }
    const corner = div('head corner');
    place(corner, 0, 0, HEAD_W, HEAD_H);
    frag.append(corner);
    this.body.replaceChildren(frag);
    if (this.editing) this.placeEditor(rows, cols);
  }

  private placeEditor(rows: Line[], cols: Line[]): void {
    const row = rows.find((l) => l.i === this.sel.row);
    const col = cols.find((l) => l.i === this.sel.col);
    if (!row || !col) return;
    Object.assign(this.editor.style, {
      left: `${HEAD_W + col.at}px`,
      top: `${HEAD_H + row.at}px`,
      width: `${col.size}px`,
      height: `${row.size}px`,
    });
  }

  startEdit(text: string): void {
    if (this.readOnly) {
      this.source.refused?.();
      return;
    }
    this.reveal();
    this.editing = true;
    this.editor.hidden = false;
    this.editor.value = text;
    this.source.typing?.(text);
    this.render();
    this.editor.focus();
    this.editor.setSelectionRange(text.length, text.length);
  }

  private commit(): void {
    if (!this.editing) return;
    this.editing = false;
    this.editor.hidden = true;
    this.source.edit(this.sel.row, this.sel.col, this.editor.value);
  }

  private cancel(): void {
    this.editing = false;
    this.editor.hidden = true;
    this.el.focus();
    this.schedule();
  }

  private onEditorKey(e: KeyboardEvent): void {
    if (e.key === 'Enter' || e.key === 'Tab') {
      e.preventDefault();
      this.commit();
      this.el.focus();
      if (e.key === 'Enter') this.select(this.sel.row + (e.shiftKey ? -1 : 1), this.sel.col);
      else this.select(this.sel.row, this.sel.col + (e.shiftKey ? -1 : 1));
    } else if (e.key === 'Escape') {
      e.preventDefault();
      this.cancel();
    }
    e.stopPropagation();
  }

  private onKey(e: KeyboardEvent): void {
    if (e.target !== this.el) return;
    const moves: Record<string, [number, number]> = {
      ArrowUp: [-1, 0],
      ArrowDown: [1, 0],
      ArrowLeft: [0, -1],
      ArrowRight: [0, 1],
      Tab: [0, e.shiftKey ? -1 : 1],
      PageDown: [Math.floor(this.bodyH() / ROW_H), 0],
      PageUp: [-Math.floor(this.bodyH() / ROW_H), 0],
    };
    const m = moves[e.key];
    if (m && e.shiftKey && e.key !== 'Tab') {
      // Shift+arrows grow or shrink the range from the active cell.
      e.preventDefault();
      this.extend(this.ext.row + m[0], this.ext.col + m[1]);
    } else if (m) {
      e.preventDefault();
      this.select(this.sel.row + m[0], this.sel.col + m[1]);
    } else if (e.key === 'Enter' || e.key === 'F2') {
      e.preventDefault();
      this.startEdit(this.source.editText(this.sel.row, this.sel.col));
    } else if (e.key === 'Delete' || e.key === 'Backspace') {
      e.preventDefault();
      if (this.readOnly) this.source.refused?.();
      else this.source.clear(this.sel.row, this.sel.col);
    } else if (e.key.length === 1 && !e.ctrlKey && !e.metaKey && !e.altKey) {
      // Typing on a selected cell replaces its contents, as in any spreadsheet.
      e.preventDefault();
      this.startEdit(e.key);
    }
  }
}

/** A row or column drawn: its index, where it starts in the body (pixels) and its size. */
interface Line {
  i: number;
  at: number;
  size: number;
  frozen: boolean;
}

/**
 * The rows (columns) of `axis` in view: the first `frozen` where they are, then the scrolled
 * ones from `scroll` pixels past the frozen ones until `room` is filled.
 */
function lines(axis: Axis, frozen: number, scroll: number, room: number): Line[] {
  const out: Line[] = [];
  for (let i = 0; i < frozen; i++) out.push({ i, at: axis.offset(i), size: axis.size(i), frozen: true });
  const fixed = axis.offset(frozen);
  for (let i = Math.max(frozen, axis.indexAt(fixed + scroll)); i < axis.count; i++) {
    const at = axis.offset(i) - scroll;
    if (at >= room) break;
    out.push({ i, at, size: axis.size(i), frozen: false });
  }
  return out;
}

function div(className: string): HTMLDivElement {
  const d = document.createElement('div');
  d.className = className;
  return d;
}

function place(el: HTMLElement, x: number, y: number, w: number, h: number): void {
  el.style.transform = `translate(${x}px, ${y}px)`;
  el.style.width = `${w}px`;
  el.style.height = `${h}px`;
}

function clamp(v: number, lo: number, hi: number): number {
  return Math.max(lo, Math.min(hi, v));
}
