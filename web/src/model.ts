/**
 * The sheet as the page sees it: A1 references, typed values and how they display, and the
 * Replicache side of editing.
 *
 * The page pulls with `view=none` (docs/sync.md), so Replicache's store holds no server cells:
 * only `meta/seq` (the sequence the server's state is pinned at) and what the client's *pending*
 * mutations wrote. Those keys are the overlay the grid draws over cells read by range at that
 * sequence. When a pull confirms a mutation, Replicache rebases and its keys vanish from the
 * overlay in the same step that moves `meta/seq` past it, so an edit is never shown twice or lost.
 */
import { format as numfmt } from 'numfmt';
import type { ReadonlyJSONValue, WriteTransaction } from 'replicache';
import { ERRORS, errorValue } from './errors';
import { rebasePoint, rebaseShape, type Shape, type Step } from './rebase';
import { compose, type Style, type StylePatch } from './styles';

/** Excel's limits, as the server enforces them (docs/sheet-model.md). */
export const MAX_ROWS = 1_048_576;
export const MAX_COLS = 16_384;

export type Value = string | number | boolean | null | { error: string };
export interface Cell {
  value: Value;
  format?: string;
  style?: Style;
}

/** 0-based column → letters: 0 → A, 26 → AA. */
export function colName(col: number): string {
  let s = '';
  for (let n = col + 1; n > 0; n = Math.floor((n - 1) / 26)) s = String.fromCharCode(65 + ((n - 1) % 26)) + s;
  return s;
}

export function refOf(row: number, col: number): string {
  return `${colName(col)}${row + 1}`;
}

/** "B12" → {row: 11, col: 1}; undefined when it is not a cell reference inside the sheet. */
export function parseRef(text: string): { row: number; col: number } | undefined {
  const m = /^\s*([A-Za-z]{1,3})\s*(\d{1,7})\s*$/.exec(text);
  if (!m) return undefined;
  let col = 0;
  for (const ch of m[1].toUpperCase()) col = col * 26 + (ch.charCodeAt(0) - 64);
  const row = Number(m[2]);
  if (row < 1 || row > MAX_ROWS || col < 1 || col > MAX_COLS) return undefined;
  return { row: row - 1, col: col - 1 };
}

/** Column letters → 0-based index ("C" → 2). */
export function parseCol(letters: string): number {
  let col = 0;
  for (const ch of letters.toUpperCase()) col = col * 26 + (ch.charCodeAt(0) - 64);
  return col - 1;
}

export { ERRORS, errorValue };

/** Characters in one formula, `=` excluded (Excel's limit, as the server enforces it). */
export const MAX_FORMULA_CHARS = 8_192;
/** Parentheses and braces open at once in one formula (functions/sheet/src/formula/mod.rs). */
export const MAX_NESTING = 64;

/*
 * Values travel in the API's input form (functions/sheet/src/value.rs): a string that starts with
 * `=` is a formula, and a text that would read as one is written with a leading `'`, which is not
 * part of the text (`"'=1+1"` is the text `=1+1`). The overlay, the blocks and the mutations hold
 * values in this form; a formula's value is computed (formula.ts).
 */

/** True for a formula value: its text as typed, `=` first. */
export function isFormula(v: Value | undefined): v is string {
  return typeof v === 'string' && v.startsWith('=');
}

/** True when a text would read as a formula, so its input form needs a leading `'`. */
export function needsQuote(text: string): boolean {
  return text.replace(/^'+/, '').startsWith('=');
}

/** A text in the input form: with a leading `'` when it would read as a formula. */
export function textValue(text: string): string {
  return needsQuote(text) ? `'${text}` : text;
}

/** The text an input-form string holds (a formula's text stays as it is). */
export function textOf(s: string): string {
  return s.startsWith("'") && needsQuote(s.slice(1)) ? s.slice(1) : s;
}

/**
 * What a person typed → the value to store: `=…` a formula, numbers and TRUE/FALSE as such, error
 * codes as errors, empty as null, anything else a text. A leading `'` makes the rest a text as
 * typed and is not kept, as in any spreadsheet (`'=1+1`, `'007`).
 */
export function parseInput(text: string): Value {
  if (text.startsWith('=')) return text;
  if (text.startsWith("'")) return textValue(text.slice(1));
  const t = text.trim();
  if (t === '') return null;
  if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(t)) {
    const n = Number(t);
    if (Number.isFinite(n)) return n;
  }
  if (/^true$/i.test(t)) return true;
  if (/^false$/i.test(t)) return false;
  return errorValue(t) ?? text;
}

