//! Undo worked out against an in-memory sheet: the inverse of each kind of step, moved through
//! other people's edits, with their cells left alone; and the stacks derived from entries.

use super::*;
use crate::model::Sheet;
use crate::mutations::{Mutation, Mutations};

fn at(a1: &str) -> CellRef {
    a1.parse().expect("reference")
}

fn set(cells: &[(&str, Value, Option<&str>)]) -> Event {
    Event::Set(SetCells {
        cells: cells
            .iter()
            .map(|(r, v, f)| CellEdit {
                at: at(r),
                value: v.clone(),
                format: f.map(str::to_owned),
            })
            .collect(),
    })
}

fn num(n: f64) -> Value {
    Value::Number(n)
}

fn rows_in(sheet: &Sheet, range: Range) -> Vec<Row> {
    sheet
        .rows()
        .filter(|r| (range.start.row..=range.end.row).contains(&r.index))
        .map(|mut r| {
            r.cells
                .retain(|(c, _)| (range.start.col..=range.end.col).contains(c));
            r
        })
        .collect()
}

fn apply(sheet: &mut Sheet, events: &[Event]) {
    for e in events {
        sheet.apply(e, None).expect("apply");
    }
}

/// `step` applied to `before`, then `history`; returns the sheet after the undo and the cells
/// skipped, reading only what the plan asks for, as the API does.
fn undo(before: &Sheet, step: &[Event], history: &[Event]) -> (Sheet, Vec<CellRef>, u64) {
    let mut sheet = before.clone();
    let mut inverses = Vec::new();
    for e in step {
        let rows = needs(e).map_or_else(Vec::new, |r| rows_in(&sheet, r));
        inverses.push(inverse(e, &rows, sheet.layout()).expect("inverse"));
        sheet.apply(e, None).expect("apply step");
    }
    let inverse: Vec<Event> = inverses.into_iter().rev().flatten().collect();
    apply(&mut sheet, history);
    let s = Step {
        target: Target::entry(1),
        prefix: Vec::new(),
        events: step.to_vec(),
        suffix: Vec::new(),
    };
    let settled = settle(&s, &inverse, history);
    let now = written_range(&settled).map_or_else(Vec::new, |r| rows_in(&sheet, r));
    let (events, changed, skipped) = drop_overwritten(settled, &now);
    apply(&mut sheet, &events);
    (sheet, changed, skipped)
}

fn sheet_of(cells: &[(&str, Value, Option<&str>)]) -> Sheet {
    let mut s = Sheet::new();
    s.apply(&set(cells), None).expect("seed");
    s
}

/// An undone resize gives each column (row) back the size it had, at wherever it went since; an
/// undone freeze puts the split back.
#[test]
fn an_undone_resize_or_freeze_brings_back_the_layout_before_it() {
    let mut before = Sheet::new();
    let json = |v: serde_json::Value| Event::from_json(v.to_string().as_bytes()).unwrap();
    apply(
        &mut before,
        &[
            json(
                serde_json::json!({"type": "resize-columns", "body": {"at": "C", "count": 1, "width": 90}}),
            ),
            json(serde_json::json!({"type": "freeze", "body": {"rows": 1}})),
        ],
    );
    let step = [
        json(
            serde_json::json!({"type": "resize-columns", "body": {"at": "B", "count": 3, "width": 200}}),
        ),
        json(serde_json::json!({"type": "freeze", "body": {"rows": 3, "columns": 1}})),
    ];
    // Someone inserted a column at A since: B:D is C:E now.
    let history = [Event::InsertColumns(InsertColumns {
        at: ColumnName(0),
        count: 1,
    })];
    let (after, _, _) = undo(&before, &step, &history);
    let mut want = before.clone();
    apply(&mut want, &history);
    assert_eq!(after.layout(), want.layout());
    assert_eq!(after.layout().columns.get(3), Some(90));
    assert_eq!(
        after.layout().freeze,
        crate::layout::Freeze {
            rows: 1,
            columns: 0
        }
    );
}

#[test]
fn undoing_a_set_takes_back_only_its_cells() {
    let before = sheet_of(&[("B2", num(5.0), Some("0.00")), ("C3", num(1.0), None)]);
    let step = [set(&[
        ("B2", num(1.0), None),
        ("D4", Value::Text("x".into()), None),
    ])];
    let others = [set(&[("C3", num(2.0), None)])];
    let (after, changed, skipped) = undo(&before, &step, &others);
    let mut want = before.clone();
    apply(&mut want, &others);
    assert_eq!(after, want);
    assert!(changed.is_empty());
    assert_eq!(skipped, 0);
}

