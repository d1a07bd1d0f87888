/**
 * The server's rebasing rules (functions/sheet/src/rebase.rs, docs/sync.md "Edits made against
 * an older view") for the page's overlay of pending edits: when a pull brings someone else's row
 * or column insert or delete committed after a pending edit's `baseSeq`, the edit is drawn where
 * the server will put it. Positions only, 0-based, one axis at a time; a port of `Tracker` kept
 * line for line so the two can be read side by side.
 */

/** Excel's limits, as the server enforces them (docs/sheet-model.md). */
const MAX = { rows: 1_048_576, columns: 16_384 } as const;

export type Axis = 'rows' | 'columns';

/** A row or column insert/delete, 0-based, or an import that replaced the sheet. */
export type Shape = { axis: Axis; op: 'insert' | 'delete'; at: number; count: number } | { op: 'replace' };

/** One thing committed after the edit's base, in log order (`Step` in rebase.rs). */
export type Step =
  /** Someone else's change, a direct append or an import. */
  | { other: Shape }
  /** One of the author's own earlier edits: as the author saw it, and as the server applied it. */
  | { own: { seen: readonly Shape[]; applied: readonly Shape[] } };

/** `origin` -1: `start` is a position in the frame walked; j ≥ 0: an offset into own step j's new rows. */
interface Run {
  origin: number;
  start: number;
  len: number;
}

type Shift = { kind: 'insert' | 'delete'; at: number; count: number } | { kind: 'replace' };

function shiftOf(s: Shape, axis: Axis): Shift | undefined {
  if (s.op === 'replace') return { kind: 'replace' };
  return s.axis === axis ? { kind: s.op, at: s.at, count: s.count } : undefined;
}

function clip(out: Run[], run: Run, lo: number, hi: number, make: (s: number) => Run): void {
  const s = Math.max(run.start, lo);
  const e = Math.min(run.start + run.len, hi);
  if (s < e) out.push({ ...make(s), len: e - s });
}

const at = (start: number): Run => ({ origin: -1, start, len: 0 });

class Tracker {
  lost = false;
  constructor(
    readonly axis: Axis,
    readonly anchor: boolean,
    public runs: Run[],
  ) {}

  back(j: number, sh: Shift): void {
    const out: Run[] = [];
    for (const run of this.runs) {
      if (run.origin !== -1 || sh.kind === 'replace') {
        out.push(run);
        continue;
      }
      if (sh.kind === 'insert') {
        clip(out, run, 0, sh.at, at);
        clip(out, run, sh.at, sh.at + sh.count, (s) => ({ origin: j, start: s - sh.at, len: 0 }));
        clip(out, run, sh.at + sh.count, Infinity, (s) => at(s - sh.count));
      } else {
        clip(out, run, 0, sh.at, at);
        clip(out, run, sh.at, Infinity, (s) => at(s + sh.count));
      }
    }
    this.runs = out;
  }

  forward(sh: Shift): void {
    const max = MAX[this.axis];
    const out: Run[] = [];
    for (const run of this.runs) {
      if (run.origin !== -1) {
        out.push(run);
        continue;
      }
      if (sh.kind === 'replace') {
        this.lost = true;
      } else if (sh.kind === 'insert') {
        clip(out, run, 0, sh.at, at);
        clip(out, run, sh.at, Infinity, (s) => at(s + sh.count));
      } else {
        clip(out, run, 0, sh.at, at);
        if (run.start < sh.at + sh.count && run.start + run.len > sh.at) {
          if (this.anchor) out.push({ origin: -1, start: sh.at, len: run.len });
          else this.lost = true;
        }
        clip(out, run, sh.at + sh.count, Infinity, (s) => at(s - sh.count));
      }
    }
    const kept = out.filter((r) => r.origin !== -1 || r.start < max);
    if (kept.length !== out.length) this.lost = true;
    for (const r of kept) {
      if (r.origin === -1 && r.start + r.len > max) {
        r.len = max - r.start;
        this.lost = true;
      }
    }
    this.runs = kept;
  }

  place(j: number, pos: number, count: number): void {
    for (const r of this.runs) {
      if (r.origin !== j) continue;
      const end = Math.min(r.start + r.len, count);
      if (r.start >= end) {
        r.len = 0;
        this.lost = true;
        continue;
      }
      if (end < r.start + r.len) this.lost = true;
      r.origin = -1;
      r.len = end - r.start;
      r.start = pos + r.start;
    }
    this.runs = this.runs.filter((r) => r.len > 0);
  }

  settle(j: number): void {
    const before = this.runs.length;
    this.runs = this.runs.filter((r) => r.origin !== j);
    if (this.runs.length !== before) this.lost = true;
  }

  walk(history: readonly Step[]): this {
    for (let j = history.length - 1; j >= 0; j--) {
      const s = history[j];
      if (!('own' in s)) continue;
      for (let i = s.own.seen.length - 1; i >= 0; i--) {
        const sh = shiftOf(s.own.seen[i], this.axis);
        if (sh) this.back(j, sh);
      }
    }
    history.forEach((s, j) => {
      if ('other' in s) {
        const sh = shiftOf(s.other, this.axis);
        if (sh) this.forward(sh);
        return;
      }
      for (const a of s.own.applied) {
        const sh = shiftOf(a, this.axis);
        if (!sh) continue;
        this.forward(sh);
        if (sh.kind === 'insert') this.place(j, sh.at, sh.count);
      }
      this.settle(j);
    });
    return this;
  }

  point(): number | null {
    const [r, ...rest] = this.runs;
    return r && rest.length === 0 && r.origin === -1 && r.len === 1 ? r.start : null;
  }
}

/** Whether a step can move anything a reference points at. */
function movesAnything(s: Step): boolean {
  if ('other' in s) return true;
  return JSON.stringify(s.own.seen) !== JSON.stringify(s.own.applied);
}

/** Where row or column `pos` of the author's view is now, or null when it was deleted. */
export function rebasePoint(axis: Axis, pos: number, history: readonly Step[]): number | null {
  if (!history.some(movesAnything)) return pos;
  return new Tracker(axis, false, [{ origin: -1, start: pos, len: 1 }]).walk(history).point();
}

/**
 * A row or column change of the author's view as the server will apply it: one shape, two
 * (a delete split around rows inserted inside it, bottom-up), or none (nothing of it is left).
 */
export function rebaseShape(
  shape: Extract<Shape, { axis: Axis }>,
  history: readonly Step[],
): Extract<Shape, { axis: Axis }>[] {
  if (!history.some(movesAnything)) return [shape];
  const max = MAX[shape.axis];
  if (shape.op === 'insert') {
    const p = new Tracker(shape.axis, true, [{ origin: -1, start: shape.at, len: 1 }]).walk(history).point();
    if (p === null || p >= max) return [];
    return [{ ...shape, at: p, count: Math.min(shape.count, max - p) }];
  }
  const t = new Tracker(shape.axis, false, [{ origin: -1, start: shape.at, len: shape.count }]).walk(history);
  const runs = t.runs
    .filter((r) => r.origin === -1 && r.len > 0)
    .map((r) => [r.start, r.start + r.len] as [number, number])
    .sort((a, b) => a[0] - b[0]);
  const merged: [number, number][] = [];
  for (const [s, e] of runs) {
    const last = merged[merged.length - 1];
    if (last && s <= last[1]) last[1] = Math.max(last[1], e);
    else merged.push([s, e]);
  }
  return merged.reverse().map(([s, e]) => ({ ...shape, at: s, count: e - s }));
}