/** Why a formula (`=` first) would be refused by the server, in words; undefined when it is fine. */
export function formulaProblem(formula: string): string | undefined {
  const chars = [...formula].length - 1;
  if (chars > MAX_FORMULA_CHARS)
    return `That formula has ${chars.toLocaleString('en')} characters; a formula holds at most ${MAX_FORMULA_CHARS.toLocaleString('en')}.`;
  let depth = 0;
  let deepest = 0;
  for (let i = 1; i < formula.length; i++) {
    const ch = formula[i];
    if (ch === '"' || ch === "'") {
      // A string or a quoted sheet name: its parentheses are not nesting.
      const end = formula.indexOf(ch, i + 1);
      i = end < 0 ? formula.length : end;
    } else if (ch === '(' || ch === '{') deepest = Math.max(deepest, ++depth);
    else if (ch === ')' || ch === '}') depth = Math.max(0, depth - 1);
  }
  return deepest > MAX_NESTING
    ? `That formula nests ${deepest} parentheses deep; a formula may nest at most ${MAX_NESTING}.`
    : undefined;
}

/**
 * How the grid draws a cell: its text, and how it sits (spreadsheets put numbers right, and
 * TRUE, FALSE and errors in the middle). `title` says what an error means.
 */
export interface Drawn {
  text: string;
  kind?: 'num' | 'bool' | 'error';
  title?: string;
  style?: Style;
}

/**
 * How a cell shows: its value through its number format (Excel's format codes); for a formula,
 * its computed value `computed` (undefined: not computed yet, shown empty). Computed values are
 * plain: a text is the text, with no quoting.
 */
export function drawn(cell: Cell, computed?: Value): Drawn {
  const d = shownText(cell, computed);
  return cell.style ? { ...d, style: cell.style } : d;
}

function shownText(cell: Cell, computed?: Value): Drawn {
  const raw = cell.value;
  const v = isFormula(raw) ? (computed ?? null) : typeof raw === 'string' ? textOf(raw) : raw;
  if (v === null) return { text: '' };
  if (typeof v === 'boolean') return { text: v ? 'TRUE' : 'FALSE', kind: 'bool' };
  if (typeof v === 'object') {
    const meaning = Object.hasOwn(ERRORS, v.error) ? ERRORS[v.error] : undefined;
    return { text: v.error, kind: 'error', ...(meaning ? { title: `${v.error}: ${meaning}` } : {}) };
  }
  if (typeof v === 'number') {
    let text: string;
    try {
      text = numfmt(cell.format ?? 'General', v);
    } catch {
      text = String(v);
    }
    return { text, kind: 'num' };
  }
  return { text: v };
}

/** The text a cell shows (see `drawn`). */
export function display(cell: Cell | undefined, computed?: Value): string {
  return cell ? drawn(cell, computed).text : '';
}

/**
 * The text an editor starts with: the raw value, not its formatted form; a formula's text. A text
 * that would read as something else when typed (`123`, `TRUE`, `=1+1`) gets a leading `'`, so
 * an edit that changes nothing keeps it a text.
 */
export function editText(cell: Cell | undefined): string {
  const v = cell?.value;
  if (v === null || v === undefined) return '';
  if (typeof v === 'boolean') return v ? 'TRUE' : 'FALSE';
  if (typeof v === 'object') return v.error;
  if (typeof v === 'number') return String(v);
  if (isFormula(v)) return v;
  const t = textOf(v);
  return parseInput(t) === v ? t : `'${t}`;
}

/**
 * A range read (`GET …/cells`) as the page holds it: values in the input form, and the server's
 * computed value of each formula it sent one for. A server that computes formulas answers their
 * values in `values`, plain (texts unquoted), and their texts in `formulas`; one that does not
 * answers the input form in `values` and no `formulas`.
 */
