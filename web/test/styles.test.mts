/** Cell styles in the page (web/src/styles.ts): patches as the server applies them, and what a view draws. */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { test } from 'node:test';
import { compose, controlPatch, overlaid, patched, restyled, type Styled, type StylePatch } from '../src/styles.ts';

test('a patch sets and clears only the fields it names, and a style left empty is none', () => {
  const base = { bold: true, fill: '#ffff00', border: { bottom: { style: 'thin' as const } } };
  assert.deepEqual(patched(base, { italic: true }), { ...base, italic: true });
  assert.deepEqual(patched(base, { bold: false, border: { top: { style: 'double' } } }), {
    fill: '#ffff00',
    border: { bottom: { style: 'thin' }, top: { style: 'double' } },
  });
  assert.equal(patched(base, { bold: null, fill: null, border: { bottom: null } }), undefined);
  assert.equal(patched(undefined, { bold: false }), undefined);
});

test('pending patches compose, later fields winning and borders merged by side', () => {
  const p = compose({ bold: true, border: { top: { style: 'thin' } } }, { bold: false, border: { left: null } });
  assert.deepEqual(p, { bold: false, border: { top: { style: 'thin' }, left: null } });
});

test('a value edit keeps the look of the cell it lands on; a patch keeps the value', () => {
  const server = { value: 5, style: { bold: true } };
  const typed = { value: 6 };
  assert.deepEqual(overlaid(server, typed, undefined, null), { value: 6, style: { bold: true } });
  assert.deepEqual(overlaid(server, undefined, { format: '0%', italic: true }, null), {
    value: 5,
    format: '0%',
    style: { bold: true, italic: true },
  });
  // An empty place styled is a cell; the same place with its style cleared is none.
  assert.deepEqual(restyled(undefined, { fill: '#000000' }, null), { value: null, style: { fill: '#000000' } });
  assert.equal(restyled({ value: null, style: { bold: true } }, { bold: false }, null), undefined);
});

test('the toolbar toggles from the selected cell, and Clear style clears every field', () => {
  assert.deepEqual(controlPatch('bold', { bold: true }, ''), { bold: false });
  assert.deepEqual(controlPatch('italic', undefined, ''), { italic: true });
  assert.deepEqual(controlPatch('fill', undefined, '#FFFFFF'), { fill: null });
  assert.deepEqual(controlPatch('fontSize', undefined, '14'), { fontSize: 14 });
  assert.equal(controlPatch('border', undefined, ''), undefined);
  assert.equal(
    patched(
      { bold: true, fill: '#ff0000', border: { top: { style: 'thin' } } },
      controlPatch('clear', undefined, '') ?? {},
    ),
    undefined,
  );
});

test('the page applies patches as the server is held to (web/test/fixtures/style-patches.json)', () => {
  const fixture = JSON.parse(readFileSync(new URL('fixtures/style-patches.json', import.meta.url), 'utf8')) as {
    cases: { name: string; before: Styled<unknown> | null; patch: StylePatch; after: Styled<unknown> | null }[];
  };
  assert.ok(fixture.cases.length >= 8);
  for (const c of fixture.cases)
    assert.deepEqual(restyled(c.before ?? undefined, c.patch, null) ?? null, c.after, c.name);
});
