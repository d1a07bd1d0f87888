/**
 * axis.ts and grid-layout.ts: where rows and columns start when some are resized, and the layout
 * a page draws from the server's, the pull's events and its own pending changes.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { Axis, type Run, resized } from '../src/axis.ts';
import { applied, fromJson, inView, LayoutTracker } from '../src/grid-layout.ts';
import type { LocalView } from '../src/model.ts';

test('offsets and the position at an offset, with runs resized', () => {
  const a = new Axis(1_048_576, 24);
  a.set([
    { at: 10, count: 2, size: 100 },
    { at: 2, count: 1, size: 4 },
  ]);
  assert.equal(a.offset(2), 48);
  assert.equal(a.offset(3), 52);
  assert.equal(a.offset(10), 52 + 7 * 24);
  assert.equal(a.offset(12), 52 + 7 * 24 + 200);
  assert.equal(a.size(11), 100);
  assert.equal(a.size(12), 24);
  for (const i of [0, 1, 2, 3, 9, 10, 11, 12, 500_000, 1_048_575]) {
    assert.equal(a.indexAt(a.offset(i)), i, `start of ${i}`);
    assert.equal(a.indexAt(a.offset(i) + a.size(i) - 1), i, `end of ${i}`);
  }
  assert.equal(a.total(), 1_048_576 * 24 - 20 + 2 * 76);
  assert.equal(a.indexAt(1e12), 1_048_575);
});

test('a resize over runs splits them as the server does', () => {
  const runs = [{ at: 2, count: 5, size: 50 }];
  assert.deepEqual(resized(runs, 4, 1, 80), [
    { at: 2, count: 2, size: 50 },
    { at: 4, count: 1, size: 80 },
    { at: 5, count: 2, size: 50 },
  ]);
  assert.deepEqual(resized(runs, 0, 3, null), [{ at: 3, count: 4, size: 50 }]);
});

test('the layout drawn: the server JSON, the pull events after it, the pending changes over it', async () => {
  const server = fromJson({ columns: [{ at: 'B', count: 2, width: 150 }], freeze: { rows: 1 } });
  assert.deepEqual(server.columns, [{ at: 1, count: 2, size: 150 }]);
  assert.deepEqual(server.freeze, { rows: 1, columns: 0 });
  const next = applied(server, [
    { type: 'set', body: { cells: [] } },
    { type: 'resize-columns', body: { at: 'C', count: 1, width: null } },
    { type: 'resize-rows', body: { at: 3, count: 1, height: 40 } },
    { type: 'freeze', body: { columns: 2 } },
  ]);
  assert.deepEqual(next, {
    columns: [{ at: 1, count: 1, size: 150 }],
    rows: [{ at: 2, count: 1, size: 40 }],
    freeze: { rows: 0, columns: 2 },
  });
  // The tracker reads a sequence once, and carries the next one when the pull says how.
  const reads: number[] = [];
  const t = new LayoutTracker(async (seq) => {
    reads.push(seq);
    return { layout: { columns: [{ at: 'B', count: 2, width: 150 }], freeze: { rows: 1 } } };
  });
  const view = (seq: number, extra: Partial<LocalView> = {}): LocalView => ({
    seq,
    cells: new Map(),
    styles: new Map(),
    shapes: [],
    ...extra,
  });
  assert.deepEqual(await t.at(view(5)), server);
  const carried = view(6, {
    changed: { from: 5, to: 6, events: [{ type: 'freeze', body: { rows: 3, columns: 0 } }] },
  });
  assert.deepEqual((await t.at(carried)).freeze, { rows: 3, columns: 0 });
  await t.at(view(9, { changed: { from: 7, to: 9, events: [] } }));
  assert.deepEqual(reads, [5, 9], 'only what it could not carry is read');
  const pending = view(9, { sizes: { columns: [[1, null]], rows: [] }, freeze: { rows: 0, columns: 0 } });
  assert.deepEqual(LayoutTracker.overlaid(server, pending), {
    columns: [{ at: 2, count: 1, size: 150 }],
    rows: [],
    freeze: { rows: 0, columns: 0 },
  });
  assert.deepEqual(inView([40, 43], 2), [0, 1, 40, 41, 42]);
});

test('resizes agree with the server (web/test/fixtures/layout-resizes.json)', () => {
  const fixture = JSON.parse(readFileSync(new URL('fixtures/layout-resizes.json', import.meta.url), 'utf8')) as {
    cases: { name: string; resizes: { at: number; count: number; size: number | null }[]; sizes: (number | null)[] }[];
  };
  assert.ok(fixture.cases.length >= 4);
  for (const c of fixture.cases) {
    let runs: Run[] = [];
    for (const r of c.resizes) runs = resized(runs, r.at, r.count, r.size);
    const a = new Axis(c.sizes.length, 24);
    a.set(runs);
    const got = c.sizes.map((_, i) => (runs.some((r) => i >= r.at && i < r.at + r.count) ? a.size(i) : null));
    assert.deepEqual(got, c.sizes, c.name);
  }
});
