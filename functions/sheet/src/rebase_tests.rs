//! Rebasing: worked examples (the tables in `docs/sync.md`) and a property test with an oracle
//! that gives every row and column a stable identity.

use std::collections::{BTreeMap, HashMap};

use proptest::prelude::*;

use super::*;
use crate::layout::Freeze;
use crate::{CellEdit, ImportFormat, Sheet};

fn set(row: u32, col: u32, v: f64) -> Event {
    crate::test_support::set_one(CellRef { row, col }, Value::Number(v))
}

fn ins_rows(at: u32, count: u32) -> Event {
    Event::InsertRows(InsertRows {
        at: RowNumber(at),
        count,
        values: vec![],
    })
}

fn del_rows(at: u32, count: u32) -> Event {
    Event::DeleteRows(DeleteRows {
        at: RowNumber(at),
        count,
    })
}

fn ins_cols(at: u32, count: u32) -> Event {
    Event::InsertColumns(InsertColumns {
        at: ColumnName(at),
        count,
    })
}

fn del_cols(at: u32, count: u32) -> Event {
    Event::DeleteColumns(DeleteColumns {
        at: ColumnName(at),
        count,
    })
}

fn others(events: &[Event]) -> Vec<Step<'_>> {
    events.iter().map(Step::Other).collect()
}

fn apply(events: Vec<Event>) -> Outcome {
    Outcome::Apply(events)
}

fn rejected(o: &Outcome) -> &str {
    match o {
        Outcome::Reject(why) => why,
        Outcome::Apply(e) => panic!("expected a rejection, got {e:?}"),
    }
}

