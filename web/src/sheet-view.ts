/**
 * What the grid of one sheet shows. A *view* is a sequence number `seq`, the server's cells as of
 * `seq` (read by range, in blocks of 50 rows × 20 columns, only where the grid looks) and the
 * overlay of this client's pending edits (model.ts). Live, the view follows Replicache's
 * `meta/seq`; a new sequence is shown only once the blocks in view have been read at it, so
 * values never flicker back. In history, the view is pinned at an older sequence with no overlay,
 * read-only. Formulas are computed by the engine (formula.ts) from the blocks and the overlay;
 * the blocks their formulas read are read too. This module holds the blocks, the grid and the
 * formula bar, and turns typing into edits.
 */
import { ApiError, type CellsAnswer, call, type Extent } from './api';
import { type CellOp, cellOps, patchedBlock } from './changed';
import { pasted } from './clipboard';
import { type BaseBlock, Calc, formulaReads, loadEngine } from './formula';
import { formulaBar } from './formula-bar';
import { Grid, type Shown } from './grid';
import { inView, LayoutTracker } from './grid-layout';
import {
  type Area,
  type Cell,
  colName,
  drawn,
  editText,
  formulaProblem,
  isFormula,
  type LocalView,
  movedValue,
  parseInput,
  readAnswer,
  refOf,
  toBase,
  type Value,
} from './model';
import { HISTORY_READ_ONLY, type SheetContext, VIEW_ONLY } from './sheet-context';
import { overlaid, reflect, type Style } from './styles';
import { el, type Messages } from './ui';

const BLOCK_ROWS = 50;
const BLOCK_COLS = 20;
/**
 * Blocks read beyond the view for the cells its formulas read, and theirs (1,000 cells each).
 * Past this the page shows the server's values of formulas, and computes only what it holds.
 */
const MAX_CLOSURE_BLOCKS = 250;
/**
 * Blocks kept in memory; the oldest go first. Room for two views' formulas and what they read:
 * the one shown and the next sequence's, read before it is shown.
 */
const MAX_BLOCKS = 2 * MAX_CLOSURE_BLOCKS + 100;
/** Blocks one range read of a formula's inputs takes at most (a column of 1,000 rows). */
const RUN_BLOCKS = 20;
/** An area larger than this many blocks is clipped to the sheet's extent before it is read. */
const LARGE_AREA_BLOCKS = 8;
/** A scroll settles for this long before the blocks it needs are read. */
const SETTLE_MS = 80;
const MAX_TEXT = 32_767;

interface Block {
  /** The block's first cell (the server's state). */
  row: number;
  col: number;
  /** Input form (model.ts). */
  values: Value[][];
  formats: Record<string, string>;
  styles: Record<string, Style>;
  /** The server's values of formulas, when it computes them. */
  computed: Map<string, Value>;
  /** Whether the block holds a formula, and what its formulas read (found once needed). */
  formulas: boolean;
  reads?: Area[];
}

/** Whether the view's formulas have every cell they read: all read, too many, or being read. */
type Closure = 'complete' | 'partial' | 'loading';

