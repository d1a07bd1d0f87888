/**
 * Formulas computed in the page, with the engine the server computes them with: IronCalc, as
 * WebAssembly (`@ironcalc/wasm`, the release nearest the server's `ironcalc_base`), so the value a
 * person sees at once is the value the server stores (functions/sheet/src/formula/eval.rs loads
 * cells the same way: one tab, `en` locale, UTC).
 *
 * The engine (its glue, a chunk of its own, and its 2 MB `.wasm`) is fetched only when a view has
 * a formula. `Calc` keeps one engine model per open sheet for the view shown: the server's cells
 * read at its sequence, moved by the pending row and column changes (the engine rewrites the
 * references as the server will), under the overlay of pending edits. A new pending edit sets
 * only its cells and recomputes; a new sequence, a new row or column change or an edit that left
 * the overlay builds the model again.
 */
import type * as IronCalc from '@ironcalc/wasm';
import { displaceFormula } from './formula-moves';
import {
  type Area,
  type Cell,
  ERRORS,
  isFormula,
  MAX_COLS,
  MAX_ROWS,
  refOf,
  type ShapeOp,
  setFormulaMover,
  textOf,
  type Value,
} from './model';

export type Engine = typeof IronCalc;
type Model = IronCalc.Model;

let engine: Engine | undefined;
let loading: Promise<Engine> | undefined;

/** Loads the engine once; it is served beside the bundle (web/build.mjs copies the `.wasm`). */
export function loadEngine(): Promise<Engine> {
  loading ??= import('@ironcalc/wasm').then(async (m) => {
    await m.default({ module_or_path: new URL('ironcalc.wasm', import.meta.url) });
    useEngine(m);
    return m;
  });
  return loading;
}

/** An engine made ready some other way (the unit tests, in Node). */
export function useEngine(m: Engine): void {
  engine = m;
  loading = Promise.resolve(m);
  // Pending edits move their formulas' references from now on (model.ts).
  setFormulaMover((formula, shapes) => moveFormula(m, formula, shapes));
}

/** Whether the engine is loaded. */
export function engineReady(): boolean {
  return engine !== undefined;
}

/** The name the engine gives the sheet's one tab; references may name it (`Sheet1!A1`). */
const TAB = 'sheet1';

/**
 * The areas a formula (`=` first) reads on this sheet, found with the engine's own lexer, as the
 * server finds them (functions/sheet/src/formula/deps.rs `references`): cells, ranges, whole
 * columns and rows; references to other tabs left out, and so are the cells `INDIRECT` or
 * `OFFSET` name at run time, there as here. The engine must be loaded (`loadEngine`).
 */
export function formulaReads(formula: string): Area[] {
  if (!engine) throw new Error('the formula engine is not loaded');
  const out: Area[] = [];
  const own = (sheet: string | null | undefined) =>
    sheet === null || sheet === undefined || sheet.toLowerCase() === TAB;
  const cell = (row: number, column: number) =>
    row >= 1 && row <= MAX_ROWS && column >= 1 && column <= MAX_COLS ? { row: row - 1, col: column - 1 } : undefined;
  for (const { token } of engine.getTokens(formula.startsWith('=') ? formula.slice(1) : formula)) {
    if (token === 'Illegal' || token === 'EOF') break;
    if (typeof token !== 'object') continue;
    if ('Reference' in token) {
      const r = token.Reference;
      const c = own(r.sheet) ? cell(r.row, r.column) : undefined;
      if (c) out.push({ r0: c.row, c0: c.col, r1: c.row, c1: c.col });
    } else if ('Range' in token) {
      const { left, right } = token.Range;
      const sheet = (token.Range as { sheet?: string | null }).sheet;
      const a = cell(left.row, left.column);
      const b = cell(right.row, right.column);
      if (own(sheet) && a && b)
        out.push({
          r0: Math.min(a.row, b.row),
          c0: Math.min(a.col, b.col),
          r1: Math.max(a.row, b.row),
          c1: Math.max(a.col, b.col),
        });
    }
  }
  return out;
}

/** Cells of the server's state read at one sequence: a block of rows from (`row`, `col`). */
export interface BaseBlock {
  key: string;
  row: number;
  col: number;
  /** Values in the input form (model.ts). */
  values: Value[][];
  /** Whether any of them is a formula. */
  formulas: boolean;
}

/** What the view shown holds: the server's cells at `seq` (`blocks`), `shapes`, then `overlay`. */
export interface CalcInput {
  seq: number;
  shapes: readonly ShapeOp[];
  overlay: ReadonlyMap<string, Cell>;
  blocks: readonly BaseBlock[];
  /** Changes whenever `blocks` does (a block read or dropped). */
  blocksVersion: number;
}