fn style(ranges: &[&str]) -> Event {
    Event::Style(StyleCells {
        ranges: ranges.iter().map(|r| r.parse().unwrap()).collect(),
        style: serde_json::from_str(r#"{"bold": true}"#).unwrap(),
    })
}

/// A style moves with the cells its author selected: rows inserted inside the range by someone
/// else are not styled (the range splits around them), deleted rows and columns shrink it, and a
/// style whose cells are all gone is rejected with the reason.
fn widths(at: u32, count: u32) -> Event {
    Event::ResizeColumns(ResizeColumns {
        at: ColumnName(at),
        count,
        width: Some(150),
    })
}

/// A resize follows its columns (rows): a column inserted inside it by someone else splits it and
/// keeps the default width; a resize whose columns were all deleted is rejected; a freeze stays
/// where its author put it.
#[test]
fn a_resize_follows_its_columns_and_a_freeze_stays() {
    // B:D widened while someone inserted a column at C: B, and D:E where C:D went.
    let history = [ins_cols(2, 1)];
    assert_eq!(
        rebase(&widths(1, 3), &others(&history)),
        apply(vec![widths(1, 1), widths(3, 2)])
    );
    // ... and deleted B: C:D, now B:C.
    assert_eq!(
        rebase(&widths(1, 3), &others(&[del_cols(1, 1)])),
        apply(vec![widths(1, 2)])
    );
    let gone = rebase(&widths(1, 2), &others(&[del_cols(0, 4)]));
    assert!(
        rejected(&gone).starts_with("resize-columns from column B: every one of those columns"),
        "{gone:?}"
    );
    let rows = Event::ResizeRows(ResizeRows {
        at: RowNumber(4),
        count: 2,
        height: None,
    });
    assert_eq!(
        rebase(&rows, &others(&[ins_rows(0, 3)])),
        apply(vec![Event::ResizeRows(ResizeRows {
            at: RowNumber(7),
            count: 2,
            height: None,
        })])
    );
    let freeze = Event::Freeze(Freeze {
        rows: 2,
        columns: 0,
    });
    assert_eq!(
        rebase(&freeze, &others(&[ins_rows(0, 3)])),
        apply(vec![freeze.clone()])
    );
}

#[test]
fn a_style_follows_its_cells_through_row_and_column_edits() {
    let history = [ins_rows(0, 2), ins_rows(4, 1), ins_cols(0, 1)];
    // B2:C4 as seen: rows 1..=3; two rows above push it to rows 3..=5, then a row at 4 splits it.
    assert_eq!(
        rebase(&style(&["B2:C4"]), &others(&history)),
        apply(vec![style(&["C4:D4", "C6:D7"])])
    );
    assert_eq!(
        rebase(
            &style(&["A1:A10", "C1"]),
            &others(&[del_rows(2, 3), del_cols(2, 1)])
        ),
        apply(vec![style(&["A1:A7"])])
    );
    let gone = rebase(&style(&["B2:C3"]), &others(&[del_rows(0, 5)]));
    assert_eq!(
        rejected(&gone),
        "style B2:C3: every cell of it was deleted by an edit made at the same time"
    );
    // Nothing structural since: the style as it was, untouched.
    let same = style(&["A1:B2"]);
    assert_eq!(
        rebase(&same, &others(&[set(0, 0, 1.0), style(&["Z9"])])),
        apply(vec![same.clone()])
    );
}

/// A formula typed against an older view: its cell and its references both follow what was
/// inserted and deleted since, as that person saw the cells they named.
#[test]
fn a_rebased_formula_reads_the_cells_its_author_named() {
    let formula = |t: &str| Value::Formula(crate::formula::Formula::new(t).unwrap());
    // Typed into C10 while rows 1..=9 held the data: =SUM(A2:A9)+B5.
    let typed = crate::test_support::set_one(CellRef { row: 9, col: 2 }, formula("SUM(A2:A9)+B5"));
    // Meanwhile: two rows inserted above row 3, then a column inserted before B.
    let history = [ins_rows(2, 2), ins_cols(1, 1)];
    let out = rebase(&typed, &others(&history));
    assert_eq!(
        out,
        apply(vec![crate::test_support::set_one(
            CellRef { row: 11, col: 3 },
            formula("SUM(A2:A11)+C7")
        )])
    );
    // Row 5 deleted by someone else: the reference to it is gone, the range shrinks.
    let out = rebase(&typed, &others(&[del_rows(4, 1)]));
    assert_eq!(
        out,
        apply(vec![crate::test_support::set_one(
            CellRef { row: 8, col: 2 },
            formula("SUM(A2:A8)+#REF!")
        )])
    );
}

#[test]
fn a_cell_edit_follows_its_row_through_an_insert_above_it() {
    // r1..r6 in A1:A6; A inserts a row at 2; B, who had not seen that, writes B5 beside r5.
    let history = [ins_rows(1, 1)];
    assert_eq!(
        rebase(&set(4, 1, 5.0), &others(&history)),
        apply(vec![set(5, 1, 5.0)])
    );
    // Above the insert: unchanged.
    assert_eq!(
        rebase(&set(0, 1, 5.0), &others(&history)),
        apply(vec![set(0, 1, 5.0)])
    );
}

#[test]
fn a_cell_edit_follows_its_column_and_moves_up_after_a_delete() {
    assert_eq!(
        rebase(&set(2, 3, 1.0), &others(&[ins_cols(0, 2)])),
        apply(vec![set(2, 5, 1.0)])
    );
    assert_eq!(
        rebase(&set(6, 0, 1.0), &others(&[del_rows(1, 3)])),
        apply(vec![set(3, 0, 1.0)])
    );
}

#[test]
fn a_cell_edit_whose_row_or_column_was_deleted_is_rejected_with_a_reason() {
    let o = rebase(&set(2, 0, 1.0), &others(&[del_rows(1, 3)]));
    assert!(rejected(&o).contains("A3: its row was deleted"), "{o:?}");
    let o = rebase(&set(0, 2, 1.0), &others(&[del_cols(2, 1)]));
    assert!(rejected(&o).contains("C1: its column was deleted"), "{o:?}");
    // A set keeps the cells that survive.
    let two = Event::Set(SetCells {
        cells: vec![
            CellEdit {
                at: CellRef { row: 2, col: 0 },
                value: Value::Number(1.0),
                format: None,
            },
            CellEdit {
                at: CellRef { row: 9, col: 0 },
                value: Value::Number(2.0),
                format: Some("0.0".into()),
            },
        ],
    });
    let Outcome::Apply(out) = rebase(&two, &others(&[del_rows(1, 3)])) else {
        panic!("the surviving cell applies");
    };
    assert_eq!(
        out,
        vec![Event::Set(SetCells {
            cells: vec![CellEdit {
                at: CellRef { row: 6, col: 0 },
                value: Value::Number(2.0),
                format: Some("0.0".into()),
            }],
        })]
    );
}

#[test]
fn overlapping_deletes_delete_each_row_once() {
    // Someone deleted rows 2..4; the author deletes rows 3..6 of the old view. Rows 3 and 4 are
    // gone already; old rows 5 and 6 are now rows 2 and 3.
    assert_eq!(
        rebase(&del_rows(2, 4), &others(&[del_rows(1, 3)])),
        apply(vec![del_rows(1, 2)])
    );
    // Fully covered: nothing left, so it is rejected rather than deleting other rows.
    let o = rebase(&del_rows(2, 2), &others(&[del_rows(1, 3)]));
    assert!(rejected(&o).contains("delete-rows from row 3"), "{o:?}");
    // Columns the same way.
    assert_eq!(
        rebase(&del_cols(0, 3), &others(&[del_cols(1, 1)])),
        apply(vec![del_cols(0, 2)])
    );
}

#[test]
fn rows_inserted_inside_a_deleted_range_survive() {
    // The author deletes rows 2..5 (0-based 1..5); meanwhile two rows were inserted at row 4.
    assert_eq!(
        rebase(&del_rows(1, 4), &others(&[ins_rows(3, 2)])),
        apply(vec![del_rows(5, 2), del_rows(1, 2)])
    );
}

#[test]
fn an_insert_stays_above_its_row_and_survives_at_a_deleted_range_start() {
    assert_eq!(
        rebase(&ins_rows(4, 1), &others(&[ins_rows(0, 2)])),
        apply(vec![ins_rows(6, 1)])
    );
    // Inserted at the same place: the new rows go directly above the row the author chose.
    assert_eq!(
        rebase(&ins_rows(4, 1), &others(&[ins_rows(4, 3)])),
        apply(vec![ins_rows(7, 1)])
    );
    assert_eq!(
        rebase(&ins_rows(3, 1), &others(&[del_rows(1, 4)])),
        apply(vec![ins_rows(1, 1)])
    );
    assert_eq!(
        rebase(&ins_cols(3, 1), &others(&[del_cols(0, 1)])),
        apply(vec![ins_cols(2, 1)])
    );
}

#[test]
fn inserted_values_follow_their_columns() {
    let e = Event::InsertRows(InsertRows {
        at: RowNumber(2),
        count: 2,
        values: vec![
            vec![Value::Number(1.0), Value::Number(2.0), Value::Number(3.0)],
            vec![Value::Number(4.0)],
        ],
    });
    let history = [ins_cols(1, 1), del_cols(3, 1)];
    assert_eq!(
        rebase(&e, &others(&history)),
        apply(vec![Event::InsertRows(InsertRows {
            at: RowNumber(2),
            count: 2,
            values: vec![
                vec![Value::Number(1.0), Value::Empty, Value::Number(2.0)],
                vec![Value::Number(4.0)],
            ],
        })])
    );
}

#[test]
fn an_import_after_the_base_rejects_the_edit() {
    let import = [Event::Import(crate::Import {
        format: ImportFormat::Csv,
        group: None,
        layout: None,
    })];
    for e in [
        set(1, 1, 1.0),
        ins_rows(1, 1),
        del_rows(0, 1),
        ins_cols(0, 1),
    ] {
        let o = rebase(&e, &others(&import));
        assert!(rejected(&o).contains("import"), "{o:?}");
    }
}

#[test]
fn an_edit_with_nothing_structural_since_its_base_applies_as_sent() {
    let e = del_rows(3, 2);
    assert_eq!(
        rebase(&e, &others(&[set(3, 0, 1.0)])),
        apply(vec![e.clone()])
    );
    assert_eq!(rebase(&e, &[]), apply(vec![e.clone()]));
}

#[test]
fn references_to_the_authors_own_inserted_rows_follow_where_the_server_put_them() {
    // The author inserted a row at 2 (0-based 1) and then wrote into it and into the row below.
    // Meanwhile someone inserted a row at the top, so the server put the author's row at 3.
    let sent = [ins_rows(1, 1)];
    let applied = [ins_rows(2, 1)];
    let top = ins_rows(0, 1);
    let history = [
        Step::Other(&top),
        Step::Own {
            seen: &sent,
            applied: &applied,
        },
    ];
    assert_eq!(
        rebase(&set(1, 0, 1.0), &history),
        apply(vec![set(2, 0, 1.0)])
    );
    assert_eq!(
        rebase(&set(2, 0, 1.0), &history),
        apply(vec![set(3, 0, 1.0)])
    );
    // Its own insert rejected: the row it wrote into never existed.
    let history = [
        Step::Other(&top),
        Step::Own {
            seen: &sent,
            applied: &[],
        },
    ];
    let o = rebase(&set(1, 0, 1.0), &history);
    assert!(
        rejected(&o).contains("earlier edit of the same author"),
        "{o:?}"
    );
}

#[test]
fn inserts_pushed_past_the_end_are_shortened_or_rejected() {
    let last = MAX_ROWS - 1;
    let o = rebase(&ins_rows(last, 1), &others(&[ins_rows(0, 1)]));
    assert!(rejected(&o).contains("past the end"), "{o:?}");
    assert_eq!(
        rebase(&ins_rows(last - 2, 3), &others(&[ins_rows(0, 1)])),
        apply(vec![ins_rows(last - 1, 2)])
    );
}

// ---------------------------------------------------------------------------------------------
// Property test: clients edit stale views, the server rebases; an oracle with stable identities
// checks every edit landed where its author meant.

/// One axis of the oracle: the identity of every position. Positions past `ids` hold the original
/// rows that no event has touched yet, numbered on from `next`.
#[derive(Debug, Clone)]
struct Ids {
    ids: Vec<u64>,
    next: u64,
}

impl Ids {
    fn new(first: u64) -> Ids {
        Ids {
            ids: Vec::new(),
            next: first,
        }
    }

    fn grow(&mut self, len: usize) {
        while self.ids.len() < len {
            self.ids.push(self.next);
            self.next += 1;
        }
    }

    fn at(&mut self, pos: u32) -> u64 {
        self.grow(pos as usize + 1);
        self.ids[pos as usize]
    }

    fn insert(&mut self, at: u32, new: &[u64]) {
        self.grow(at as usize);
        let at = at as usize;
        self.ids.splice(at..at, new.iter().copied());
    }

    fn delete(&mut self, at: u32, count: u32) -> Vec<u64> {
        self.grow((at + count) as usize);
        self.ids.drain(at as usize..(at + count) as usize).collect()
    }

    fn pos(&self, id: u64) -> Option<usize> {
        self.ids.iter().position(|x| *x == id)
    }

    fn has(&self, id: u64) -> bool {
        // Untouched original rows past `ids` exist too.
        self.pos(id).is_some() || (id >= self.next && id < self.next + 1_000_000)
    }
}

/// The oracle's sheet: cells keyed by (row identity, column identity).
#[derive(Debug, Clone)]
struct Model {
    rows: Ids,
    cols: Ids,
    cells: BTreeMap<(u64, u64), f64>,
}

const IMPORT_CSV: &str = "7,8\n9\n";

impl Model {
    fn new() -> Model {
        Model {
            rows: Ids::new(0),
            cols: Ids::new(0),
            cells: BTreeMap::new(),
        }
    }

    /// Applies an event; inserts create the identities in `new`.
    fn apply(&mut self, e: &Event, new: &[u64], fresh: &mut u64) {
        match e {
            Event::Set(s) => {
                for c in &s.cells {
                    let key = (self.rows.at(c.at.row), self.cols.at(c.at.col));
                    match c.value {
                        Value::Number(v) => {
                            self.cells.insert(key, v);
                        }
                        _ => unreachable!("the test only writes numbers"),
                    }
                }
            }
            Event::InsertRows(e) => {
                let ids = &new[..e.count as usize];
                self.rows.insert(e.at.0, ids);
                for (i, row) in e.values.iter().enumerate() {
                    for (j, v) in row.iter().enumerate() {
                        if let Value::Number(v) = v {
                            let col = self.cols.at(j as u32);
                            self.cells.insert((ids[i], col), *v);
                        }
                    }
                }
            }
            Event::DeleteRows(e) => {
                let gone = self.rows.delete(e.at.0, e.count);
                self.cells.retain(|(r, _), _| !gone.contains(r));
            }
            Event::InsertColumns(e) => self.cols.insert(e.at.0, &new[..e.count as usize]),
            Event::DeleteColumns(e) => {
                let gone = self.cols.delete(e.at.0, e.count);
                self.cells.retain(|(_, c), _| !gone.contains(c));
            }
            Event::Restore(_) => unreachable!("the test makes no restores"),
            Event::Style(_) => unreachable!("the test makes no styles"),
            Event::ResizeColumns(_) | Event::ResizeRows(_) | Event::Freeze(_) => {
                unreachable!("the test makes no layout changes")
            }
            Event::Import(_) => {
                // Room for a million untouched rows and columns each before fresh ids resume.
                self.rows = Ids::new(*fresh + 1);
                self.cols = Ids::new(*fresh + 2_000_001);
                *fresh += 4_000_000;
                self.cells.clear();
                for (r, line) in IMPORT_CSV.lines().enumerate() {
                    for (c, v) in line.split(',').enumerate() {
                        let key = (self.rows.at(r as u32), self.cols.at(c as u32));
                        self.cells.insert(key, v.parse().unwrap_or_default());
                    }
                }
            }
        }
    }

    /// The cells by position, for comparing with the real [`Sheet`].
    fn render(&self) -> BTreeMap<(u32, u32), f64> {
        self.cells
            .iter()
            .map(|((r, c), v)| {
                let r = self.rows.pos(*r).expect("a cell's row is placed");
                let c = self.cols.pos(*c).expect("a cell's column is placed");
                ((r as u32, c as u32), *v)
            })
            .collect()
    }
}

fn render_sheet(s: &Sheet) -> BTreeMap<(u32, u32), f64> {
    let mut out = BTreeMap::new();
    for row in s.rows() {
        for (c, cell) in row.cells {
            match cell.value {
                Value::Number(v) => {
                    out.insert((row.index, c), v);
                }
                other => panic!("unexpected value {other:?}"),
            }
        }
    }
    out
}

/// What the author meant, in identities of their view.
#[derive(Debug, Clone)]
enum Intent {
    Set(Vec<((u64, u64), f64)>),
    Insert {
        rows: bool,
        before: u64,
        values: Vec<(usize, u64, f64)>,
    },
    Delete {
        rows: bool,
        ids: Vec<u64>,
    },
}

#[derive(Debug, Clone)]
struct Mutation {
    client: usize,
    sent: Event,
    base: usize,
    new: Vec<u64>,
    intent: Intent,
    committed: Option<usize>,
}

#[derive(Debug, Clone)]
enum Author {
    Client(usize, usize),
    Other,
}

#[derive(Debug, Clone)]
struct Record {
    author: Author,
    applied: Vec<Event>,
}

/// An edit, in positions of whatever view it is made in.
#[derive(Debug, Clone)]
enum Op {
    Set(Vec<(u32, u32)>),
    InsertRows(u32, u32, Vec<Vec<u8>>),
    DeleteRows(u32, u32),
    InsertColumns(u32, u32),
    DeleteColumns(u32, u32),
}

#[derive(Debug, Clone)]
enum Action {
    Make(usize, Op),
    Push(usize),
    Pull(usize),
    /// A direct append at the head (no rebase needed: made against the current sheet).
    Direct(Op),
    Import,
}

struct World {
    log: Vec<Record>,
    snaps: Vec<Model>,
    muts: Vec<Mutation>,
    bases: Vec<usize>,
    server: Model,
    sheet: Sheet,
    fresh: u64,
    value: f64,
    memo: HashMap<(usize, usize), Vec<Event>>,
}

/// Owned steps, borrowed into [`Step`]s for one call.
enum OwnedStep {
    Other(Event),
    Own(Vec<Event>, Vec<Event>),
}

fn borrow(steps: &[OwnedStep]) -> Vec<Step<'_>> {
    steps
        .iter()
        .map(|s| match s {
            OwnedStep::Other(e) => Step::Other(e),
            OwnedStep::Own(seen, applied) => Step::Own { seen, applied },
        })
        .collect()
}