#[test]
fn an_undo_follows_rows_inserted_above_since() {
    let before = sheet_of(&[("B5", num(5.0), None), ("B6", num(6.0), None)]);
    let step = [set(&[("B5", num(50.0), None)])];
    let others = [Event::InsertRows(InsertRows {
        at: RowNumber(0),
        count: 2,
        values: vec![vec![Value::Text("new".into())]],
    })];
    let (after, _, skipped) = undo(&before, &step, &others);
    let mut want = before.clone();
    apply(&mut want, &others);
    assert_eq!(after, want, "B7 (was B5) holds 5 again, nothing else moved");
    assert_eq!(skipped, 0);
    assert_eq!(after.get(at("B7")).map(|c| &c.value), Some(&num(5.0)));
}

#[test]
fn a_cell_someone_else_changed_or_deleted_is_skipped() {
    let before = sheet_of(&[("B2", num(5.0), None), ("B3", num(6.0), None)]);
    let step = [set(&[
        ("B2", num(1.0), None),
        ("B3", num(2.0), None),
        ("B4", num(3.0), None),
    ])];
    let others = [
        set(&[("B2", num(9.0), None)]),
        Event::DeleteRows(DeleteRows {
            at: RowNumber(2),
            count: 1,
        }),
    ];
    let (after, changed, skipped) = undo(&before, &step, &others);
    assert_eq!(changed, vec![at("B2")], "overwritten, and reported");
    assert_eq!(skipped, 2, "B2 overwritten, B3 deleted");
    assert_eq!(after.get(at("B2")).map(|c| &c.value), Some(&num(9.0)));
    // B4 moved up to B3 with the delete and is cleared again.
    assert_eq!(after.get(at("B3")), None);
}

#[test]
fn the_same_persons_later_edit_of_a_cell_is_undone_first() {
    let before = sheet_of(&[("A1", num(1.0), None)]);
    let first = [set(&[("A1", num(2.0), None)])];
    let mut mid = before.clone();
    apply(&mut mid, &first);
    let second = [set(&[("A1", num(3.0), None)])];
    let (after_second, _, _) = undo(&mid, &second, &[]);
    assert_eq!(after_second, mid);
    let (after_first, _, skipped) = undo(&before, &first, &[]);
    assert_eq!(after_first, before);
    assert_eq!(skipped, 0);
}

#[test]
fn a_delete_comes_back_with_values_and_formats() {
    let before = sheet_of(&[
        ("A1", Value::Text("head".into()), None),
        ("A3", num(3.0), Some("0.0%")),
        ("C4", Value::Bool(true), None),
        ("A5", num(5.0), None),
    ]);
    let step = [Event::DeleteRows(DeleteRows {
        at: RowNumber(2),
        count: 2,
    })];
    let others = [set(&[("A1", Value::Text("title".into()), None)])];
    let (after, _, skipped) = undo(&before, &step, &others);
    let mut want = before.clone();
    apply(&mut want, &others);
    assert_eq!(after, want);
    assert_eq!(skipped, 0);

    let cols = [Event::DeleteColumns(DeleteColumns {
        at: ColumnName(0),
        count: 1,
    })];
    let (after, _, _) = undo(&before, &cols, &[]);
    assert_eq!(after, before);
}

#[test]
fn an_insert_is_undone_by_deleting_what_it_added_wherever_it_went() {
    let before = sheet_of(&[("A1", num(1.0), None), ("A2", num(2.0), None)]);
    let step = [Event::InsertRows(InsertRows {
        at: RowNumber(1),
        count: 1,
        values: vec![vec![num(9.0)]],
    })];
    let others = [Event::InsertRows(InsertRows {
        at: RowNumber(0),
        count: 1,
        values: Vec::new(),
    })];
    let (after, _, _) = undo(&before, &step, &others);
    let mut want = before.clone();
    apply(&mut want, &others);
    assert_eq!(after, want);

    let cols = [Event::InsertColumns(InsertColumns {
        at: ColumnName(0),
        count: 2,
    })];
    let (after, _, _) = undo(&before, &cols, &[]);
    assert_eq!(after, before);
}