export function readAnswer(
  a: { values: unknown[][]; formulas?: Record<string, string> },
  row0: number,
  col0: number,
): { values: Value[][]; computed: Map<string, Value> } {
  const computed = new Map<string, Value>();
  const { formulas } = a;
  if (!formulas) return { values: a.values as Value[][], computed };
  const values = (a.values as Value[][]).map((row, i) =>
    row.map((v, j) => {
      const ref = refOf(row0 + i, col0 + j);
      const f = formulas[ref];
      if (f !== undefined) {
        computed.set(ref, v);
        return f.startsWith('=') ? f : `=${f}`;
      }
      return typeof v === 'string' ? textValue(v) : v;
    }),
  );
  return { values, computed };
}

/** A value as a reader sees it: a text without its input-form quote. */
export function plain(v: Value): Value {
  return typeof v === 'string' && !isFormula(v) ? textOf(v) : v;
}

/** A rectangle of cells, 0-based and inclusive. */
export interface Area {
  r0: number;
  c0: number;
  r1: number;
  c1: number;
}

// ---- The overlay of pending edits ------------------------------------------------------------

/** A row or column insert/delete still pending: cells the overlay does not hold move by it. */
export interface ShapeOp {
  axis: 'rows' | 'columns';
  op: 'insert' | 'delete';
  /** 0-based first row or column. */
  at: number;
  count: number;
}

/**
 * Where a cell the page shows was before the pending shape changes, i.e. which cell of the
 * server's state it displays; null for a cell in a row or column a pending insert created.
 */
export function toBase(row: number, col: number, ops: readonly ShapeOp[]): { row: number; col: number } | null {
  let r = row;
  let c = col;
  for (let i = ops.length - 1; i >= 0; i--) {
    const o = ops[i];
    const x = o.axis === 'rows' ? r : c;
    let y = x;
    if (o.op === 'insert') {
      if (x >= o.at + o.count) y = x - o.count;
      else if (x >= o.at) return null;
    } else if (x >= o.at) {
      y = x + o.count;
    }
    if (o.axis === 'rows') r = y;
    else c = y;
  }
  return { row: r, col: c };
}

/**
 * Every mutation carries `baseSeq`: the sequence of the view its author edited (`meta/seq` of the
 * view shown). The server moves the edit through what others committed since, so it lands on the
 * row and column the person meant (docs/sync.md, "Edits made against an older view").
 */
export interface Based {
  baseSeq?: number;
}
export interface SetArgs extends Based {
  cells: { ref: string; value: Value; format?: string }[];
}
export interface RowArgs extends Based {
  at: number;
  count: number;
}
export interface ColumnArgs extends Based {
  at: string;
  count: number;
}
export interface StyleArgs extends Based {
  /** `A1:C3`, or one cell. */
  ranges: string[];
  style: StylePatch;
}

const SHAPE_PREFIX = 'shape/';
const CELL_PREFIX = 'cell/';
/** A pending `style` mutation's patch of one cell (styles.ts). */
const STYLE_PREFIX = 'style/';
/** Row and column changes others committed, as the pull brings them (`move/<seq>/<n>`). */
export const MOVE_PREFIX = 'move/';

/** A committed row or column change, as a `view=none` pull puts it (functions/api/src/sync/view.rs). */
export interface Move {
  seq: number;
  /** The client and mutation id, when a client's mutation made it. */
  client?: string;
  id?: number;
  /** As applied (empty: rejected). */
  applied: Shape[];
  /** As sent, when rebasing changed it. */
  seen?: Shape[];
}

/** A pending row or column change of this client: as sent, and as it applies on the current state. */
interface ShapeRecord {
  sent: ShapeOp;
  applied: ShapeOp[];
}

type Tx = Pick<WriteTransaction, 'clientID' | 'get' | 'scan'>;

/**
 * What a pending mutation made against `baseSeq` must be moved through, the way the server will
 * (functions/core/src/log/rebase/push.rs): the changes committed at `baseSeq` and after (this
 * client's own as its view held them), then this client's earlier pending changes.
 */