impl World {
    fn new(clients: usize) -> World {
        World {
            log: Vec::new(),
            snaps: vec![Model::new()],
            muts: Vec::new(),
            bases: vec![0; clients],
            server: Model::new(),
            sheet: Sheet::new(),
            fresh: 1 << 40,
            value: 0.0,
            memo: HashMap::new(),
        }
    }

    fn fresh_ids(&mut self, n: u32) -> Vec<u64> {
        (0..n)
            .map(|_| {
                self.fresh += 1;
                self.fresh
            })
            .collect()
    }

    /// The log from `from` to `to` as client `client` rebases through it.
    fn history(&mut self, client: usize, from: usize, to: usize) -> Vec<OwnedStep> {
        let mut out = Vec::new();
        for i in from..to {
            let rec = self.log[i].clone();
            match rec.author {
                Author::Client(c, m) if c == client => {
                    let seen = self.seen(m, from);
                    out.push(OwnedStep::Own(seen, rec.applied));
                }
                _ => out.extend(rec.applied.into_iter().map(OwnedStep::Other)),
            }
        }
        out
    }

    /// Mutation `m` as it stands in its author's view at base `b` (the author replays its
    /// unconfirmed edits onto each pull with the same rules).
    fn seen(&mut self, m: usize, b: usize) -> Vec<Event> {
        if let Some(e) = self.memo.get(&(m, b)) {
            return e.clone();
        }
        let mu = self.muts[m].clone();
        assert!(mu.base <= b);
        let out = if mu.base == b {
            vec![mu.sent.clone()]
        } else {
            let steps = self.history(mu.client, mu.base, b);
            match rebase(&mu.sent, &borrow(&steps)) {
                Outcome::Apply(e) => e,
                Outcome::Reject(_) => vec![],
            }
        };
        self.memo.insert((m, b), out.clone());
        out
    }

