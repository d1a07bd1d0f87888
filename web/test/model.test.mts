/**
 * The web client's model without a browser: references, typed input (formulas, quoted texts),
 * display through number formats, CSV fields, and the overlay of pending edits (mutators on a store that behaves like
 * Replicache's: ordered keys, scan by prefix) checked against the mapping the grid draws with.
 */
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { describe, test } from 'node:test';
import * as ironcalc from '@ironcalc/wasm';
import type { WriteTransaction } from 'replicache';
import { parseTsv, pasted, tsvField } from '../src/clipboard.ts';
import { csvField, csvValue } from '../src/csv.ts';
import { useEngine } from '../src/formula.ts';
import {
  type Cell,
  colName,
  display,
  drawn,
  editText,
  formulaProblem,
  MAX_COLS,
  type Move,
  mutators,
  parseInput,
  parseRef,
  plain,
  readAnswer,
  readLocal,
  refOf,
  type ShapeOp,
  toBase,
  type Value,
} from '../src/model.ts';
import { rebasePoint, rebaseShape, type Step } from '../src/rebase.ts';

// The engine's lexer moves pending formulas' references (model.ts `setFormulaMover`).
ironcalc.initSync({ module: readFileSync(createRequire(import.meta.url).resolve('@ironcalc/wasm/wasm_bg.wasm')) });
useEngine(ironcalc);

/** Enough of a Replicache transaction for the mutators: an ordered key-value store. */
function store() {
  const m = new Map<string, unknown>();
  const tx = {
    async get(k: string) {
      return m.get(k);
    },
    async set(k: string, v: unknown) {
      m.set(k, v);
    },
    async del(k: string) {
      return m.delete(k);
    },
    scan({ prefix }: { prefix: string }) {
      const rows = [...m.entries()].filter(([k]) => k.startsWith(prefix)).sort(([a], [b]) => (a < b ? -1 : 1));
      return {
        entries: () =>
          (async function* () {
            yield* rows;
          })(),
      };
    },
  };
  return { m, tx: tx as unknown as WriteTransaction };
}