/**
 * A number format that writes a number exactly: the engine has no call that answers a cell's raw
 * value, and its General format keeps 9 decimals. `@` in a number format is the value as Rust
 * prints an f64 (the shortest text that reads back as the same number) once it is rounded to the
 * format's decimals plus its integer digits, which eighteen `#` decimals leave exact. The page
 * reads the number after `|`.
 */
const EXACT = '#.##################"|"@';

/** A formula the engine refuses as one still evaluates, to this error (as on the server). */
const UNREADABLE = '#ERROR!';

/** The engine's cell types (`getCellType`, Excel's TYPE codes). */
const TEXT = 2;
const LOGICAL = 4;
const ERROR = 16;

/** The formulas of one view, computed by the engine. */
export class Calc {
  private model: Model | undefined;
  private seq = -1;
  private shapes = '';
  private overlay: ReadonlyMap<string, Cell> = new Map();
  private blocks = new Set<string>();
  private blocksVersion = -1;
  /** Formula cells in the model, by A1 ref as shown. */
  private formulas = new Set<string>();
  private computed = new Map<string, Value>();
  private waiting = false;
  /** The engine did not load (`onFailed` was told). */
  failed = false;
  /** Builds of the model and evaluations, for tests and the curious (`window.sheetlogCalc`). */
  readonly stats = { builds: 0, updates: 0, evaluations: 0 };

  /**
   * `onReady` runs once the engine has loaded, to draw the values it can now compute; `onFailed`
   * if it cannot be loaded.
   */
  constructor(
    private readonly onReady: () => void = () => {},
    private readonly onFailed: (e: unknown) => void = () => {},
  ) {}

  /**
   * Brings the model to `input`: nothing to do when it already holds it, else the changed cells
   * or, when something left or moved, all of them; then evaluates. Without any formula the
   * engine is neither loaded nor used.
   */
  sync(input: CalcInput): void {
    const shapes = JSON.stringify(input.shapes);
    const same =
      this.model !== undefined &&
      input.seq === this.seq &&
      shapes === this.shapes &&
      input.overlay === this.overlay &&
      input.blocksVersion === this.blocksVersion;
    if (same) return;
    const hasFormula =
      input.blocks.some((b) => b.formulas) || [...input.overlay.values()].some((c) => isFormula(c.value));
    if (!hasFormula) {
      this.drop();
      return;
    }
    if (!engine) {
      if (!this.waiting) {
        this.waiting = true;
        void loadEngine().then(
          () => this.onReady(),
          (e: unknown) => {
            console.error('the formula engine did not load', e);
            this.failed = true;
            this.onFailed(e);
          },
        );
      }
      return;
    }
    const keys = new Set(input.blocks.map((b) => b.key));
    const rebuild =
      this.model === undefined ||
      input.seq !== this.seq ||
      shapes !== this.shapes ||
      [...this.blocks].some((k) => !keys.has(k)) ||
      [...this.overlay.keys()].some((k) => !input.overlay.has(k)) ||
      (input.shapes.length > 0 && input.blocks.some((b) => !this.blocks.has(b.key)));
    try {
      if (rebuild) this.build(engine, input);
      else this.update(input);
    } catch (e) {
      console.error('the formula engine failed', e);
      this.drop();
      return;
    }
    this.seq = input.seq;
    this.shapes = shapes;
    this.overlay = input.overlay;
    this.blocks = keys;
    this.blocksVersion = input.blocksVersion;
  }

  /** The computed value of the formula shown at (row, col); undefined when none is computed. */
  value(row: number, col: number): Value | undefined {
    const ref = refOf(row, col);
    if (!this.model || !this.formulas.has(ref)) return undefined;
    let v = this.computed.get(ref);
    if (v === undefined) {
      v = read(this.model, row + 1, col + 1);
      this.computed.set(ref, v);
    }
    return v;
  }

  /** Forgets the model (no formula left, or the engine failed). */
  private drop(): void {
    this.model?.free();
    this.model = undefined;
    this.formulas.clear();
    this.computed.clear();
    this.seq = -1;
  }

  private build(e: Engine, input: CalcInput): void {
    this.drop();
    const model = new e.Model('sheet', 'en', 'UTC', 'en');
    this.model = model;
    this.stats.builds++;
    model.pauseEvaluation();
    for (const b of input.blocks)
      if (input.shapes.length) this.putMoved(e, b, input.shapes);
      else this.putBlock(b, input.overlay);
    for (const [ref, c] of input.overlay) this.put(ref, c.value);
    this.evaluate();
  }

  private update(input: CalcInput): void {
    const model = this.model;
    if (!model) return;
    const fresh = input.blocks.filter((b) => !this.blocks.has(b.key));
    const edited = [...input.overlay].filter(([ref, c]) => !sameValue(this.overlay.get(ref)?.value, c.value));
    if (!fresh.length && !edited.length) return;
    this.stats.updates++;
    model.pauseEvaluation();
    for (const b of fresh) this.putBlock(b, input.overlay);
    for (const [ref, c] of edited) this.put(ref, c.value);
    this.evaluate();
  }