    /// Client `c`'s view: the server at its base plus its unconfirmed edits.
    fn view(&mut self, c: usize) -> Model {
        let base = self.bases[c];
        let mut v = self.snaps[base].clone();
        let pending: Vec<usize> = (0..self.muts.len())
            .filter(|&m| {
                self.muts[m].client == c && self.muts[m].committed.is_none_or(|at| at >= base)
            })
            .collect();
        for m in pending {
            let new = self.muts[m].new.clone();
            for e in self.seen(m, base) {
                let mut fresh = 0;
                v.apply(&e, &new, &mut fresh);
            }
        }
        v
    }

    /// Client `c`'s view as a client replays it (the web page's mutators): each pending edit is
    /// rebased through the log since its own base, then through the client's earlier pending
    /// edits, each as it stood when this one was made and as it was just replayed, the way the
    /// server will treat them once they are committed ahead of it.
    fn replayed_view(&mut self, c: usize) -> Model {
        let base = self.bases[c];
        let mut v = self.snaps[base].clone();
        let pending: Vec<usize> = (0..self.muts.len())
            .filter(|&m| {
                self.muts[m].client == c && self.muts[m].committed.is_none_or(|at| at >= base)
            })
            .collect();
        let mut done: Vec<(usize, Vec<Event>)> = Vec::new();
        for m in pending {
            let mu = self.muts[m].clone();
            let mut steps = self.history(c, mu.base, base);
            for (earlier, applied) in &done {
                let seen = self.seen(*earlier, mu.base);
                steps.push(OwnedStep::Own(seen, applied.clone()));
            }
            let events = match rebase(&mu.sent, &borrow(&steps)) {
                Outcome::Apply(e) => e,
                Outcome::Reject(_) => vec![],
            };
            for e in &events {
                let mut fresh = 0;
                v.apply(e, &mu.new, &mut fresh);
            }
            done.push((m, events));
        }
        v
    }