async function history(tx: Tx, baseSeq: number | undefined): Promise<Step[]> {
  const steps: Step[] = [];
  if (baseSeq !== undefined) {
    for await (const [, v] of tx.scan({ prefix: MOVE_PREFIX }).entries()) {
      const m = v as unknown as Move;
      if (m.seq < baseSeq) continue;
      if (m.client !== undefined && m.client === tx.clientID)
        steps.push({ own: { seen: m.seen ?? m.applied, applied: m.applied } });
      else for (const a of m.applied) steps.push({ other: a });
    }
  }
  for await (const [, v] of tx.scan({ prefix: SHAPE_PREFIX }).entries()) {
    const r = shapeRecord(v);
    steps.push({ own: { seen: [r.sent], applied: r.applied } });
  }
  return steps;
}

/** Records written before shapes were rebased held the shape itself. */
function shapeRecord(v: ReadonlyJSONValue): ShapeRecord {
  const r = v as unknown as ShapeRecord | ShapeOp;
  return 'sent' in r ? r : { sent: r, applied: [r] };
}

/** Rebases a pending shape change, moves the overlay's cells for what applies, and records it. */
async function reshape(tx: WriteTransaction, sent: ShapeOp, baseSeq: number | undefined): Promise<void> {
  const applied = rebaseShape(sent, await history(tx, baseSeq)).map((a) => ({ ...sent, at: a.at, count: a.count }));
  for (const a of applied) await move(tx, a);
  const n = ((await tx.get('meta/shapes')) as number | undefined) ?? 0;
  await tx.set('meta/shapes', n + 1);
  const record: ShapeRecord = { sent: { ...sent }, applied };
  await tx.set(`${SHAPE_PREFIX}${String(n).padStart(12, '0')}`, record as unknown as ReadonlyJSONValue);
}

/**
 * Moves a formula's references through row and column changes by the server's rules
 * (formula-moves.ts); formula.ts sets it once the engine, whose lexer it uses, is loaded. Until
 * then a pending formula keeps its text, and the server's rewrite arrives with the pull; Replicache
 * runs pending mutators again on every pull, so they move formulas from the first pull after.
 */
let formulaMover: ((formula: string, shapes: readonly ShapeOp[]) => string) | undefined;

export function setFormulaMover(mover: (formula: string, shapes: readonly ShapeOp[]) => string): void {
  formulaMover = mover;
}

/** `v`, a formula's references moved through `shapes` (other values as they are). */
export function movedValue(v: Value, shapes: readonly ShapeOp[]): Value {
  return isFormula(v) && shapes.length && formulaMover ? formulaMover(v, shapes) : v;
}

function isShapeOp(s: Shape): s is ShapeOp {
  return s.op !== 'replace';
}

function sameShapes(a: readonly Shape[], b: readonly Shape[]): boolean {
  return a.length === b.length && a.every((s, i) => JSON.stringify(s) === JSON.stringify(b[i]));
}

function inverse(s: ShapeOp): ShapeOp {
  return { ...s, op: s.op === 'insert' ? 'delete' : 'insert' };
}

/**
 * The row and column changes a formula typed against an older view moves through, as the server
 * moves it (`rebase_formula` in functions/sheet/src/rebase.rs): each of someone else's, and, for
 * this client's own changes applied otherwise than it saw them, back through what it saw and
 * forward through what applied.
 */
function formulaShapes(steps: readonly Step[]): ShapeOp[] {
  const out: ShapeOp[] = [];
  for (const step of steps) {
    if ('other' in step) {
      if (isShapeOp(step.other)) out.push(step.other);
    } else if (!sameShapes(step.own.seen, step.own.applied)) {
      for (const s of [...step.own.seen].reverse()) if (isShapeOp(s)) out.push(inverse(s));
      for (const s of step.own.applied) if (isShapeOp(s)) out.push(s);
    }
  }
  return out;
}

/**
 * Moves or drops the overlay's cells for a shape change, and moves the references of the
 * formulas among them, as the server's apply of the change moves every formula's.
 */
async function move(tx: WriteTransaction, shape: ShapeOp): Promise<void> {
  const moved: [string, ReadonlyJSONValue][] = [];
  for await (const [key, v] of tx.scan({ prefix: CELL_PREFIX }).entries()) {
    const at = parseRef(key.slice(CELL_PREFIX.length));
    if (!at) continue;
    const x = shape.axis === 'rows' ? at.row : at.col;
    let y: number | null = x;
    if (shape.op === 'insert' && x >= shape.at) y = x + shape.count;
    if (shape.op === 'delete' && x >= shape.at) y = x < shape.at + shape.count ? null : x - shape.count;
    const cell = v as unknown as Cell;
    const value = movedValue(cell.value, [shape]);
    if (y === x && value === cell.value) continue;
    await tx.del(key);
    const limit = shape.axis === 'rows' ? MAX_ROWS : MAX_COLS;
    if (y === null || y >= limit) continue;
    const ref = shape.axis === 'rows' ? refOf(y, at.col) : refOf(at.row, y);
    moved.push([CELL_PREFIX + ref, { ...cell, value } as unknown as ReadonlyJSONValue]);
  }
  for (const [k, v] of moved) await tx.set(k, v);
}