describe('references and values', () => {
  test('columns and refs round-trip at the edges of the sheet', () => {
    assert.equal(colName(0), 'A');
    assert.equal(colName(25), 'Z');
    assert.equal(colName(26), 'AA');
    assert.equal(colName(16_383), 'XFD');
    assert.deepEqual(parseRef('xfd1048576'), { row: 1_048_575, col: 16_383 });
    assert.equal(parseRef('XFE1'), undefined);
    assert.equal(parseRef('A0'), undefined);
    assert.equal(parseRef('A1048577'), undefined);
    for (const [r, c] of [
      [0, 0],
      [899_999, 27],
      [1_048_575, 16_383],
    ]) {
      assert.deepEqual(parseRef(refOf(r, c)), { row: r, col: c });
    }
  });

  test('typed text becomes numbers, booleans, errors or text', () => {
    assert.equal(parseInput('42'), 42);
    assert.equal(parseInput(' -3.5e2 '), -350);
    assert.equal(parseInput('true'), true);
    assert.deepEqual(parseInput('#div/0!'), { error: '#DIV/0!' });
    assert.equal(parseInput(''), null);
    assert.equal(parseInput('12 apples'), '12 apples');
    assert.equal(parseInput('1.2.3'), '1.2.3');
  });

  test('= makes a formula, as typed; a leading quote keeps any text a text and is not kept', () => {
    assert.equal(parseInput('=SUM(A1:A3)'), '=SUM(A1:A3)');
    assert.equal(parseInput('=1+1'), '=1+1');
    assert.equal(parseInput('='), '=');
    // A text that would read as a formula goes in the API's input form: one leading quote.
    assert.equal(parseInput("'=1+1"), "'=1+1");
    assert.equal(parseInput("''=1+1"), "''=1+1", 'the text is =1+1 with one quote before it');
    // Any other text after a quote is the text itself, as spreadsheets take '007 or 'TRUE.
    assert.equal(parseInput("'007"), '007');
    assert.equal(parseInput("'TRUE"), 'TRUE');
    assert.equal(parseInput("'#N/A"), '#N/A');
    assert.equal(parseInput("'it's"), "it's");
    assert.equal(parseInput("'"), '');
    // A space first: a text, as in a spreadsheet.
    assert.equal(parseInput(' =1+1'), ' =1+1');
    assert.equal(parseInput("it's"), "it's");
  });

  test('every spreadsheet error the server knows is an error value, the engine’s too', () => {
    for (const code of ['#CIRC!', '#ERROR!', '#N/IMPL', '#SPILL!', '#CALC!', '#GETTING_DATA', '#NULL!'])
      assert.deepEqual(parseInput(code.toLowerCase()), { error: code });
    assert.equal(parseInput('#OOPS'), '#OOPS');
  });

  test('the editor starts with what, typed again, stores the same value', () => {
    const values: Value[] = [
      '=SUM(A1:A3)',
      "'=1+1",
      "''=x",
      'hello',
      "it's",
      "'quoted",
      '007',
      '12',
      ' 42 ',
      'TRUE',
      '#N/A',
      '',
      42,
      -0.5,
      1e21,
      true,
      false,
      { error: '#DIV/0!' },
      { error: '#CIRC!' },
    ];
    for (const value of values) {
      const text = editText({ value });
      assert.deepEqual(parseInput(text), value === '' ? '' : value, `${JSON.stringify(value)} edits as ${text}`);
    }
    assert.equal(editText({ value: '=SUM(A1:A3)' }), '=SUM(A1:A3)');
    assert.equal(editText({ value: "'=1+1" }), "'=1+1");
    assert.equal(editText({ value: '007' }), "'007");
    assert.equal(editText({ value: 'hello' }), 'hello');
    assert.equal(editText({ value: null }), '');
    assert.equal(editText(undefined), '');
  });

  test('a formula shows its computed value through the cell’s format; a quoted text shows unquoted', () => {
    assert.equal(display({ value: '=SUM(A1:A3)' }, 6), '6');
    assert.equal(display({ value: '=A1/3', format: '0.00' }, 1 / 3), '0.33');
    assert.equal(display({ value: '=1/0' }, { error: '#DIV/0!' }), '#DIV/0!');
    assert.equal(display({ value: '="x"' }, "'=x"), "'=x", 'a computed text is shown as it is');
    assert.equal(display({ value: '=A1' }), '', 'not computed yet');
    assert.equal(display({ value: "'=1+1" }), '=1+1');
    assert.equal(display({ value: "''=1+1" }), "'=1+1");
    assert.equal(display({ value: "'hello" }), "'hello", 'only a quote before a would-be formula is dropped');
    const cell: Cell = { value: '=A1/0' };
    assert.deepEqual(drawn(cell, { error: '#DIV/0!' }), {
      text: '#DIV/0!',
      kind: 'error',
      title: '#DIV/0!: division by zero',
    });
    assert.deepEqual(drawn({ value: '=B1' }, { error: '#CIRC!' }).kind, 'error');
    assert.deepEqual(drawn({ value: '=1<2' }, true), { text: 'TRUE', kind: 'bool' });
    assert.deepEqual(drawn({ value: 3 }), { text: '3', kind: 'num' });
    assert.deepEqual(drawn({ value: '=1' }, 'text'), { text: 'text' });
  });

  test('formulas longer or deeper than the server takes are refused in words', () => {
    assert.equal(formulaProblem(`=${'1+'.repeat(4095)}1`), undefined);
    assert.match(formulaProblem(`=${'1+'.repeat(4096)}1`) ?? '', /8,193 characters; a formula holds at most 8,192/);
    assert.equal(formulaProblem(`=${'('.repeat(64)}1${')'.repeat(64)}`), undefined);
    assert.match(formulaProblem(`=${'('.repeat(65)}1${')'.repeat(65)}`) ?? '', /nests 65 parentheses deep/);
    assert.equal(formulaProblem(`="${'('.repeat(100)}"`), undefined, 'parentheses in a string do not nest');
  });

  test('a range read holds values in the input form, whichever form the server answers', () => {
    // A server that does not compute: the input form itself.
    const old = readAnswer({ values: [['=SUM(A1:A3)', "'=1+1", 'x']] }, 0, 0);
    assert.deepEqual(old.values, [['=SUM(A1:A3)', "'=1+1", 'x']]);
    assert.equal(old.computed.size, 0);
    // One that does: computed values, plain texts, and the formulas' texts beside them.
    const computed = readAnswer(
      {
        values: [
          [null, 6],
          ['=1+1', 'x'],
        ],
        formulas: { B4: '=SUM(B1:B3)' },
      },
      3,
      0,
    );
    assert.deepEqual(computed.values, [
      [null, '=SUM(B1:B3)'],
      ["'=1+1", 'x'],
    ]);
    assert.deepEqual([...computed.computed], [['B4', 6]]);
    assert.deepEqual(readAnswer({ values: [[2]], formulas: { A1: '1+1' } }, 0, 0).values, [['=1+1']]);
    assert.equal(plain("'=1+1"), '=1+1');
    assert.equal(plain('=A1'), '=A1');
  });

  test('numbers display through their format, others as Excel shows them', () => {
    assert.equal(display({ value: 0.1234, format: '0.00%' }), '12.34%');
    assert.equal(display({ value: 1234567.891, format: '#,##0.00' }), '1,234,567.89');
    assert.equal(display({ value: 45000, format: 'yyyy-mm-dd' }), '2023-03-15');
    assert.equal(display({ value: 3.5 }), '3.5');
    assert.equal(display({ value: false }), 'FALSE');
    assert.equal(display({ value: { error: '#N/A' } }), '#N/A');
    assert.equal(display({ value: null }), '');
    assert.equal(display(undefined), '');
  });

  test('CSV fields are quoted only when they must be', () => {
    assert.equal(csvField('plain'), 'plain');
    assert.equal(csvField('a,b'), '"a,b"');
    assert.equal(csvField('say "hi"'), '"say ""hi"""');
    assert.equal(csvField('two\nlines'), '"two\nlines"');
    assert.equal(csvValue(2.5), '2.5');
    assert.equal(csvValue(null), '');
  });

  test('exported texts that a spreadsheet program would run as formulas get a leading quote', () => {
    // OWASP's CSV injection list: =, +, -, @, tab and carriage return first.
    assert.equal(
      csvValue('=HYPERLINK("https://evil.example","click")'),
      `"'=HYPERLINK(""https://evil.example"",""click"")"`,
    );
    assert.equal(csvValue("=cmd|' /C calc'!A0"), "'=cmd|' /C calc'!A0");
    assert.equal(csvValue('@SUM(A1)'), "'@SUM(A1)");
    assert.equal(csvValue('+44 20 7946 0000'), "'+44 20 7946 0000");
    assert.equal(csvValue('-1.5'), "'-1.5", 'a text, though it reads as a number');
    assert.equal(csvValue('\tx'), "'\tx");
    assert.equal(csvValue('\r=1+1'), `"'\r=1+1"`);
    // Numbers are numbers, negative ones too; other texts, errors and booleans as they are.
    assert.equal(csvValue(-1.5), '-1.5');
    assert.equal(csvValue('plain - text'), 'plain - text');
    assert.equal(csvValue("it's"), "it's");
    assert.equal(csvValue({ error: '#DIV/0!' }), '#DIV/0!');
    assert.equal(csvValue(true), 'TRUE');
    // The opt-out (Alt-click on Export CSV) writes texts as stored.
    assert.equal(csvValue('=1+1', true), '=1+1');
    assert.equal(csvValue('\tx', true), '"\tx"');
  });
});

