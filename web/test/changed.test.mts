/**
 * changed.ts: the blocks a page read at one sequence, patched with a pull's `meta/changed`
 * events, are what a read at the next sequence gives (the server's rules, as the style fixture
 * shared with functions/sheet/src/style_tests.rs states them).
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { type CellBlock, cellOps, patchedBlock } from '../src/changed.ts';
import type { Cell, ChangedEvent, Value } from '../src/model.ts';
import type { StylePatch } from '../src/styles.ts';

/** A 2 × 3 block at B2 (row 1, column 1). */
function block(): CellBlock {
  return {
    row: 1,
    col: 1,
    values: [
      [1, 'x', null],
      [null, true, 'y'],
    ],
    formats: { B2: '0.00' },
    styles: { C2: { bold: true } },
  };
}

function apply(b: CellBlock, events: ChangedEvent[]): CellBlock {
  const ops = cellOps(events);
  assert.ok(ops, 'the events apply');
  return patchedBlock(b, ops, 2, 3);
}

test('a set replaces value and format and keeps the look; a clear keeps it too', () => {
  const b = block();
  const out = apply(b, [
    {
      type: 'set',
      body: {
        cells: [
          { ref: 'B2', value: 'new' },
          { ref: 'C2', value: 7, format: '0%' },
          { ref: 'D3', value: null },
        ],
      },
    },
  ]);
  assert.deepEqual(out.values, [
    ['new', 7, null],
    [null, true, null],
  ]);
  assert.deepEqual(out.formats, { C2: '0%' });
  assert.deepEqual(out.styles, { C2: { bold: true } });
  // The block read at the older sequence is left as it was.
  assert.deepEqual(b, block());
});

test('events apply in order, and cells outside the block are left out', () => {
  const out = apply(block(), [
    { type: 'style', body: { ranges: ['A1:C2'], style: { italic: true, format: '0.0' } } },
    {
      type: 'set',
      body: {
        cells: [
          { ref: 'B2', value: 2 },
          { ref: 'Z99', value: 1 },
        ],
      },
    },
    { type: 'style', body: { ranges: ['C2'], style: { bold: false } } },
  ]);
  assert.deepEqual(out.values[0], [2, 'x', null]);
  // The set after the style took the format away from B2; the style's stays on C2.
  assert.deepEqual(out.formats, { C2: '0.0' });
  assert.deepEqual(out.styles, { B2: { italic: true }, C2: { italic: true } });
});

test('a formula, another event type or a bad reference is not applied: the page reads instead', () => {
  const set = (ref: string, value: Value): ChangedEvent => ({ type: 'set', body: { cells: [{ ref, value }] } });
  assert.equal(cellOps([set('B2', '=A1+1')]), undefined);
  assert.equal(cellOps([set('nowhere', 1)]), undefined);
  assert.equal(cellOps([{ type: 'insert-rows', body: { at: 1, count: 1 } } as unknown as ChangedEvent]), undefined);
  assert.ok(cellOps([set('B2', "'=not a formula")]));
  // A column resized changes no cell: the blocks are carried as they are.
  assert.equal(cellOps([{ type: 'resize-columns', body: { at: 'B', count: 1, width: 90 } }])?.size, 0);
});

test('a style event does to a cell what the shared fixture says (web/test/fixtures/style-patches.json)', () => {
  const fixture = JSON.parse(readFileSync(new URL('fixtures/style-patches.json', import.meta.url), 'utf8')) as {
    cases: { name: string; before: Cell | null; patch: StylePatch; after: Cell | null }[];
  };
  for (const c of fixture.cases) {
    const one: CellBlock = {
      row: 0,
      col: 0,
      values: [[c.before?.value ?? null]],
      formats: c.before?.format ? { A1: c.before.format } : {},
      styles: c.before?.style ? { A1: c.before.style } : {},
    };
    const out = patchedBlock(
      one,
      cellOps([{ type: 'style', body: { ranges: ['A1'], style: c.patch } }]) ?? new Map(),
      1,
      1,
    );
    const value = out.values[0][0];
    const got =
      value === null && !out.formats.A1 && !out.styles.A1
        ? null
        : {
            value,
            ...(out.formats.A1 ? { format: out.formats.A1 } : {}),
            ...(out.styles.A1 ? { style: out.styles.A1 } : {}),
          };
    assert.deepEqual(got, c.after, c.name);
  }
});