/**
 * The client side of each mutator: the name is the entry type and the args its body, exactly
 * what the server applies (functions/core/src/log/rebase/push.rs), so the overlay shows what will land.
 */
export const mutators = {
  async set(tx: WriteTransaction, args: SetArgs) {
    // Each cell follows its row and column through what others committed since the view it was
    // typed in; a cell whose row or column is gone is not shown (the server will reject it).
    // A formula's references follow the rows and columns they name through the same.
    const steps = await history(tx, args.baseSeq);
    const shapes = formulaShapes(steps);
    for (const c of args.cells) {
      const at = parseRef(c.ref);
      if (!at) continue;
      const row = rebasePoint('rows', at.row, steps);
      const col = rebasePoint('columns', at.col, steps);
      if (row === null || col === null) continue;
      const value = movedValue(c.value, shapes);
      // A cleared cell stays in the overlay as null: the server's state under it may have a value.
      await tx.set(CELL_PREFIX + refOf(row, col), c.format ? { value, format: c.format } : { value });
    }
  },
  async style(tx: WriteTransaction, args: StyleArgs) {
    // Each cell follows its row and column, as a set's do; its pending patches compose.
    const steps = await history(tx, args.baseSeq);
    for (const range of args.ranges) {
      const [a, b = a] = range.split(':');
      const p = parseRef(a);
      const q = parseRef(b);
      if (!p || !q) continue;
      for (let r = Math.min(p.row, q.row); r <= Math.max(p.row, q.row); r++)
        for (let c = Math.min(p.col, q.col); c <= Math.max(p.col, q.col); c++) {
          const row = rebasePoint('rows', r, steps);
          const col = rebasePoint('columns', c, steps);
          if (row === null || col === null) continue;
          const key = STYLE_PREFIX + refOf(row, col);
          const before = (await tx.get(key)) as StylePatch | undefined;
          await tx.set(key, before ? compose(before, args.style) : args.style);
        }
    }
  },
  async 'insert-rows'(tx: WriteTransaction, args: RowArgs) {
    await reshape(tx, { axis: 'rows', op: 'insert', at: args.at - 1, count: args.count }, args.baseSeq);
  },
  async 'delete-rows'(tx: WriteTransaction, args: RowArgs) {
    await reshape(tx, { axis: 'rows', op: 'delete', at: args.at - 1, count: args.count }, args.baseSeq);
  },
  async 'insert-columns'(tx: WriteTransaction, args: ColumnArgs) {
    await reshape(tx, { axis: 'columns', op: 'insert', at: parseCol(args.at), count: args.count }, args.baseSeq);
  },
  async 'delete-columns'(tx: WriteTransaction, args: ColumnArgs) {
    await reshape(tx, { axis: 'columns', op: 'delete', at: parseCol(args.at), count: args.count }, args.baseSeq);
  },
  // The layout (docs/sheet-model.md, "Layout"): each pending size by position, following its
  // column (row) as a set's cells do; a pending split as it was set.
  async 'resize-columns'(tx: WriteTransaction, args: ColumnArgs & { width?: number | null }) {
    await resize(tx, 'columns', parseCol(args.at), args.count, args.width ?? null, args.baseSeq);
  },
  async 'resize-rows'(tx: WriteTransaction, args: RowArgs & { height?: number | null }) {
    await resize(tx, 'rows', args.at - 1, args.count, args.height ?? null, args.baseSeq);
  },
  async freeze(tx: WriteTransaction, args: Partial<Freeze>) {
    await tx.set(FREEZE_KEY, { rows: args.rows ?? 0, columns: args.columns ?? 0 });
  },
};

