/**
 * What the grid of one sheet shows. A *view* is a sequence number `seq`, the server's cells as of
 * `seq` (read by range, in blocks of 50 rows × 20 columns, only where the grid looks) and the
 * overlay of this client's pending edits (model.ts). Live, the view follows Replicache's
 * `meta/seq`; a new sequence is shown only once the blocks in view have been read at it, so
 * values never flicker back. In history, the view is pinned at an older sequence with no overlay,
 * read-only. This module holds the blocks and the grid, and turns the grid's typing into edits.
 */
import { ApiError, type CellsAnswer, call } from './api';
import { Grid, type Shown } from './grid';
import { type Cell, editText, type LocalView, parseInput, refOf, toBase, type Value } from './model';
import type { SheetContext } from './sheet-context';
import { el, type Messages } from './ui';

const BLOCK_ROWS = 50;
const BLOCK_COLS = 20;
/** Blocks kept in memory; the oldest go first. */
const MAX_BLOCKS = 400;
/** A scroll settles for this long before the blocks it needs are read. */
const SETTLE_MS = 80;
const MAX_TEXT = 32_767;

interface Block {
  values: Value[][];
  formats: Record<string, string>;
}

/** The blocks read so far, keyed `<seq>/<block row>/<block column>`, and the cells in view. */
class Blocks {
  viewport: { rows: [number, number]; cols: [number, number] } = { rows: [0, 40], cols: [0, 12] };
  private readonly blocks = new Map<string, Block>();
  private readonly inflight = new Map<string, Promise<void>>();
  private readonly failed = new Map<string, number>();

  /** `settled` runs after every read, done or failed. */
  constructor(
    private readonly api: string,
    private readonly messages: Messages,
    private readonly settled: () => void,
  ) {}

  private key(seq: number, br: number, bc: number): string {
    return `${seq}/${br}/${bc}`;
  }

  /** The blocks a view needs for the cells in view (through its pending row/column changes). */
  needed(v: LocalView): Set<string> {
    const out = new Set<string>();
    const { rows, cols } = this.viewport;
    for (let r = rows[0]; r < rows[1]; r++) {
      for (let c = cols[0]; c < cols[1]; c++) {
        if (v.cells.has(refOf(r, c))) continue;
        const b = toBase(r, c, v.shapes);
        if (b) out.add(this.key(v.seq, Math.floor(b.row / BLOCK_ROWS), Math.floor(b.col / BLOCK_COLS)));
      }
    }
    return out;
  }

  /** Whether every block `v` needs in view is read. */
  complete(v: LocalView): boolean {
    return [...this.needed(v)].every((k) => this.blocks.has(k));
  }

  load(k: string): Promise<void> {
    const running = this.inflight.get(k);
    if (running) return running;
    const [seq, br, bc] = k.split('/').map(Number);
    const range = `${refOf(br * BLOCK_ROWS, bc * BLOCK_COLS)}:${refOf(br * BLOCK_ROWS + BLOCK_ROWS - 1, bc * BLOCK_COLS + BLOCK_COLS - 1)}`;
    const p = call<CellsAnswer>('GET', `${this.api}/cells?range=${range}&at=${seq}`)
      .then((a) => {
        this.blocks.set(k, { values: a.values as Value[][], formats: a.formats ?? {} });
        this.failed.delete(k);
        while (this.blocks.size > MAX_BLOCKS) {
          const oldest = this.blocks.keys().next().value;
          if (oldest === undefined) break;
          this.blocks.delete(oldest);
        }
      })
      .catch((e: unknown) => {
        this.failed.set(k, Date.now());
        this.messages.error(e instanceof ApiError ? e.message : `Reading cells failed: ${String(e)}`, 'read');
      })
      .finally(() => {
        this.inflight.delete(k);
        this.settled();
      });
    this.inflight.set(k, p);
    return p;
  }

  async loadAll(v: LocalView): Promise<void> {
    await Promise.all([...this.needed(v)].filter((k) => !this.blocks.has(k)).map((k) => this.load(k)));
  }

  /** Reads again the blocks that failed more than 3 s ago. */
  retry(): void {
    const now = Date.now();
    for (const [k, t] of this.failed) if (now - t > 3000 && !this.inflight.has(k)) void this.load(k);
  }