describe('the overlay of pending edits', () => {
  test('inserted rows map to nothing, later rows to where they were', () => {
    const ops: ShapeOp[] = [{ axis: 'rows', op: 'insert', at: 1, count: 2 }];
    assert.deepEqual(toBase(0, 0, ops), { row: 0, col: 0 });
    assert.equal(toBase(1, 0, ops), null);
    assert.equal(toBase(2, 0, ops), null);
    assert.deepEqual(toBase(3, 4, ops), { row: 1, col: 4 });
  });

  test('several changes map back through each, newest first', () => {
    const ops: ShapeOp[] = [
      { axis: 'rows', op: 'delete', at: 0, count: 1 },
      { axis: 'columns', op: 'insert', at: 0, count: 1 },
      { axis: 'rows', op: 'insert', at: 5, count: 1 },
    ];
    assert.deepEqual(toBase(0, 1, ops), { row: 1, col: 0 });
    assert.equal(toBase(0, 0, ops), null);
    assert.equal(toBase(5, 3, ops), null);
    assert.deepEqual(toBase(6, 3, ops), { row: 6, col: 2 });
  });

  test('mutators move the overlay as the server will move the cells', async () => {
    const { m, tx } = store();
    await mutators.set(tx, {
      cells: [
        { ref: 'a1', value: 1 },
        { ref: 'A3', value: 3, format: '0.0' },
        { ref: 'C2', value: null },
      ],
    });
    await mutators['insert-rows'](tx, { at: 2, count: 2 });
    await mutators['delete-columns'](tx, { at: 'B', count: 1 });
    await mutators['insert-columns'](tx, { at: 'A', count: 1 });
    await mutators['delete-rows'](tx, { at: 1, count: 1 });
    const local = await readLocal({
      get: async (k) => ((k === 'meta/seq' ? 7 : m.get(k)) as never) ?? undefined,
      scan: tx.scan.bind(tx) as never,
    });
    assert.ok(local);
    // A1 was deleted with row 1; A3 went down 2, right 1, up 1; C2 (cleared) went down 2,
    // left 1, right 1, up 1: both keep their values and format.
    assert.deepEqual(Object.fromEntries(local.cells), {
      B4: { value: 3, format: '0.0' },
      C3: { value: null },
    });
    assert.deepEqual(
      local.shapes.map((s) => `${s.op} ${s.axis} ${s.at} ${s.count}`),
      ['insert rows 1 2', 'delete columns 1 1', 'insert columns 0 1', 'delete rows 0 1'],
    );
    // The server's C3 is drawn at C4 (down 2, left 1, right 1, up 1); its B column is gone.
    assert.deepEqual(toBase(3, 2, local.shapes), { row: 2, col: 2 });
    assert.deepEqual(toBase(3, 1, local.shapes), { row: 2, col: 0 });
  });
});