/** The rows and columns a split keeps in view. */
export interface Freeze {
  rows: number;
  columns: number;
}
const SIZE_PREFIX = 'size/';
const FREEZE_KEY = 'freeze';

/** A resize's positions, each where the rows and columns others changed since moved it. */
async function resize(
  tx: WriteTransaction,
  axis: ShapeOp['axis'],
  at: number,
  count: number,
  size: number | null,
  base?: number,
) {
  const steps = await history(tx, base);
  for (let i = at; i < at + Math.min(count, MAX_COLS); i++) {
    const now = rebasePoint(axis, i, steps);
    if (now !== null) await tx.set(`${SIZE_PREFIX}${axis}/${now}`, size);
  }
}
export type Mutators = typeof mutators;

/** One consistent read of Replicache's store: the pinned sequence and the pending overlay. */
export interface LocalView {
  seq: number;
  cells: Map<string, Cell>;
  /** Pending style patches, by A1 ref. */
  styles: Map<string, StylePatch>;
  shapes: ShapeOp[];
  /** What took the server's state to `seq` from the pull's cookie, when the pull said (changed.ts). */
  changed?: Changed;
  /** Pending sizes (`null`: back to the default) by position, and a pending split. */
  sizes?: { columns: [number, number | null][]; rows: [number, number | null][] };
  freeze?: Freeze;
}

/** A `set` or `style` event as `meta/changed` lists it (functions/api/src/sync/view.rs). */
export type ChangedEvent =
  | { type: 'set'; body: { cells: { ref: string; value: Value; format?: string }[] } }
  | { type: 'style'; body: { ranges: string[]; style: StylePatch } }
  | { type: 'resize-columns' | 'resize-rows' | 'freeze'; body: unknown };

/** A `view=none` pull's `meta/changed`: `events` null when they do more than set and style cells. */
export interface Changed {
  from: number | null;
  to: number;
  events: ChangedEvent[] | null;
}

/**
 * The subscription's result must be plain JSON: Replicache compares results as JSON values to
 * decide whether anything changed, and a Map would always look unchanged.
 */
export interface LocalJson {
  seq: number;
  cells: [string, Cell][];
  styles: [string, StylePatch][];
  shapes: ShapeOp[];
  changed?: Changed;
  sizes?: LocalView['sizes'];
  freeze?: Freeze;
}

export function fromJson(j: LocalJson): LocalView {
  const { cells, styles, ...rest } = j;
  return { ...rest, cells: new Map(cells), styles: new Map(styles) };
}

export async function readLocal(tx: {
  get(key: string): Promise<ReadonlyJSONValue | undefined>;
  scan(o: { prefix: string }): { entries(): AsyncIterable<readonly [string, ReadonlyJSONValue]> };
}): Promise<LocalJson | null> {
  const seq = (await tx.get('meta/seq')) as number | undefined;
  if (seq === undefined) return null;
  const cells: [string, Cell][] = [];
  for await (const [k, v] of tx.scan({ prefix: CELL_PREFIX }).entries())
    cells.push([k.slice(CELL_PREFIX.length), v as unknown as Cell]);
  const styles: [string, StylePatch][] = [];
  for await (const [k, v] of tx.scan({ prefix: STYLE_PREFIX }).entries())
    styles.push([k.slice(STYLE_PREFIX.length), v as unknown as StylePatch]);
  const shapes: ShapeOp[] = [];
  for await (const [, v] of tx.scan({ prefix: SHAPE_PREFIX }).entries()) shapes.push(...shapeRecord(v).applied);
  const changed = (await tx.get('meta/changed')) as Changed | undefined;
  const sizes: NonNullable<LocalView['sizes']> = { columns: [], rows: [] };
  for await (const [k, v] of tx.scan({ prefix: SIZE_PREFIX }).entries()) {
    const [axis, at] = k.slice(SIZE_PREFIX.length).split('/');
    if (axis === 'columns' || axis === 'rows') sizes[axis].push([Number(at), v as number | null]);
  }
  const freeze = (await tx.get(FREEZE_KEY)) as Freeze | undefined;
  return {
    seq,
    cells,
    styles,
    shapes,
    ...(changed?.to === seq ? { changed } : {}),
    ...(sizes.columns.length || sizes.rows.length ? { sizes } : {}),
    ...(freeze ? { freeze } : {}),
  };
}
