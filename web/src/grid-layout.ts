/**
 * The sheet's layout as the grid draws it (docs/sheet-model.md, "Layout"): the server's column
 * widths, row heights and split at the sequence shown, with this page's pending resizes and
 * split over them. The server's is read with the extent at a new sequence, unless the pull said
 * what changed since the one before (`meta/changed`, changed.ts): then its resizes and split are
 * applied here and nothing is read.
 */
import { type Run, resized } from './axis';
import type { ChangedEvent, Freeze, LocalView } from './model';
import { parseCol } from './model';

/** The `layout` of an extent answer (functions/sheet/src/layout.rs). */
export interface LayoutJson {
  columns?: { at: string; count: number; width: number }[];
  rows?: { at: number; count: number; height: number }[];
  freeze?: Partial<Freeze>;
}

/** The layout in the grid's terms: 0-based runs, and the split. */
export interface Drawn {
  columns: Run[];
  rows: Run[];
  freeze: Freeze;
}

export function fromJson(j: LayoutJson | undefined): Drawn {
  return {
    columns: (j?.columns ?? []).map((c) => ({ at: parseCol(c.at), count: c.count, size: c.width })),
    rows: (j?.rows ?? []).map((r) => ({ at: r.at - 1, count: r.count, size: r.height })),
    freeze: { rows: j?.freeze?.rows ?? 0, columns: j?.freeze?.columns ?? 0 },
  };
}

/** `d` after the layout events among `events` (the cells' events leave it alone). */
export function applied(d: Drawn, events: readonly ChangedEvent[]): Drawn {
  let { columns, rows, freeze } = d;
  for (const e of events) {
    const b = e.body as { at: string | number; count: number; width?: number | null; height?: number | null };
    if (e.type === 'resize-columns') columns = resized(columns, parseCol(String(b.at)), b.count, b.width ?? null);
    else if (e.type === 'resize-rows') rows = resized(rows, Number(b.at) - 1, b.count, b.height ?? null);
    else if (e.type === 'freeze') {
      const f = e.body as Partial<Freeze>;
      freeze = { rows: f.rows ?? 0, columns: f.columns ?? 0 };
    }
  }
  return { columns, rows, freeze };
}

/** The rows (columns) `a..b` scrolled into view and the `frozen` ones before them. */
export function inView([a, b]: [number, number], frozen = 0): number[] {
  const out = Array.from({ length: Math.min(frozen, a) }, (_, i) => i);
  for (let i = a; i < b; i++) out.push(i);
  return out;
}

/** The server's layout at each sequence shown, and the page's pending changes over it. */
export class LayoutTracker {
  private known: { seq: number; drawn: Drawn } | undefined;

  /** `read` answers the extent's `layout` at a sequence (undefined when it cannot be read). */
  constructor(private readonly read: (seq: number) => Promise<{ layout?: LayoutJson } | undefined>) {}

  /** The server's layout at `v.seq`: carried from the one before when the pull said how. */
  async at(v: LocalView): Promise<Drawn> {
    const k = this.known;
    if (k?.seq === v.seq) return k.drawn;
    const c = v.changed;
    const drawn =
      k && c?.events && c.from === k.seq ? applied(k.drawn, c.events) : fromJson((await this.read(v.seq))?.layout);
    this.known = { seq: v.seq, drawn };
    return drawn;
  }

  /** What the grid draws for `v`: the server's layout at its sequence with `v`'s pending changes. */
  static overlaid(d: Drawn, v: LocalView): Drawn {
    let { columns, rows } = d;
    for (const [at, size] of v.sizes?.columns ?? []) columns = resized(columns, at, 1, size);
    for (const [at, size] of v.sizes?.rows ?? []) rows = resized(rows, at, 1, size);
    return { columns, rows, freeze: v.freeze ?? d.freeze };
  }
}