  /** A block's cells at their own places (no row or column change pending), under `overlay`. */
  private putBlock(b: BaseBlock, overlay: ReadonlyMap<string, Cell> | undefined): void {
    for (const [i, row] of b.values.entries())
      for (const [j, v] of row.entries()) {
        if (v === null || v === undefined) continue;
        const ref = refOf(b.row + i, b.col + j);
        if (!overlay?.has(ref)) this.put(ref, v, b.row + i, b.col + j);
      }
  }

  /**
   * A block's cells where pending row and column changes put them, formulas moved by the
   * server's rules (formula-moves.ts); the overlay is set over them afterwards.
   */
  private putMoved(e: Engine, b: BaseBlock, shapes: readonly ShapeOp[]): void {
    for (const [i, row] of b.values.entries())
      for (const [j, v] of row.entries()) {
        if (v === null || v === undefined) continue;
        const at = movedTo(b.row + i, b.col + j, shapes);
        if (at) this.put(refOf(at.row, at.col), isFormula(v) ? moveFormula(e, v, shapes) : v, at.row, at.col);
      }
  }

  /** Sets one cell as the server's evaluation loads it (eval.rs `load`). */
  private put(ref: string, v: Value, row?: number, col?: number): void {
    const model = this.model;
    if (!model) return;
    const [r, c] = row === undefined || col === undefined ? at(ref) : [row + 1, col + 1];
    this.formulas.delete(ref);
    if (v === null) model.rangeClearContents(0, r, c, r, c);
    else if (typeof v === 'number') model.setUserInput(0, r, c, String(v));
    else if (typeof v === 'boolean') model.setUserInput(0, r, c, v ? 'TRUE' : 'FALSE');
    else if (typeof v === 'object') model.setUserInput(0, r, c, v.error);
    else if (isFormula(v)) {
      try {
        model.setUserInput(0, r, c, v);
      } catch {
        model.setUserInput(0, r, c, UNREADABLE);
      }
      model.updateRangeStyle({ sheet: 0, row: r, column: c, width: 1, height: 1 }, 'num_fmt', EXACT);
      this.formulas.add(ref);
    }
    // A leading `'` keeps a text a text: `1`, `TRUE` and `=1` included.
    else model.setUserInput(0, r, c, `'${textOf(v)}`);
  }

  private evaluate(): void {
    const model = this.model;
    if (!model) return;
    model.resumeEvaluation();
    model.evaluate();
    // The model queues every change for collaborators the page does not have.
    model.flushSendQueue();
    this.computed.clear();
    this.stats.evaluations++;
  }
}

function sameValue(a: Value | undefined, b: Value): boolean {
  return a === b || (typeof a === 'object' && a !== null && typeof b === 'object' && b !== null && a.error === b.error);
}

/** 1-based row and column of an A1 ref. */
function at(ref: string): [number, number] {
  const m = /^([A-Z]+)(\d+)$/.exec(ref);
  if (!m) throw new Error(`not a cell reference: ${ref}`);
  let col = 0;
  for (const ch of m[1]) col = col * 26 + (ch.charCodeAt(0) - 64);
  return [Number(m[2]), col];
}

/** A formula (`=…`) with its references moved through `shapes` in order. */
export function moveFormula(e: Engine, formula: string, shapes: readonly ShapeOp[]): string {
  let text = formula.slice(1);
  for (const s of shapes) text = displaceFormula(text, e.getTokens(text), s, TAB) ?? text;
  return `=${text}`;
}

/** Where a cell of the server's state is shown after `shapes`; null when it was deleted. */
export function movedTo(row: number, col: number, shapes: readonly ShapeOp[]): { row: number; col: number } | null {
  let r = row;
  let c = col;
  for (const s of shapes) {
    const x = s.axis === 'rows' ? r : c;
    let y = x;
    if (s.op === 'insert' && x >= s.at) y = x + s.count;
    if (s.op === 'delete' && x >= s.at) {
      if (x < s.at + s.count) return null;
      y = x - s.count;
    }
    if (s.axis === 'rows') r = y;
    else c = y;
  }
  return { row: r, col: c };
}

/** A formula cell's value, read from the model (1-based row and column). */
function read(model: Model, row: number, col: number): Value {
  const type = model.getCellType(0, row, col);
  const shown = model.getFormattedCellValue(0, row, col);
  if (type === ERROR) return { error: Object.hasOwn(ERRORS, shown) ? shown : UNREADABLE };
  if (type === LOGICAL) return shown === 'TRUE';
  if (type === TEXT) return shown;
  // A number, through EXACT; an empty result is a number cell with no text.
  if (shown === '') return null;
  const n = Number(shown.slice(shown.indexOf('|') + 1));
  return Number.isFinite(n) ? n : { error: '#NUM!' };
}