  /** The server's cell under (row, col) of view `v`, or 'loading' while its block is unread. */
  baseCell(v: LocalView, row: number, col: number): Shown {
    const b = toBase(row, col, v.shapes);
    if (!b) return undefined;
    const block = this.blocks.get(this.key(v.seq, Math.floor(b.row / BLOCK_ROWS), Math.floor(b.col / BLOCK_COLS)));
    if (!block) return 'loading';
    const value = block.values[b.row % BLOCK_ROWS]?.[b.col % BLOCK_COLS] ?? null;
    const fmt = block.formats[refOf(b.row, b.col)];
    if (value === null && !fmt) return undefined;
    return fmt ? { value, format: fmt } : { value };
  }
}

export interface SheetView {
  readonly grid: Grid;
  /** Shows `v` once the blocks in view are read at its sequence (at once if they are). */
  show(v: LocalView): Promise<void>;
  /** The cell shown at (row, col), if it is read. */
  current(row: number, col: number): Cell | undefined;
  /** What an edit is made against: the sequence of the view shown (see `Based` in model.ts). */
  based(): { baseSeq?: number };
}

/** The grid in `ctx.ui.gridHost`, drawing `ctx.shown` over the blocks it reads. */
export function sheetView(ctx: SheetContext): SheetView {
  const { ui, messages } = ctx;
  const blocks = new Blocks(ctx.api, messages, () => grid.schedule());

  function cellAt(row: number, col: number): Shown {
    if (!ctx.shown) return 'loading';
    return ctx.shown.cells.get(refOf(row, col)) ?? blocks.baseCell(ctx.shown, row, col);
  }

  function current(row: number, col: number): Cell | undefined {
    const c = cellAt(row, col);
    return c === 'loading' ? undefined : c;
  }

  async function show(v: LocalView): Promise<void> {
    if (ctx.shown && v.seq === ctx.shown.seq) {
      ctx.shown = v;
      grid.schedule();
      return;
    }
    await blocks.loadAll(v);
    // Still what should be shown once read? (A newer view, or leaving history, supersedes it.)
    if (ctx.historyAt === undefined ? ctx.live === v : v.seq === ctx.historyAt) {
      ctx.shown = v;
      grid.schedule();
    }
  }

  const based = () => (ctx.shown ? { baseSeq: ctx.shown.seq } : {});
  let settle: ReturnType<typeof setTimeout> | undefined;
  const source = {
    cell: cellAt,
    viewport(rows: [number, number], cols: [number, number]) {
      blocks.viewport = { rows, cols };
      clearTimeout(settle);
      settle = setTimeout(() => {
        if (ctx.shown) void blocks.loadAll(ctx.shown);
      }, SETTLE_MS);
    },
    edit(row: number, col: number, text: string) {
      if (text.length > MAX_TEXT) {
        messages.error(`That text has ${text.length} characters; a cell holds at most ${MAX_TEXT}.`);
        return;
      }
      const fmt = current(row, col)?.format;
      ctx.act((m) =>
        m.set({
          cells: [{ ref: refOf(row, col), value: parseInput(text), ...(fmt ? { format: fmt } : {}) }],
          ...based(),
        }),
      );
    },
    clear(row: number, col: number) {
      ctx.act((m) => m.set({ cells: [{ ref: refOf(row, col), value: null }], ...based() }));
    },
    selected(row: number, col: number) {
      ui.nameBox.value = refOf(row, col);
      const c = current(row, col);
      ui.formula.value = editText(c);
      // A format the list does not offer (an imported sheet's, say) is shown as its code.
      const code = c?.format ?? '';
      if (code && ![...ui.format.options].some((o) => o.value === code))
        ui.format.append(el('option', { value: code, textContent: code }));
      ui.format.value = code;
    },
    editText: (row: number, col: number) => editText(current(row, col)),
  };
  const grid = new Grid(ui.gridHost, source);
  const renderGrid = grid.render.bind(grid);
  grid.render = () => {
    renderGrid();
    // What a test (or a person) can wait on: the sequence shown, fully read, and what is pending.
    if (ctx.shown && blocks.complete(ctx.shown)) grid.el.dataset.syncedSeq = String(ctx.shown.seq);
    source.selected(grid.selection.row, grid.selection.col);
  };
  // A failed block is retried a few seconds later, not on every frame.
  setInterval(() => blocks.retry(), 1000);
  return { grid, show, current, based };
}