describe('pending edits follow what others committed (the server rebase rules)', () => {
  const insertRow = (seq: number, at: number, count = 1, client?: string, id?: number): Move => ({
    seq,
    applied: [{ axis: 'rows', op: 'insert', at, count }],
    ...(client ? { client, id } : {}),
  });
  const cellsOf = (m: Map<string, unknown>) =>
    Object.fromEntries([...m].filter(([k]) => k.startsWith('cell/')).map(([k, v]) => [k.slice(5), v]));

  test("a pending set moves down with its row when someone else's insert arrives after its base", async () => {
    const { m, tx } = store();
    m.set('move/000000000004/00000', insertRow(4, 1));
    await mutators.set(tx, { cells: [{ ref: 'B5', value: 'note' }], baseSeq: 4 });
    assert.deepEqual(cellsOf(m), { B6: { value: 'note' } });
  });

  test('changes before the base, and this client own confirmed ones, move nothing', async () => {
    const { m, tx } = store();
    (tx as unknown as { clientID: string }).clientID = 'me';
    m.set('move/000000000002/00000', insertRow(2, 0));
    m.set('move/000000000005/00000', insertRow(5, 0, 1, 'me', 1));
    await mutators.set(tx, { cells: [{ ref: 'B5', value: 'x' }], baseSeq: 3 });
    assert.deepEqual(cellsOf(m), { B5: { value: 'x' } });
  });

  test('a cell whose row was deleted meanwhile leaves the overlay; one without a base is as sent', async () => {
    const { m, tx } = store();
    m.set('move/000000000004/00000', { seq: 4, applied: [{ axis: 'rows', op: 'delete', at: 1, count: 3 }] });
    await mutators.set(tx, {
      cells: [
        { ref: 'B3', value: 'gone' },
        { ref: 'B10', value: 'kept' },
      ],
      baseSeq: 4,
    });
    assert.deepEqual(cellsOf(m), { B7: { value: 'kept' } });
    await mutators.set(tx, { cells: [{ ref: 'C3', value: 'old client' }] });
    assert.deepEqual(cellsOf(m), { B7: { value: 'kept' }, C3: { value: 'old client' } });
  });

  test('a pending delete splits around rows inserted inside it, as on the server', () => {
    const steps: Step[] = [{ other: { axis: 'rows', op: 'insert', at: 3, count: 2 } }];
    assert.deepEqual(rebaseShape({ axis: 'rows', op: 'delete', at: 1, count: 4 }, steps), [
      { axis: 'rows', op: 'delete', at: 5, count: 2 },
      { axis: 'rows', op: 'delete', at: 1, count: 2 },
    ]);
    // docs/sync.md's table: an insert at a deleted row lands where the range started.
    assert.deepEqual(
      rebaseShape({ axis: 'rows', op: 'insert', at: 3, count: 1 }, [
        { other: { axis: 'rows', op: 'delete', at: 1, count: 4 } },
      ]),
      [{ axis: 'rows', op: 'insert', at: 1, count: 1 }],
    );
    // A reference into rows this client's own insert created follows that insert.
    const own: Step = {
      own: {
        seen: [{ axis: 'rows', op: 'insert', at: 2, count: 1 }],
        applied: [{ axis: 'rows', op: 'insert', at: 4, count: 1 }],
      },
    };
    assert.equal(rebasePoint('rows', 2, [own]), 4);
    assert.equal(rebasePoint('rows', 9, [{ other: { op: 'replace' } }]), null);
  });

  test("a pending formula's references follow what others committed after its base", async () => {
    const { m, tx } = store();
    m.set('move/000000000004/00000', insertRow(4, 1));
    m.set('move/000000000005/00000', {
      seq: 5,
      applied: [{ axis: 'columns', op: 'delete', at: 3, count: 1 }],
    });
    await mutators.set(tx, {
      cells: [
        { ref: 'B10', value: '=A5+SUM(A1:A10)' },
        { ref: 'C10', value: '=D1*2' },
        { ref: 'C11', value: "'=A5" },
      ],
      baseSeq: 4,
    });
    // As the server rebases them (rebase_formula): rows named move down with the insert, a
    // range grows over it, a deleted column's cell is #REF!, a quoted text is no formula.
    assert.deepEqual(cellsOf(m), {
      B11: { value: '=A6+SUM(A1:A11)' },
      C11: { value: '=#REF!*2' },
      C12: { value: "'=A5" },
    });
  });

  test("this client's own pending row and column changes move its pending formulas", async () => {
    const { m, tx } = store();
    await mutators.set(tx, { cells: [{ ref: 'B1', value: '=A5+SUM(A1:A10)' }], baseSeq: 3 });
    await mutators['insert-rows'](tx, { at: 3, count: 1, baseSeq: 3 });
    await mutators['delete-rows'](tx, { at: 8, count: 2, baseSeq: 3 });
    await mutators['insert-columns'](tx, { at: 'A', count: 1, baseSeq: 3 });
    // A typed formula applies before the changes after it, which move it as they move every
    // formula on the server.
    assert.deepEqual(cellsOf(m), { C1: { value: '=B6+SUM(B1:B9)' } });
  });

  test('a pending insert and a later pending set both follow an insert from elsewhere', async () => {
    const { m, tx } = store();
    m.set('move/000000000004/00000', insertRow(4, 0, 2));
    await mutators['insert-rows'](tx, { at: 3, count: 1, baseSeq: 4 });
    // Typed into the new row 3 of the author's view: it is row 5 now, with the insert.
    await mutators.set(tx, { cells: [{ ref: 'A3', value: 'in new row' }], baseSeq: 4 });
    assert.deepEqual(cellsOf(m), { A5: { value: 'in new row' } });
  });
});