/** The blocks read so far, keyed `<seq>/<block row>/<block column>`, and the cells in view. */
class Blocks {
  viewport: { rows: [number, number]; cols: [number, number]; frozen?: { rows: number; columns: number } } = {
    rows: [0, 40],
    cols: [0, 12],
  };
  /** Changes whenever a block is read or dropped. */
  version = 0;
  private readonly blocks = new Map<string, Block>();
  private readonly inflight = new Map<string, Promise<void>>();
  private readonly failed = new Map<string, number>();
  private readonly extents = new Map<number, Promise<Extent | undefined>>();
  private readonly closures = new WeakMap<LocalView, { seen: Set<string>; state: Closure; evictions: number }>();
  /** Blocks of each sequence dropped to stay under MAX_BLOCKS. */
  private readonly evictions = new Map<number, number>();
  private listed: { seq: number; version: number; blocks: BaseBlock[] } | undefined;

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
    const { rows, cols, frozen } = this.viewport;
    for (const r of inView(rows, frozen?.rows)) {
      for (const c of inView(cols, frozen?.columns)) {
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

  /** Keeps a block read from a range answer. */
  private store(k: string, row: number, col: number, values: Value[][], a: CellsAnswer, computed: Map<string, Value>) {
    const formats: Record<string, string> = {};
    const own: Map<string, Value> = new Map();
    let formulas = false;
    for (const [i, line] of values.entries())
      for (const [j, v] of line.entries()) {
        const ref = refOf(row + i, col + j);
        const f = a.formats?.[ref];
        if (f) formats[ref] = f;
        const c = computed.get(ref);
        if (c !== undefined) own.set(ref, c);
        if (isFormula(v)) formulas = true;
      }
    this.blocks.set(k, { row, col, values, formats, styles: a.styles ?? {}, computed: own, formulas });
    this.failed.delete(k);
    this.version++;
    this.trim();
  }

  /**
   * The blocks read at `from`, patched with `ops` (changed.ts), as the blocks of `to`: those
   * without formulas (a formula's value is the server's, or comes from what it reads, which a
   * change elsewhere moves). The others are read at `to` as usual.
   */
  carry(from: number, to: number, ops: Map<string, CellOp[]>): void {
    const prefix = `${from}/`;
    const carried: [string, Block][] = [];
    for (const [k, b] of this.blocks) {
      if (!k.startsWith(prefix) || b.formulas || b.computed.size) continue;
      const key = `${to}/${k.slice(prefix.length)}`;
      if (!this.blocks.has(key)) carried.push([key, patchedBlock(b, ops, BLOCK_ROWS, BLOCK_COLS)]);
    }
    for (const [k, b] of carried) this.blocks.set(k, b);
    if (!carried.length) return;
    this.version++;
    this.trim();
  }

  /** Drops the oldest blocks past MAX_BLOCKS. */
  private trim(): void {
    // A view whose formulas read a block dropped here reads it again (`closureOf`).
    while (this.blocks.size > MAX_BLOCKS) {
      const oldest = this.blocks.keys().next().value;
      if (oldest === undefined) break;
      this.blocks.delete(oldest);
      const seq = Number(oldest.slice(0, oldest.indexOf('/')));
      this.evictions.set(seq, (this.evictions.get(seq) ?? 0) + 1);
    }
    if (this.evictions.size > 100)
      for (const seq of this.evictions.keys())
        if (![...this.blocks.keys()].some((key) => key.startsWith(`${seq}/`))) this.evictions.delete(seq);
  }

  /** Reads blocks `br0..br1` of block column `bc` at `seq` in one range read. */
  private read(seq: number, bc: number, br0: number, br1: number): Promise<void> {
    const row0 = br0 * BLOCK_ROWS;
    const col0 = bc * BLOCK_COLS;
    const range = `${refOf(row0, col0)}:${refOf(br1 * BLOCK_ROWS + BLOCK_ROWS - 1, col0 + BLOCK_COLS - 1)}`;
    return call<CellsAnswer>('GET', `${this.api}/cells?range=${range}&at=${seq}`).then((a) => {
      const { values, computed } = readAnswer(a, row0, col0);
      for (let br = br0; br <= br1; br++) {
        const from = (br - br0) * BLOCK_ROWS;
        this.store(this.key(seq, br, bc), br * BLOCK_ROWS, col0, values.slice(from, from + BLOCK_ROWS), a, computed);
      }
    });
  }

  load(k: string): Promise<void> {
    const running = this.inflight.get(k);
    if (running) return running;
    const [seq, br, bc] = k.split('/').map(Number);
    const p = this.read(seq, bc, br, br)
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

  /** Reads blocks that lie one under the other in runs, one range read each (one each, if that fails). */
  private async loadMany(keys: string[]): Promise<void> {
    const columns = new Map<string, number[]>();
    for (const k of keys) {
      if (this.blocks.has(k) || this.inflight.has(k)) continue;
      const [seq, br, bc] = k.split('/').map(Number);
      const col = `${seq}/${bc}`;
      columns.set(col, [...(columns.get(col) ?? []), br]);
    }
    const runs: Promise<void>[] = [];
    for (const [col, rows] of columns) {
      const [seq, bc] = col.split('/').map(Number);
      rows.sort((a, b) => a - b);
      for (let i = 0; i < rows.length; ) {
        let j = i;
        while (j + 1 < rows.length && rows[j + 1] === rows[j] + 1 && j + 1 - i < RUN_BLOCKS) j++;
        const run = rows.slice(i, j + 1).map((br) => this.key(seq, br, bc));
        const p = this.read(seq, bc, rows[i], rows[j])
          .catch(() => Promise.all(run.map((k) => this.load(k))).then(() => {}))
          .finally(() => {
            for (const k of run) if (this.inflight.get(k) === p) this.inflight.delete(k);
          });
        for (const k of run) this.inflight.set(k, p);
        runs.push(p);
        i = j + 1;
      }
    }
    await Promise.all([...runs, ...keys.map((k) => this.inflight.get(k))]);
  }

  /** The blocks in view. */
  async loadView(v: LocalView): Promise<void> {
    await Promise.all([...this.needed(v)].filter((k) => !this.blocks.has(k)).map((k) => this.load(k)));
  }

  /** The blocks in view, then what their formulas read (see `closure`). */
  async loadAll(v: LocalView): Promise<void> {
    await this.loadView(v);
    await this.closure(v);
  }

  /** Reads again the blocks that failed more than 3 s ago. */
  retry(): void {
    const now = Date.now();
    for (const [k, t] of this.failed) if (now - t > 3000 && !this.inflight.has(k)) void this.load(k);
  }

  /** The server's cell under (row, col) of view `v`, or 'loading' while its block is unread. */
  baseCell(v: LocalView, row: number, col: number): { cell: Cell; server?: Value } | undefined | 'loading' {
    const b = toBase(row, col, v.shapes);
    if (!b) return undefined;
    const block = this.blocks.get(this.key(v.seq, Math.floor(b.row / BLOCK_ROWS), Math.floor(b.col / BLOCK_COLS)));
    if (!block) return 'loading';
    // A formula's references as the pending row and column changes move them (the formula bar).
    const value = movedValue(block.values[b.row % BLOCK_ROWS]?.[b.col % BLOCK_COLS] ?? null, v.shapes);
    const ref = refOf(b.row, b.col);
    const fmt = block.formats[ref];
    const style = block.styles[ref];
    if (value === null && !fmt && !style) return undefined;
    const server = block.computed.get(ref);
    const cell: Cell = { value, ...(fmt ? { format: fmt } : {}), ...(style ? { style } : {}) };
    return { cell, ...(server !== undefined ? { server } : {}) };
  }

  /** The blocks read at `seq`, as the formula engine takes them. */
  at(seq: number): BaseBlock[] {
    if (this.listed?.seq === seq && this.listed.version === this.version) return this.listed.blocks;
    const prefix = `${seq}/`;
    const blocks: BaseBlock[] = [];
    for (const [key, b] of this.blocks)
      if (key.startsWith(prefix)) blocks.push({ key, row: b.row, col: b.col, values: b.values, formulas: b.formulas });
    this.listed = { seq, version: this.version, blocks };
    return blocks;
  }

  /**
   * Whether the formulas of view `v` in view have what they read (see `closure`): its state, if
   * every block in view was part of it (a scroll may have brought others).
   */
  closureOf(v: LocalView): Closure {
    const c = this.closures.get(v);
    if (!c) return 'loading';
    if (c.state === 'complete' && c.evictions !== (this.evictions.get(v.seq) ?? 0)) {
      // Blocks of this sequence were dropped, perhaps ones its formulas read: read them again.
      if ([...c.seen].some((k) => !this.blocks.has(k))) {
        void this.closure(v);
        return 'loading';
      }
      c.evictions = this.evictions.get(v.seq) ?? 0;
    }
    const vp = JSON.stringify(this.viewport);
    if (this.covered?.v !== v || this.covered.viewport !== vp || this.covered.seen !== c.seen)
      this.covered = { v, viewport: vp, seen: c.seen, all: [...this.needed(v)].every((k) => c.seen.has(k)) };
    return this.covered.all ? c.state : 'loading';
  }
  private covered: { v: LocalView; viewport: string; seen: Set<string>; all: boolean } | undefined;

  /**
   * Reads the cells the formulas in view read, and the cells those read, as the server loads a
   * formula's inputs before it evaluates (functions/sheet/src/formula/deps.rs), so the page
   * computes what the server computes. Areas larger than a few blocks (`A:A`) are clipped to the
   * sheet's extent at the view's sequence. Past MAX_CLOSURE_BLOCKS it stops, `partial`. Done
   * without waiting when nothing is missing, so a local edit computes in the same frame.
   */
  async closure(v: LocalView): Promise<void> {
    const seen = new Set(this.needed(v));
    const entry = { seen, state: 'loading' as Closure, evictions: this.evictions.get(v.seq) ?? 0 };
    this.closures.set(v, entry);
    const frontier = [...seen];
    // What pending edits read, widened by the pending row and column changes they were typed after.
    const widen = (axis: 'rows' | 'columns') =>
      v.shapes.filter((s) => s.axis === axis).reduce((n, s) => n + s.count, 0);
    const [dr, dc] = [widen('rows'), widen('columns')];
    const pending = [...v.cells.values()].map((c) => c.value).filter(isFormula);
    try {
      if (pending.length) await loadEngine();
      const extra = pending.flatMap((f) =>
        formulaReads(f).map((a) => ({
          r0: Math.max(0, a.r0 - dr),
          c0: Math.max(0, a.c0 - dc),
          r1: a.r1 + dr,
          c1: a.c1 + dc,
        })),
      );
      entry.state = await this.walk(v, seen, frontier, extra);
    } catch (e) {
      // The engine did not load (the page says so once): the server's values are what there is.
      console.error('reading what the formulas read failed', e);
      entry.state = 'partial';
    }
    this.settled();
  }

  /**
   * Rounds of `closure`: the blocks the frontier's formulas read become the next frontier;
   * `extra` is what the overlay's formulas read. The engine's lexer finds what a formula reads,
   * so it is loaded first when there is a formula (it is needed to compute them anyway).
   */
  private async walk(v: LocalView, seen: Set<string>, start: string[], extra: Area[]): Promise<Closure> {
    let frontier = start;
    let areas = extra;
    for (;;) {
      const withFormulas = frontier.flatMap((k) => {
        const b = this.blocks.get(k);
        return b?.formulas ? [b] : [];
      });
      if (withFormulas.length) await loadEngine();
      for (const b of withFormulas) areas.push(...readsOf(b));
      if (!areas.length) return 'complete';
      let ext: Extent | undefined;
      if (areas.some((a) => blockCount(a) > LARGE_AREA_BLOCKS)) {
        ext = await this.extent(v.seq);
        if (!ext) return 'partial';
      }
      const fresh: string[] = [];
      for (const a of areas) {
        const r1 = ext ? Math.min(a.r1, ext.rows - 1) : a.r1;
        const c1 = ext ? Math.min(a.c1, ext.columns - 1) : a.c1;
        for (let br = Math.floor(a.r0 / BLOCK_ROWS); br <= Math.floor(r1 / BLOCK_ROWS); br++)
          for (let bc = Math.floor(a.c0 / BLOCK_COLS); bc <= Math.floor(c1 / BLOCK_COLS); bc++) {
            const k = this.key(v.seq, br, bc);
            if (seen.has(k)) continue;
            seen.add(k);
            fresh.push(k);
            if (seen.size > MAX_CLOSURE_BLOCKS) return 'partial';
          }
      }
      const missing = fresh.filter((k) => !this.blocks.has(k));
      if (missing.length) {
        await this.loadMany(missing);
        if (missing.some((k) => !this.blocks.has(k))) return 'partial';
      }
      frontier = fresh;
      areas = [];
    }
  }

  /** The sheet's extent at `seq` (read once), or undefined when it cannot be read. */
  extent(seq: number): Promise<Extent | undefined> {
    let p = this.extents.get(seq);
    if (!p) {
      p = call<Extent>('GET', `${this.api}/extent?at=${seq}`).catch(() => undefined);
      this.extents.set(seq, p);
      // Only recent sequences are shown again.
      for (const old of this.extents.keys()) if (this.extents.size > 20) this.extents.delete(old);
    }
    return p;
  }
}

/** What a block's formulas read, found once. */
function readsOf(b: Block): Area[] {
  if (!b.reads) {
    b.reads = [];
    for (const line of b.values) for (const v of line) if (isFormula(v)) b.reads.push(...formulaReads(v));
  }
  return b.reads;
}

/** How many blocks an area spans. */
function blockCount(a: Area): number {
  return (
    (Math.floor(a.r1 / BLOCK_ROWS) - Math.floor(a.r0 / BLOCK_ROWS) + 1) *
    (Math.floor(a.c1 / BLOCK_COLS) - Math.floor(a.c0 / BLOCK_COLS) + 1)
  );
}

export interface SheetView {
  readonly grid: Grid;
  /** Shows `v` once the blocks in view, and what their formulas read, are read at its sequence (at once if they are). */
  show(v: LocalView): Promise<void>;
  /** The cell shown at (row, col), if it is read. */
  current(row: number, col: number): Cell | undefined;
  /** What an edit is made against: the sequence of the view shown (see `Based` in model.ts). */
  based(): { baseSeq?: number };
}

/**
 * The grid in `ctx.ui.gridHost`, drawing `ctx.shown` over the blocks it reads, formulas computed
 * by the engine (formula.ts); and the formula bar, which shows and edits the selected cell.
 */
export function sheetView(ctx: SheetContext): SheetView {
  const { ui, messages } = ctx;
  const blocks = new Blocks(ctx.api, messages, () => grid.schedule());
  const layouts = new LayoutTracker((seq) => blocks.extent(seq));
  const calc = new Calc(
    () => grid.schedule(),
    () => {
      messages.error('The formula engine could not be loaded: formulas show no values here. Reload to try again.');
      grid.schedule();
    },
  );
  (window as unknown as { sheetlogCalc?: Calc }).sheetlogCalc = calc;

  /** The cell at (row, col) of the view shown, with the server's value when it is a formula the server computed. */
  function lookup(row: number, col: number): { cell: Cell; server?: Value } | undefined | 'loading' {
    if (!ctx.shown) return 'loading';
    const ref = refOf(row, col);
    const own = ctx.shown.cells.get(ref);
    const patch = ctx.shown.styles.get(ref);
    if (own && !patch) return { cell: own };
    const base = blocks.baseCell(ctx.shown, row, col);
    if (base === 'loading') return own ? { cell: own } : base;
    const cell = overlaid(base?.cell, own, patch, null);
    return cell && (own ? { cell } : { ...base, cell });
  }

  function current(row: number, col: number): Cell | undefined {
    const c = lookup(row, col);
    return c === 'loading' ? undefined : c?.cell;
  }

  /**
   * What a cell shows. A formula shows the value computed here once the page holds every cell it
   * reads; until then the server's value, if it sent one; past MAX_CLOSURE_BLOCKS, what the page
   * computes from what it holds.
   */
  function shownAt(row: number, col: number): Shown {
    const c = lookup(row, col);
    if (c === undefined || c === 'loading') return c;
    if (!isFormula(c.cell.value)) return drawn(c.cell);
    const v = ctx.shown;
    const local = calc.value(row, col);
    const closure = v ? blocks.closureOf(v) : 'loading';
    if (local !== undefined && closure === 'complete') return drawn(c.cell, local);
    if (c.server !== undefined) return drawn(c.cell, c.server);
    if (local !== undefined && closure === 'partial') return drawn(c.cell, local);
    // Without the engine, a formula the server sent no value of shows nothing.
    return calc.failed ? drawn(c.cell) : 'loading';
  }

  /** Brings the engine to the view shown (nothing when it holds it already). */
  function compute(): void {
    const v = ctx.shown;
    if (!v) return;
    calc.sync({
      seq: v.seq,
      shapes: v.shapes,
      overlay: v.cells,
      blocks: blocks.at(v.seq),
      blocksVersion: blocks.version,
    });
  }

  /** Draws the layout of `v`: the server's at its sequence, with `v`'s pending changes. */
  async function lay(v: LocalView): Promise<void> {
    const d = LayoutTracker.overlaid(await layouts.at(v), v);
    if (ctx.shown !== v) return;
    grid.setLayout(d.columns, d.rows, d.freeze);
    ui.freeze.textContent = d.freeze.rows || d.freeze.columns ? 'Unfreeze' : 'Freeze';
  }

  async function show(v: LocalView): Promise<void> {
    if (ctx.shown && v.seq === ctx.shown.seq) {
      ctx.shown = v;
      void lay(v);
      // A pending edit's formula may read cells not read yet; nothing to wait for when it does not.
      void blocks.closure(v);
      grid.schedule();
      return;
    }
    // The first view shows once its cells are read, its formulas' values as they come; a later
    // one waits for what its formulas read too, so a value never flickers back.
    const first = ctx.shown === undefined;
    // What the pull says changed since the view shown: its blocks patched, not read again.
    const c = v.changed;
    const ops = c?.events && c.from === ctx.shown?.seq && c.to === v.seq ? cellOps(c.events) : undefined;
    if (c && ops) blocks.carry(c.from ?? 0, v.seq, ops);
    await (first ? blocks.loadView(v) : blocks.loadAll(v));
    // Still what should be shown once read? (A newer view, or leaving history, supersedes it.)
    if (ctx.historyAt === undefined ? ctx.live === v : v.seq === ctx.historyAt) {
      ctx.shown = v;
      void lay(v);
      if (first) void blocks.closure(v);
      grid.schedule();
    }
  }

  const based = () => (ctx.shown ? { baseSeq: ctx.shown.seq } : {});

  /** Stores what was typed into (row, col), refused in words when the server would refuse it. */
  function edit(row: number, col: number, text: string): void {
    if (text.length > MAX_TEXT) {
      messages.error(`That text has ${text.length} characters; a cell holds at most ${MAX_TEXT}.`);
      return;
    }
    const value = parseInput(text);
    const problem = isFormula(value) ? formulaProblem(value) : undefined;
    if (problem) {
      messages.error(problem);
      return;
    }
    const fmt = current(row, col)?.format;
    ctx.act((m) => m.set({ cells: [{ ref: refOf(row, col), value, ...(fmt ? { format: fmt } : {}) }], ...based() }));
  }

  let settle: ReturnType<typeof setTimeout> | undefined;
  const source = {
    cell: shownAt,
    viewport(rows: [number, number], cols: [number, number], frozen: { rows: number; columns: number }) {
      blocks.viewport = { rows, cols, frozen };
      clearTimeout(settle);
      settle = setTimeout(() => {
        if (ctx.shown) void blocks.loadAll(ctx.shown);
      }, SETTLE_MS);
    },
    edit,
    resizeColumn(col: number, width: number | null) {
      ctx.act((m) => m['resize-columns']({ at: colName(col), count: 1, width, ...based() }));
    },
    clear(row: number, col: number) {
      ctx.act((m) => m.set({ cells: [{ ref: refOf(row, col), value: null }], ...based() }));
    },
    paste(row: number, col: number, text: string) {
      const p = pasted(text, row, col, (r, c) => current(r, c)?.format);
      if (typeof p === 'string') return messages.error(p);
      if (p.dropped) messages.warn(`${p.dropped} pasted cells fell past the sheet's edge and were left out.`);
      // One `set` for the whole range: one mutation, so one step to undo.
      if (p.cells.length) ctx.act((m) => m.set({ cells: p.cells, ...based() }));
    },
    selected(row: number, col: number) {
      // Every render calls this; a reference being typed into the name box is left as typed.
      if (document.activeElement !== ui.nameBox) ui.nameBox.value = refOf(row, col);
      const c = current(row, col);
      bar.show(row, col, editText(c));
      // A format the list does not offer (an imported sheet's, say) is shown as its code.
      const code = c?.format ?? '';
      if (code && ![...ui.format.options].some((o) => o.value === code))
        ui.format.append(el('option', { value: code, textContent: code }));
      ui.format.value = code;
      reflect(ui.styles, c?.style);
    },
    editText: (row: number, col: number) => editText(current(row, col)),
    typing: (text: string) => bar.mirror(text),
    refused: () => ctx.messages.warn(ctx.viewOnly ? VIEW_ONLY : HISTORY_READ_ONLY, 'read-only'),
  };
  const grid = new Grid(ui.gridHost, source);
  const bar = formulaBar(ctx, grid, edit);
  const renderGrid = grid.render.bind(grid);
  grid.render = () => {
    compute();
    renderGrid();
    // What a test (or a person) can wait on: the sequence shown, fully read, and what is pending.
    if (ctx.shown && blocks.complete(ctx.shown)) grid.el.dataset.syncedSeq = String(ctx.shown.seq);
    source.selected(grid.selection.row, grid.selection.col);
  };
  // A failed block is retried a few seconds later, not on every frame.
  setInterval(() => blocks.retry(), 1000);
  return { grid, show, current, based };
}