#[test]
fn an_insert_whose_rows_someone_deleted_is_skipped() {
    let before = sheet_of(&[("A1", num(1.0), None)]);
    let step = [Event::InsertRows(InsertRows {
        at: RowNumber(1),
        count: 1,
        values: Vec::new(),
    })];
    let others = [Event::DeleteRows(DeleteRows {
        at: RowNumber(1),
        count: 1,
    })];
    let (after, _, skipped) = undo(&before, &step, &others);
    assert_eq!(after, before);
    assert_eq!(skipped, 1);
}

#[test]
fn an_import_since_replaces_everything_and_skips_the_undo() {
    let before = sheet_of(&[("A1", num(1.0), None)]);
    let step = [set(&[("A1", num(2.0), None)])];
    let s = Step {
        target: Target::entry(1),
        prefix: Vec::new(),
        events: step.to_vec(),
        suffix: Vec::new(),
    };
    let rows = rows_in(&before, needs(&step[0]).expect("range"));
    let inv = inverse(&step[0], &rows, &Layout::default()).expect("inverse");
    let history = [Event::Import(crate::event::Import {
        format: crate::event::ImportFormat::Csv,
        group: None,
        layout: None,
    })];
    let settled = settle(&s, &inv, &history);
    assert!(settled.events.is_empty());
    assert_eq!(settled.skipped, 1);
}

fn run(group: &str, client: &str, id: u64, event: Event) -> Mutations {
    Mutations {
        group: group.into(),
        client: client.into(),
        first: id,
        last: id,
        applied: vec![Mutation { id, event }],
        sent: Vec::new(),
    }
}

fn undo_entry(group: &str, redo: bool, target: Target, events: Vec<Event>) -> EntryBody {
    EntryBody::Undo(Undo {
        group: group.into(),
        redo,
        target,
        events,
        skipped: 0,
    })
}

#[test]
fn the_stacks_follow_undo_redo_and_new_steps() {
    let e = |n: f64| set(&[("A1", num(n), None)]);
    let mine = |seq: u64, id: u64| Target {
        seq,
        client: "c1".into(),
        id,
    };
    let entries = vec![
        (10, EntryBody::Mutations(run("g1", "c1", 1, e(1.0)))),
        (11, EntryBody::Mutations(run("g2", "c9", 1, e(9.0)))),
        (12, EntryBody::Mutations(run("g1", "c1", 2, e(2.0)))),
        (13, undo_entry("g1", false, mine(12, 2), vec![e(1.0)])),
        (14, undo_entry("g1", false, mine(10, 1), vec![e(0.0)])),
        (15, undo_entry("g1", true, Target::entry(14), vec![e(1.0)])),
    ];
    let s = stacks(entries.iter().map(|(q, b)| (*q, b)), "g1");
    let undo_targets: Vec<_> = s.undo.iter().map(|x| x.target.clone()).collect();
    assert_eq!(
        undo_targets,
        vec![Target::entry(15)],
        "the redo is the step to undo"
    );
    let redo_targets: Vec<_> = s.redo.iter().map(|x| x.target.clone()).collect();
    assert_eq!(redo_targets, vec![Target::entry(13)]);

    // A new step of the group empties the redo stack; another group's does not.
    let mut more = entries.clone();
    more.push((16, EntryBody::Mutations(run("g2", "c9", 2, e(8.0)))));
    let s = stacks(more.iter().map(|(q, b)| (*q, b)), "g1");
    assert_eq!(s.redo.len(), 1);
    more.push((17, EntryBody::Mutations(run("g1", "c1", 3, e(3.0)))));
    let s = stacks(more.iter().map(|(q, b)| (*q, b)), "g1");
    assert!(s.redo.is_empty());
    assert_eq!(s.undo.last().map(|x| x.target.clone()), Some(mine(17, 3)));

    // Read from the middle, the tops are the same.
    let s = stacks(entries[3..].iter().map(|(q, b)| (*q, b)), "g1");
    assert_eq!(
        s.undo.last().map(|x| x.target.clone()),
        Some(Target::entry(15))
    );
    assert_eq!(
        s.redo.last().map(|x| x.target.clone()),
        Some(Target::entry(13))
    );
}