describe('clipboard', () => {
  test('tab-separated text reads as spreadsheets write it', () => {
    assert.deepEqual(parseTsv('a\tb\n1\t2\n'), [
      ['a', 'b'],
      ['1', '2'],
    ]);
    assert.deepEqual(parseTsv('a\tb\r\n1\t2'), [
      ['a', 'b'],
      ['1', '2'],
    ]);
    // Quoted cells keep tabs, line breaks and quotes; an empty cell stays a cell.
    assert.deepEqual(parseTsv('"two\nlines"\t"tab\there"\t"say ""hi"""\t\n'), [
      ['two\nlines', 'tab\there', 'say "hi"', ''],
    ]);
    assert.deepEqual(parseTsv('one'), [['one']]);
    assert.deepEqual(parseTsv(''), [['']]);
    for (const t of ['plain', 'tab\tin', 'line\nin', 'quote"in']) assert.deepEqual(parseTsv(tsvField(t)), [[t]]);
  });

  test('a paste is one set of every cell from the selection, typed as a person types', () => {
    const p = pasted("x\t42\n=A1\t'007", 1, 1, (r, c) => (r === 1 && c === 2 ? '0.00' : undefined));
    assert.deepEqual(p, {
      cells: [
        { ref: 'B2', value: 'x' },
        { ref: 'C2', value: 42, format: '0.00' },
        { ref: 'B3', value: '=A1' },
        { ref: 'C3', value: '007' },
      ],
      dropped: 0,
    });
    // Past the last column: left out and counted.
    const edge = pasted('a\tb\tc', 0, MAX_COLS - 2, () => undefined);
    assert.ok(typeof edge !== 'string');
    assert.deepEqual(
      edge.cells.map((c) => c.ref),
      ['XFC1', 'XFD1'],
    );
    assert.equal(edge.dropped, 1);
    // Too many cells, or a formula the server refuses: refused in words, nothing written.
    const big = Array.from({ length: 300 }, () => Array.from({ length: 200 }, () => '1').join('\t')).join('\n');
    assert.match(String(pasted(big, 0, 0, () => undefined)), /more than 50,000 cells/);
    assert.equal(typeof pasted(`=${'1+'.repeat(5000)}1`, 0, 0, () => undefined), 'string');
  });
});