    fn next_value(&mut self) -> f64 {
        self.value += 1.0;
        self.value
    }

    /// Makes `op` against `view`: the event and what its author meant.
    fn make(&mut self, view: &mut Model, op: &Op) -> (Event, Vec<u64>, Intent) {
        match op {
            Op::Set(cells) => {
                let mut edits = Vec::new();
                let mut intent = Vec::new();
                for &(r, c) in cells {
                    let v = self.next_value();
                    edits.push(CellEdit {
                        at: CellRef { row: r, col: c },
                        value: Value::Number(v),
                        format: None,
                    });
                    intent.push(((view.rows.at(r), view.cols.at(c)), v));
                }
                (
                    Event::Set(SetCells { cells: edits }),
                    vec![],
                    Intent::Set(intent),
                )
            }
            Op::InsertRows(at, count, values) => {
                let new = self.fresh_ids(*count);
                let mut vals = Vec::new();
                let mut intent = Vec::new();
                for (i, row) in values.iter().take(*count as usize).enumerate() {
                    let mut line = Vec::new();
                    for (j, keep) in row.iter().enumerate() {
                        if *keep % 3 == 0 {
                            line.push(Value::Empty);
                        } else {
                            let v = self.next_value();
                            line.push(Value::Number(v));
                            intent.push((i, view.cols.at(j as u32), v));
                        }
                    }
                    vals.push(line);
                }
                let before = view.rows.at(*at);
                (
                    Event::InsertRows(InsertRows {
                        at: RowNumber(*at),
                        count: *count,
                        values: vals,
                    }),
                    new,
                    Intent::Insert {
                        rows: true,
                        before,
                        values: intent,
                    },
                )
            }
            Op::InsertColumns(at, count) => {
                let new = self.fresh_ids(*count);
                let before = view.cols.at(*at);
                (
                    ins_cols(*at, *count),
                    new,
                    Intent::Insert {
                        rows: false,
                        before,
                        values: vec![],
                    },
                )
            }
            Op::DeleteRows(at, count) => {
                view.rows.grow((at + count) as usize);
                let ids = view.rows.ids[*at as usize..(at + count) as usize].to_vec();
                (
                    del_rows(*at, *count),
                    vec![],
                    Intent::Delete { rows: true, ids },
                )
            }
            Op::DeleteColumns(at, count) => {
                view.cols.grow((at + count) as usize);
                let ids = view.cols.ids[*at as usize..(at + count) as usize].to_vec();
                (
                    del_cols(*at, *count),
                    vec![],
                    Intent::Delete { rows: false, ids },
                )
            }
        }
    }

