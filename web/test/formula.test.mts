/**
 * The page's formula engine without a browser: IronCalc's WebAssembly (the npm package the page
 * ships), loaded in Node, under `Calc` (web/src/formula.ts): values as the server computes them
 * (exact numbers, texts, errors, cycles), the overlay of pending edits over the server's cells,
 * only changed cells set on an edit, and pending row and column changes moving references.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';
import * as ironcalc from '@ironcalc/wasm';
import { type BaseBlock, Calc, type CalcInput, formulaReads, movedTo, useEngine } from '../src/formula.ts';
import { displaceFormula } from '../src/formula-moves.ts';
import { type Cell, parseRef, refOf, type ShapeOp, type Value } from '../src/model.ts';

ironcalc.initSync({ module: readFileSync(createRequire(import.meta.url).resolve('@ironcalc/wasm/wasm_bg.wasm')) });
useEngine(ironcalc);

/** One block of the server's cells from A1, rows of values in the input form. */
function block(values: Value[][], key = '1/0/0'): BaseBlock {
  return {
    key,
    row: 0,
    col: 0,
    values,
    formulas: values.flat().some((v) => typeof v === 'string' && v.startsWith('=')),
  };
}

let version = 0;
function input(blocks: BaseBlock[], overlay: [string, Cell][] = [], shapes: ShapeOp[] = [], seq = 1): CalcInput {
  return { seq, shapes, overlay: new Map(overlay), blocks, blocksVersion: ++version };
}

