/**
 * A grid virtualized in both directions over Excel's full 1,048,576 × 16,384 cells: only the
 * cells in view exist in the DOM. A million 24-pixel rows are taller than browsers let an element
 * be (Chrome stops near 33.5M px, Firefox near 17.9M), so past `MAX_SCROLL_PX` the scrollbar is
 * scaled: its position picks a fraction of the sheet, and the rows are drawn from there.
 */
import { tsvField } from './clipboard';
import { colName, type Drawn, MAX_COLS, MAX_ROWS, refOf } from './model';
import { paint } from './styles';

export const ROW_H = 24;
export const COL_W = 104;
const HEAD_W = 64;
const HEAD_H = 24;
const MAX_SCROLL_PX = 8_000_000;

/**
 * What the grid shows in a cell: its text and alignment, nothing, or a placeholder while its
 * block loads (or its formula's value is computed).
 */
export type Shown = Drawn | undefined | 'loading';

export interface GridSource {
  cell(row: number, col: number): Shown;
  /** The cells in view changed (scroll, resize): fetch what they need. */
  viewport(rows: [number, number], cols: [number, number]): void;
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
    window.addEventListener('mouseup', () => {
      this.dragging = false;
    });
    this.body.addEventListener('dblclick', () => this.startEdit(this.source.editText(this.sel.row, this.sel.col)));
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

  /** Scrolls so the selected cell is in view, if it is not. */
  private reveal(): void {
    const { row, col } = this.sel;
    const viewRows = Math.max(1, Math.floor(this.bodyH() / ROW_H) - 1);
    if (row < this.rows[0] || row >= this.rows[0] + viewRows)
      this.scrollToRow(Math.max(0, row - Math.floor(viewRows / 3)));
    const viewCols = Math.max(1, Math.floor(this.bodyW() / COL_W) - 1);
    if (col < this.cols[0] || col >= this.cols[0] + viewCols) this.scroller.scrollLeft = Math.max(0, col - 1) * COL_W;
  }

  private bodyH(): number {
    return Math.max(0, this.scroller.clientHeight - HEAD_H);
  }
  private bodyW(): number {
    return Math.max(0, this.scroller.clientWidth - HEAD_W);
  }
  private contentH(): number {
    return MAX_ROWS * ROW_H;
  }

  /** Sets the scrollbar so `row` is the first row drawn. */
  private scrollToRow(row: number): void {
    const maxTop = this.scroller.scrollHeight - this.scroller.clientHeight;
    const span = this.contentH() - this.bodyH();
    this.scroller.scrollTop = span > 0 ? Math.round(((row * ROW_H) / span) * maxTop) : 0;
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
    this.spacer.style.width = `${HEAD_W + MAX_COLS * COL_W}px`;

    const top = this.virtualTop();
    const left = this.scroller.scrollLeft;
    const r0 = Math.min(MAX_ROWS - 1, Math.floor(top / ROW_H));
    const c0 = Math.min(MAX_COLS - 1, Math.floor(left / COL_W));
    const offY = r0 * ROW_H - top;
    const offX = c0 * COL_W - left;
    const nr = Math.min(MAX_ROWS - r0, Math.ceil((this.bodyH() - offY) / ROW_H));
    const nc = Math.min(MAX_COLS - c0, Math.ceil((this.bodyW() - offX) / COL_W));
    const moved = this.rows[0] !== r0 || this.rows[1] !== r0 + nr || this.cols[0] !== c0 || this.cols[1] !== c0 + nc;
    this.rows = [r0, r0 + nr];
    this.cols = [c0, c0 + nc];
    if (moved) this.source.viewport(this.rows, this.cols);

    const frag = document.createDocumentFragment();
    const range = this.range;
    for (let j = 0; j < nc; j++) {
      const c = c0 + j;
      const head = div(c === this.sel.col ? 'head col on' : 'head col');
      head.textContent = colName(c);
      place(head, HEAD_W + offX + j * COL_W, 0, COL_W, HEAD_H);
      frag.append(head);
    }
    for (let i = 0; i < nr; i++) {
      const r = r0 + i;
      const y = HEAD_H + offY + i * ROW_H;
      const head = div(r === this.sel.row ? 'head row on' : 'head row');
      head.textContent = String(r + 1);
      place(head, 0, y, HEAD_W, ROW_H);
      frag.append(head);
      for (let j = 0; j < nc; j++) {
        const c = c0 + j;
        const shown = this.source.cell(r, c);
        const cell = div('cell');
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
        place(cell, HEAD_W + offX + j * COL_W, y, COL_W, ROW_H);
        frag.append(cell);
      }
    }
    const corner = div('head corner');
    place(corner, 0, 0, HEAD_W, HEAD_H);
    frag.append(corner);
    this.body.replaceChildren(frag);
    if (this.editing) this.placeEditor(r0, c0, offX, offY);
  }

  private placeEditor(r0: number, c0: number, offX: number, offY: number): void {
    const x = HEAD_W + offX + (this.sel.col - c0) * COL_W;
    const y = HEAD_H + offY + (this.sel.row - r0) * ROW_H;
    Object.assign(this.editor.style, { left: `${x}px`, top: `${y}px`, width: `${COL_W}px`, height: `${ROW_H}px` });
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