    /// Commits events to the log, the oracle's sheet and the real sheet, which must agree.
    fn commit(&mut self, author: Author, applied: Vec<Event>, new: Vec<u64>) {
        for e in &applied {
            e.validate().expect("a rebased event is valid");
            let mut fresh = self.fresh;
            self.server.apply(e, &new, &mut fresh);
            self.fresh = fresh;
            match e {
                Event::Import(i) => self
                    .sheet
                    .import_bytes(i.format, IMPORT_CSV.as_bytes())
                    .expect("import"),
                e => self.sheet.apply(e, None).expect("apply"),
            }
        }
        assert_eq!(self.server.render(), render_sheet(&self.sheet));
        self.log.push(Record { author, applied });
        self.snaps.push(self.server.clone());
    }

    fn act(&mut self, action: &Action) {
        match action {
            Action::Make(c, op) => {
                let mut view = self.view(*c);
                let (sent, new, intent) = self.make(&mut view, op);
                self.muts.push(Mutation {
                    client: *c,
                    sent,
                    base: self.bases[*c],
                    new,
                    intent,
                    committed: None,
                });
            }
            Action::Pull(c) => self.bases[*c] = self.log.len(),
            Action::Direct(op) => {
                let mut head = self.server.clone();
                let (e, new, _) = self.make(&mut head, op);
                self.commit(Author::Other, vec![e], new);
            }
            Action::Import => {
                let e = Event::Import(crate::Import {
                    format: ImportFormat::Csv,
                    group: None,
                    layout: None,
                });
                self.commit(Author::Other, vec![e], vec![]);
            }
            Action::Push(c) => {
                if let Some(m) = (0..self.muts.len())
                    .find(|&m| self.muts[m].client == *c && self.muts[m].committed.is_none())
                {
                    self.push(m);
                }
            }
        }
    }