describe('formulas computed in the page', () => {
  test('values as the server computes them: sums, exact numbers, texts, logic, errors, cycles', () => {
    const calc = new Calc();
    calc.sync(
      input([
        block([
          [1, '=SUM(A1:A3)', '=A1/3', '=0.1+0.2', '=2^60'],
          [2, '="n="&A1', '=A1>0', '=1/0', '=E2'],
          [3, '=B3', '=FOO(1)', '=1+', '=SQRT(-1)'],
          ["'=1+1", '=A4', '=LEN(A4)', '=A5', '12'],
          [null, '=E4+1', '=DATE(2024,1,1)', '=NA()', '=ISTEXT(E4)'],
        ]),
      ]),
    );
    assert.equal(calc.value(0, 1), 6);
    assert.equal(calc.value(0, 2), 1 / 3, 'exact, not the 9 decimals of the engine’s General format');
    assert.equal(calc.value(0, 3), 0.1 + 0.2);
    assert.equal(calc.value(0, 4), 2 ** 60);
    assert.equal(calc.value(1, 1), 'n=1');
    assert.equal(calc.value(1, 2), true);
    assert.deepEqual(calc.value(1, 3), { error: '#DIV/0!' });
    assert.deepEqual(calc.value(2, 1), { error: '#CIRC!' }, 'a cycle is an error value');
    assert.deepEqual(calc.value(1, 4), { error: '#CIRC!' });
    assert.deepEqual(calc.value(2, 2), { error: '#NAME?' });
    assert.deepEqual(calc.value(2, 3), { error: '#ERROR!' });
    assert.deepEqual(calc.value(2, 4), { error: '#NUM!' });
    // A quoted text is the text after the quote; a text that looks like a number stays a text.
    assert.equal(calc.value(3, 1), '=1+1');
    assert.equal(calc.value(3, 2), 4);
    assert.equal(calc.value(3, 3), 0, 'an empty cell reads as 0');
    assert.equal(calc.value(4, 1), 13, 'arithmetic takes a number-like text, as spreadsheets do');
    assert.equal(calc.value(4, 2), 45292, 'a date is its serial number; the cell’s format shows it');
    assert.deepEqual(calc.value(4, 3), { error: '#N/A' });
    assert.equal(calc.value(4, 4), true);
    assert.equal(calc.value(0, 0), undefined, 'not a formula');
  });

  test('the page computes the values the server is held to (web/test/fixtures/formula-agreement.json)', () => {
    const fixture = JSON.parse(readFileSync(new URL('fixtures/formula-agreement.json', import.meta.url), 'utf8')) as {
      cells: Value[][];
      expected: Record<string, Value>;
    };
    const calc = new Calc();
    calc.sync(input([block(fixture.cells)]));
    const computed = new Set<string>();
    for (const [r, line] of fixture.cells.entries())
      for (const [c, v] of line.entries()) if (typeof v === 'string' && v.startsWith('=')) computed.add(refOf(r, c));
    assert.deepEqual([...computed].sort(), Object.keys(fixture.expected).sort(), 'every formula cell is listed');
    for (const [ref, want] of Object.entries(fixture.expected)) {
      const at = parseRef(ref);
      assert.ok(at, ref);
      assert.deepEqual(calc.value(at.row, at.col), want, `${ref}: the page's engine agrees with the server's`);
    }
  });

  test('references move as the server moves them (web/test/fixtures/formula-moves.json)', () => {
    const fixture = JSON.parse(readFileSync(new URL('fixtures/formula-moves.json', import.meta.url), 'utf8')) as {
      cases: { formula: string; change: ShapeOp; moved: string | null }[];
    };
    for (const { formula, change, moved } of fixture.cases)
      assert.equal(
        displaceFormula(formula, ironcalc.getTokens(formula), change, 'Sheet1'),
        moved,
        `${formula} after ${JSON.stringify(change)}`,
      );
    // Through the page's model: a range whose first row a pending delete takes shrinks, as on the
    // server, where the engine's own row delete would read #REF!.
    const calc = new Calc();
    const del: ShapeOp = { axis: 'rows', op: 'delete', at: 0, count: 1 };
    calc.sync(input([block([[1], [2], [3], [null, '=SUM(A1:A3)']])], [], [del]));
    assert.equal(calc.value(2, 1), 5, 'B4 moved to B3 and reads A1:A2');
  });

  test('a pending edit sets only its cell and recomputes at once; one that leaves rebuilds', () => {
    const calc = new Calc();
    const base = [block([[1], [2], [3]])];
    calc.sync(input(base, [['A4', { value: '=SUM(A1:A3)' }]]));
    assert.equal(calc.value(3, 0), 6);
    const builds = calc.stats.builds;
    const overlay: [string, Cell][] = [
      ['A4', { value: '=SUM(A1:A3)' }],
      ['A2', { value: 20 }],
    ];
    calc.sync({ seq: 1, shapes: [], overlay: new Map(overlay), blocks: base, blocksVersion: version });
    assert.equal(calc.value(3, 0), 24);
    assert.equal(calc.stats.builds, builds, 'the edit was set, not the model rebuilt');
    // The same view again (as Replicache answers it: a new map of the same cells): nothing to do.
    const evaluations = calc.stats.evaluations;
    calc.sync({ seq: 1, shapes: [], overlay: new Map(overlay), blocks: base, blocksVersion: version });
    assert.equal(calc.stats.evaluations, evaluations);
    // The edit confirmed: a new sequence, its cells from the server, the overlay empty.
    calc.sync(input([block([[1], [20], [3], ['=SUM(A1:A3)']], '2/0/0')], [], [], 2));
    assert.equal(calc.value(3, 0), 24);
    assert.equal(calc.stats.builds, builds + 1);
    // An edit that cleared a cell of the server's: the cell is empty in the model.
    calc.sync(input([block([[1], [20], [3], ['=SUM(A1:A3)']], '2/0/0')], [['A2', { value: null }]], [], 2));
    assert.equal(calc.value(3, 0), 4);
  });

  test('a block read later joins the model, under the pending edits', () => {
    const calc = new Calc();
    const first = block([[1, '=SUM(A1:A100)']]);
    calc.sync(input([first]));
    assert.equal(calc.value(0, 1), 1);
    const below: BaseBlock = { key: '1/1/0', row: 50, col: 0, values: [[10], [100]], formulas: false };
    calc.sync(input([first, below], [['A52', { value: 1000 }]]));
    assert.equal(calc.value(0, 1), 1011);
  });

  test('pending row and column changes move cells and the references to them', () => {
    const calc = new Calc();
    const base = [block([[1, '=A3*10'], [2, '=SUM(A1:A3)'], [3]])];
    const insert: ShapeOp = { axis: 'rows', op: 'insert', at: 1, count: 1 };
    calc.sync(input(base, [['A2', { value: 100 }]], [insert]));
    // B2 moved to B3 and reads A1:A4 now, the new row's 100 included; B1 reads A4 (was A3).
    assert.equal(calc.value(0, 1), 30);
    assert.equal(calc.value(2, 1), 106);
    assert.equal(calc.value(1, 1), undefined);
    const del: ShapeOp = { axis: 'rows', op: 'delete', at: 2, count: 1 };
    calc.sync(input(base, [], [del]));
    assert.deepEqual(calc.value(0, 1), { error: '#REF!' }, 'the row B1 read is gone');
    assert.deepEqual(movedTo(1, 1, [insert]), { row: 2, col: 1 });
    assert.equal(movedTo(2, 0, [del]), null);
  });

  test('what a formula reads, found by the engine’s lexer as the server finds it', () => {
    const a = (r0: number, c0: number, r1: number, c1: number) => ({ r0, c0, r1, c1 });
    assert.deepEqual(formulaReads('=SUM(A1:A3)'), [a(0, 0, 2, 0)]);
    assert.deepEqual(formulaReads('=$B$2*C3+b4'), [a(1, 1, 1, 1), a(2, 2, 2, 2), a(3, 1, 3, 1)]);
    assert.deepEqual(formulaReads('=SUM(C5:A1)'), [a(0, 0, 4, 2)]);
    assert.deepEqual(formulaReads('=SUM(B:B)+SUM(2:3)'), [a(0, 1, 1_048_575, 1), a(1, 0, 2, 16_383)]);
    assert.deepEqual(formulaReads('="A1"&LOG10(100)&ATAN2(1,1)'), [], 'strings and function names are not cells');
    assert.deepEqual(formulaReads("=Sheet1!A1+other!B2+'My tab'!C3+'sheet1'!D4"), [a(0, 0, 0, 0), a(3, 3, 3, 3)]);
    assert.deepEqual(formulaReads('=IF(TRUE,A1:B2 B2:C3)'), [a(0, 0, 1, 1), a(1, 1, 2, 2)]);
    assert.deepEqual(formulaReads('=1+'), []);
  });

  test('without a formula the engine builds nothing', () => {
    const calc = new Calc();
    calc.sync(input([block([[1, 'x']])], [['B1', { value: 2 }]]));
    assert.equal(calc.stats.builds, 0);
    assert.equal(calc.value(0, 1), undefined);
  });
});
