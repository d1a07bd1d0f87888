/**
 * One axis of the grid (its rows or its columns): `count` positions of a default size, some runs
 * of them resized (the sheet's layout, docs/sheet-model.md "Layout"). Answers where a position
 * starts and which position lies at an offset, in time logarithmic in the runs, so a million
 * rows with a few resized ones cost no more than a uniform grid.
 */

/** A run of positions `at..at + count` (0-based) of one size, in pixels. */
export interface Run {
  at: number;
  count: number;
  size: number;
}

export class Axis {
  /** Runs sorted by `at`, disjoint, each with the pixels before it (`start`). */
  private runs: (Run & { start: number })[] = [];

  constructor(
    readonly count: number,
    readonly base: number,
  ) {}

  /** Sets the resized runs: disjoint (as the server's and `resized`'s are), in any order. */
  set(runs: readonly Run[]): void {
    const sorted = runs
      .filter((r) => r.count > 0 && r.at < this.count)
      .map((r) => ({ ...r, count: Math.min(r.count, this.count - r.at) }))
      .sort((a, b) => a.at - b.at);
    let extra = 0;
    this.runs = sorted.map((r) => {
      const run = { ...r, start: r.at * this.base + extra };
      extra += r.count * (r.size - this.base);
      return run;
    });
  }

  /** The size of position `i`. */
  size(i: number): number {
    const r = this.runAtOrBefore(i);
    return r && i < r.at + r.count ? r.size : this.base;
  }

  /** The pixels before position `i`. */
  offset(i: number): number {
    const r = this.runAtOrBefore(i);
    if (!r) return i * this.base;
    if (i < r.at + r.count) return r.start + (i - r.at) * r.size;
    return r.start + r.count * r.size + (i - r.at - r.count) * this.base;
  }

  /** The pixels of every position. */
  total(): number {
    return this.offset(this.count);
  }

  /** The position that pixel offset `px` falls in (clamped to the axis). */
  indexAt(px: number): number {
    if (px <= 0) return 0;
    // The last run starting at or before px.
    let lo = 0;
    let hi = this.runs.length - 1;
    let found = -1;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (this.runs[mid].start <= px) {
        found = mid;
        lo = mid + 1;
      } else hi = mid - 1;
    }
    let i: number;
    if (found < 0) i = Math.floor(px / this.base);
    else {
      const r = this.runs[found];
      const inRun = px - r.start;
      i =
        inRun < r.count * r.size
          ? r.at + Math.floor(inRun / r.size)
          : r.at + r.count + Math.floor((inRun - r.count * r.size) / this.base);
    }
    return Math.min(this.count - 1, i);
  }

  private runAtOrBefore(i: number): (Run & { start: number }) | undefined {
    let lo = 0;
    let hi = this.runs.length - 1;
    let found: (Run & { start: number }) | undefined;
    while (lo <= hi) {
      const mid = (lo + hi) >> 1;
      if (this.runs[mid].at <= i) {
        found = this.runs[mid];
        lo = mid + 1;
      } else hi = mid - 1;
    }
    return found;
  }
}

/**
 * `runs` (disjoint) with `at..at + count` set to `size`, or to the default when `null`: the
 * server's rule for a resize (functions/sheet/src/layout.rs, `Sizes::set`), for a pending one.
 */
export function resized(runs: readonly Run[], at: number, count: number, size: number | null): Run[] {
  const end = at + count;
  const out: Run[] = [];
  for (const r of runs) {
    const rEnd = r.at + r.count;
    if (rEnd <= at || r.at >= end) {
      out.push(r);
      continue;
    }
    if (r.at < at) out.push({ at: r.at, count: at - r.at, size: r.size });
    if (rEnd > end) out.push({ at: end, count: rEnd - end, size: r.size });
  }
  if (size !== null) out.push({ at, count, size });
  return out.sort((a, b) => a.at - b.at);
}