    /// The server applies mutation `m`: rebase, check against the oracle, commit.
    fn push(&mut self, m: usize) {
        let mu = self.muts[m].clone();
        let steps = self.history(mu.client, mu.base, self.log.len());
        let outcome = rebase(&mu.sent, &borrow(&steps));
        let replaced = steps
            .iter()
            .any(|s| matches!(s, OwnedStep::Other(Event::Import(_))));
        let before = self.server.clone();
        let applied = match &outcome {
            Outcome::Apply(events) => events.clone(),
            Outcome::Reject(_) => vec![],
        };
        self.muts[m].committed = Some(self.log.len());
        self.commit(Author::Client(mu.client, m), applied, mu.new.clone());
        let after = &self.server;
        match &mu.intent {
            Intent::Set(cells) => {
                let mut expect = BTreeMap::new();
                for &((r, c), v) in cells {
                    if before.rows.has(r) && before.cols.has(c) {
                        expect.insert((r, c), v);
                    }
                }
                if expect.is_empty() {
                    assert!(matches!(outcome, Outcome::Reject(_)), "{outcome:?}");
                }
                let mut changed = after.cells.clone();
                changed.retain(|k, v| before.cells.get(k) != Some(v));
                for (k, v) in &expect {
                    assert_eq!(after.cells.get(k), Some(v), "cell {k:?} of {mu:?}");
                }
                assert!(
                    changed.keys().all(|k| expect.contains_key(k)),
                    "only the cells the author meant changed: {changed:?} vs {expect:?}"
                );
            }
            Intent::Insert {
                rows,
                before: anchor,
                values,
            } => {
                if replaced {
                    assert!(matches!(outcome, Outcome::Reject(_)), "{outcome:?}");
                    return;
                }
                let ids = if *rows { &after.rows } else { &after.cols };
                let first = ids.pos(mu.new[0]).expect("the inserted rows exist");
                for (i, id) in mu.new.iter().enumerate() {
                    assert_eq!(ids.pos(*id), Some(first + i), "inserted rows stay together");
                }
                let had = if *rows { &before.rows } else { &before.cols };
                if had.has(*anchor) {
                    let mut ids = ids.clone();
                    assert_eq!(
                        ids.at((first + mu.new.len()) as u32),
                        *anchor,
                        "inserted directly above the row the author chose: {mu:?}"
                    );
                }
                for &(i, col, v) in values {
                    if before.cols.has(col) {
                        assert_eq!(after.cells.get(&(mu.new[i], col)), Some(&v));
                    }
                }
            }
            Intent::Delete { rows, ids } => {
                let (had, has) = if *rows {
                    (&before.rows, &after.rows)
                } else {
                    (&before.cols, &after.cols)
                };
                let meant: Vec<u64> = ids.iter().copied().filter(|id| had.has(*id)).collect();
                if meant.is_empty() {
                    assert!(matches!(outcome, Outcome::Reject(_)), "{outcome:?}");
                }
                // Compare a prefix long enough to hold every position anything touched.
                let n = had.ids.len().max(has.ids.len()) + 8;
                let mut expect = had.clone();
                expect.grow(n + meant.len());
                expect.ids.retain(|id| !meant.contains(id));
                expect.ids.truncate(n);
                let mut has = has.clone();
                has.grow(n);
                has.ids.truncate(n);
                assert_eq!(
                    has.ids, expect.ids,
                    "exactly the rows the author saw are deleted"
                );
            }
        }
    }
}