#[test]
fn a_step_in_a_batch_knows_the_runs_around_it() {
    let e = |r: &str| set(&[(r, num(1.0), None)]);
    let batch = EntryBody::Batch(crate::mutations::MutationBatch {
        runs: vec![
            run("g2", "c2", 4, e("A1")),
            run("g1", "c1", 1, e("B1")),
            run("g3", "c3", 2, e("C1")),
        ],
    });
    let s = stacks([(5, &batch)], "g1");
    let step = &s.undo[0];
    assert_eq!(step.prefix, vec![e("A1")]);
    assert_eq!(step.events, vec![e("B1")]);
    assert_eq!(step.suffix, vec![e("C1")]);
}

#[test]
fn a_step_and_its_undo_later_in_history_cancel_out() {
    let col_a = Event::DeleteColumns(DeleteColumns {
        at: ColumnName(0),
        count: 1,
    });
    let back = vec![
        Event::InsertColumns(InsertColumns {
            at: ColumnName(0),
            count: 1,
        }),
        set(&[("A1", num(1.0), None)]),
    ];
    let other = set(&[("C9", num(3.0), None)]);
    let mine = |seq: u64| Target {
        seq,
        client: "c1".into(),
        id: seq,
    };
    let later = vec![
        (5, EntryBody::Mutations(run("g1", "c1", 5, col_a.clone()))),
        (6, EntryBody::Event(other.clone())),
        (7, undo_entry("g1", false, mine(5), back.clone())),
    ];
    assert_eq!(
        history_after(later.iter().map(|(q, b)| (*q, b))),
        vec![other.clone()]
    );
    // Redone, it counts again; undone once more, it cancels with its redo.
    let mut more = later.clone();
    more.push((
        8,
        undo_entry("g1", true, Target::entry(7), vec![col_a.clone()]),
    ));
    assert_eq!(
        history_after(more.iter().map(|(q, b)| (*q, b))),
        vec![other.clone(), col_a.clone()]
    );
    more.push((9, undo_entry("g1", false, Target::entry(8), back)));
    assert_eq!(
        history_after(more.iter().map(|(q, b)| (*q, b))),
        vec![other]
    );
}

#[test]
fn an_import_by_the_group_is_a_step_undone_by_a_restore_while_nothing_follows() {
    let import = |group: Option<&str>| {
        EntryBody::Event(Event::Import(crate::event::Import {
            format: crate::event::ImportFormat::Csv,
            group: group.map(str::to_owned),
            layout: None,
        }))
    };
    let entries = [
        (3, import(Some("g1"))),
        (4, import(Some("g2"))),
        (5, import(None)),
        (
            6,
            EntryBody::Event(Event::Restore(crate::event::Restore {
                seq: 2,
                group: Some("g2".into()),
            })),
        ),
    ];
    let g2 = stacks(entries.iter().map(|(q, b)| (*q, b)), "g2");
    let tops: Vec<_> = g2.undo.iter().map(|x| x.target.clone()).collect();
    assert_eq!(
        tops,
        vec![Target::entry(4), Target::entry(6)],
        "an import and a restore"
    );
    let s = stacks(entries.iter().map(|(q, b)| (*q, b)), "g1");
    assert_eq!(s.undo.len(), 1);
    let step = &s.undo[0];
    assert!(replaces(step));
    assert_eq!(step.target, Target::entry(3));
    assert_eq!(
        undo_replace(step, &[]),
        (
            vec![Event::Restore(crate::event::Restore {
                seq: 3,
                group: None
            })],
            0
        )
    );
    assert_eq!(
        undo_replace(step, &[set(&[("A1", num(1.0), None)])]),
        (Vec::new(), 1)
    );
}

#[test]
fn an_edit_appended_for_the_group_is_its_step() {
    let authored = |group: &str, e: Event| {
        EntryBody::Authored(crate::authored::Authored {
            group: group.into(),
            event: e,
        })
    };
    let entries = [
        (2, authored("cli", set(&[("A1", num(1.0), None)]))),
        (3, authored("other", set(&[("A2", num(2.0), None)]))),
        (4, EntryBody::Event(set(&[("A3", num(3.0), None)]))),
    ];
    let s = stacks(entries.iter().map(|(q, b)| (*q, b)), "cli");
    assert_eq!(s.undo.len(), 1);
    assert_eq!(s.undo[0].target, Target::entry(2));
    assert!(!replaces(&s.undo[0]));
    // Later in history it is an edit like any other.
    let later = history_after(entries[1..].iter().map(|(q, b)| (*q, b)));
    assert_eq!(later.len(), 2);
}