fn op() -> impl Strategy<Value = Op> {
    let pos = 0u32..8;
    let count = 1u32..4;
    prop_oneof![
        3 => proptest::collection::vec((0u32..8, 0u32..4), 1..4).prop_map(Op::Set),
        1 => (pos.clone(), count.clone(), proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..4), 0..3))
            .prop_map(|(a, n, v)| Op::InsertRows(a, n, v)),
        1 => (pos.clone(), count.clone()).prop_map(|(a, n)| Op::DeleteRows(a, n)),
        1 => (0u32..4, 1u32..3).prop_map(|(a, n)| Op::InsertColumns(a, n)),
        1 => (0u32..4, 1u32..3).prop_map(|(a, n)| Op::DeleteColumns(a, n)),
    ]
}

fn action(clients: usize) -> impl Strategy<Value = Action> {
    prop_oneof![
        6 => (0..clients, op()).prop_map(|(c, o)| Action::Make(c, o)),
        4 => (0..clients).prop_map(Action::Push),
        2 => (0..clients).prop_map(Action::Pull),
        1 => op().prop_map(Action::Direct),
    ]
}

/// A run of actions; one case in five also has an import somewhere (an import rejects every edit
/// made before it, so more would leave little else to check).
fn actions(clients: usize) -> impl Strategy<Value = Vec<Action>> {
    (
        proptest::collection::vec(action(clients), 1..40),
        proptest::option::weighted(0.2, any::<proptest::sample::Index>()),
    )
        .prop_map(|(mut actions, import)| {
            if let Some(at) = import {
                let at = at.index(actions.len() + 1);
                actions.insert(at, Action::Import);
            }
            actions
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(
        std::env::var("PROPTEST_CASES").ok().and_then(|s| s.parse().ok()).unwrap_or(10_000)
    ))]

    #[test]
    fn stale_edits_land_where_their_authors_meant(actions in actions(3)) {
        let mut w = World::new(3);
        for a in &actions {
            w.act(a);
        }
        // Everyone pulls, then pushes what is left. What a client shows after its pull (the
        // server's sheet with its pending edits replayed by the same rules) is what the server
        // holds once it has applied them: nothing moves when the server answers.
        for c in 0..3 {
            w.act(&Action::Pull(c));
            let shown = w.replayed_view(c).render();
            while w.muts.iter().any(|m| m.client == c && m.committed.is_none()) {
                w.act(&Action::Push(c));
            }
            prop_assert_eq!(&w.server.render(), &shown, "client {} saw its edits elsewhere", c);
        }
        // Every replica converges to the server's sheet: each pulls the end of the log, with
        // nothing pending, and holds the real sheet's cells.
        let server = render_sheet(&w.sheet);
        for c in 0..3 {
            w.act(&Action::Pull(c));
            prop_assert_eq!(&w.view(c).render(), &server, "replica {} converged", c);
        }
    }
}
