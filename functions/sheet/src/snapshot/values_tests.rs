//! The values kept beside a snapshot: computed as a read would compute them, shown only while
//! nothing since the snapshot can have changed them.

use proptest::prelude::*;

use super::tests::{LOG, SMALL, build, rt};
use super::values::{ValuesIndex, decode_values, encode_values, seal, values_blob_key, values_key};
use super::*;
use crate::event::{Event, InsertRows};
use crate::formula::Formula;
use crate::test_support::{at, set_cells, set_refs};
use crate::{CellRef, Range, Row, Value};

fn formula(text: &str) -> Value {
    Value::Formula(Formula::new(text).unwrap())
}

/// 60 rows: A holds numbers, B a running total down each block of ten rows (`=B9+A10`), C the
/// row's double; `D1` sums column A, and `E55` asks the time.
fn sheet() -> Vec<LogEntry> {
    let mut cells = Vec::new();
    for row in 1..=60u32 {
        cells.push((format!("A{row}"), Value::Number(f64::from(row))));
        let b = if row % 10 == 1 {
            format!("A{row}")
        } else {
            format!("B{}+A{row}", row - 1)
        };
        cells.push((format!("B{row}"), formula(&b)));
        cells.push((format!("C{row}"), formula(&format!("A{row}*2"))));
    }
    cells.push(("D1".into(), formula("SUM(A1:A60)")));
    cells.push(("E55".into(), formula("NOW()")));
    vec![LogEntry::event(0, set_refs(&cells))]
}

/// What a reader sees of `range` at `base` plus `tail`.
async fn shown(store: &MemBlobs, base: &Manifest, tail: &[LogEntry], range: Range) -> Vec<Row> {
    let payloads = MemImports::default();
    let (rows, _) = read_rows(
        store,
        &payloads,
        LOG,
        Some(base),
        tail,
        range,
        ReadBudget::UNLIMITED,
    )
    .await
    .unwrap();
    shown_rows(store, &payloads, LOG, Some(base), tail, range, rows)
        .await
        .unwrap()
}

fn value_at(rows: &[Row], a1: &str) -> Value {
    let c = at(a1);
    rows.iter()
        .find(|r| r.index == c.row)
        .and_then(|r| r.cells.iter().find(|(col, _)| *col == c.col))
        .map_or(Value::Empty, |(_, cell)| cell.value.clone())
}

/// Rewrites the kept value of `cell` to `value` in the store, as if the pass had computed it: a
/// read that shows `value` has shown the kept value rather than evaluating.
async fn plant(store: &MemBlobs, base: &Manifest, cell: &str, value: Value) {
    let key = values_key(LOG, base.seq);
    let mut index: ValuesIndex =
        serde_json::from_slice(&store.get(&key).await.unwrap().unwrap()).unwrap();
    let starts = base.chunk_starts();
    let target = at(cell);
    let c = index
        .chunks
        .iter_mut()
        .find(|c| {
            let first = starts[c.chunk as usize];
            let rows = base.chunks[c.chunk as usize].rows;
            (first..first + rows).contains(&target.row)
        })
        .expect("the cell's chunk keeps values");
    let first = starts[c.chunk as usize];
    let blob = store
        .get(&values_blob_key(LOG, &c.hash))
        .await
        .unwrap()
        .unwrap();
    let raw = super::values::unseal("blob", &c.hash, &blob).unwrap();
    let mut values: Vec<(CellRef, Value)> =
        decode_values(first, &raw).unwrap().into_iter().collect();
    values.sort_by_key(|(a, _)| (a.row, a.col));
    let slot = values.iter_mut().find(|(a, _)| *a == target).expect("kept");
    slot.1 = value;
    let raw = encode_values(first, &values);
    c.hash = ChunkHash::of(&raw);
    store
        .put(&values_blob_key(LOG, &c.hash), seal(&raw).unwrap().into())
        .await
        .unwrap();
    store
        .put(&key, serde_json::to_vec(&index).unwrap().into())
        .await
        .unwrap();
}

async fn built_with_values(entries: &[LogEntry]) -> (MemBlobs, Manifest, ValuesReport) {
    let store = MemBlobs::default();
    let payloads = MemImports::default();
    let seq = entries.len() as u64;
    let base = build(&store, &payloads, SMALL, seq, None, entries)
        .await
        .read_manifest(&store)
        .await
        .unwrap();
    let report = compute_values(&store, &payloads, &base, None)
        .await
        .unwrap();
    (store, base, report)
}

#[test]
fn every_formula_chunk_but_a_volatile_one_keeps_its_values() {
    rt().block_on(async {
        let (store, base, report) = built_with_values(&sheet()).await;
        let with_formulas = base.chunks.iter().filter(|c| c.formulas > 0).count();
        assert!(with_formulas > 3, "the sheet spans chunks: {with_formulas}");
        assert_eq!(report.formula_chunks, with_formulas);
        assert_eq!(report.kept_chunks, with_formulas - 1, "all but NOW()'s");
        // 60 in B, 60 in C, D1; not E55's chunk.
        assert!(report.kept_formulas < 121 && report.kept_formulas > 60);
        let index: ValuesIndex = serde_json::from_slice(
            &store
                .get(&values_key(LOG, base.seq))
                .await
                .unwrap()
                .unwrap(),
        )
        .unwrap();
        // D1 reads all of column A, so the first chunk's area reaches row 60.
        assert_eq!(index.chunks[0].area.parse::<Range>().unwrap().end.row, 59);
        // Shown values are the computed ones.
        let rows = shown(&store, &base, &[], "A1:E60".parse().unwrap()).await;
        assert_eq!(value_at(&rows, "B10"), Value::Number(55.0));
        assert_eq!(value_at(&rows, "C7"), Value::Number(14.0));
        assert_eq!(value_at(&rows, "D1"), Value::Number(1830.0));
        assert!(matches!(value_at(&rows, "E55"), Value::Number(n) if n > 45_000.0));
    });
}

#[test]
fn a_kept_value_is_shown_until_an_entry_touches_its_area() {
    rt().block_on(async {
        let (store, base, _) = built_with_values(&sheet()).await;
        plant(&store, &base, "B20", Value::Text("kept".into())).await;
        let b20: Range = "B20".parse().unwrap();
        // Nothing after the snapshot: the kept value shows (no evaluation could give a text).
        let rows = shown(&store, &base, &[], b20).await;
        assert_eq!(value_at(&rows, "B20"), Value::Text("kept".into()));
        // A set far from B20's chunk's area leaves it standing.
        let far = LogEntry::event(base.seq, set_refs(&[("H200", Value::Number(1.0))]));
        let rows = shown(&store, &base, std::slice::from_ref(&far), b20).await;
        assert_eq!(value_at(&rows, "B20"), Value::Text("kept".into()));
        // A set of one of its inputs: evaluated, with the new input.
        let near = LogEntry::event(base.seq, set_refs(&[("A11", Value::Number(100.0))]));
        let rows = shown(&store, &base, std::slice::from_ref(&near), b20).await;
        assert_eq!(value_at(&rows, "B20"), Value::Number(244.0));
        // A row inserted anywhere: everything is evaluated.
        let insert = LogEntry::event(
            base.seq,
            Event::InsertRows(InsertRows {
                at: crate::event::RowNumber(199),
                count: 1,
                values: Vec::new(),
            }),
        );
        let rows = shown(&store, &base, std::slice::from_ref(&insert), b20).await;
        assert_eq!(value_at(&rows, "B20"), Value::Number(155.0));
    });
}

#[test]
fn an_evaluation_stops_at_formulas_whose_values_are_kept() {
    rt().block_on(async {
        let (store, base, _) = built_with_values(&sheet()).await;
        plant(&store, &base, "B10", Value::Number(1000.0)).await;
        // F30 is outside every chunk's area, so setting it leaves B10's kept value standing, and
        // evaluating F30 reads B10 as that value rather than evaluating B10's chain.
        let f30 = LogEntry::event(base.seq, set_refs(&[("F30", formula("B10*2"))]));
        let rows = shown(
            &store,
            &base,
            std::slice::from_ref(&f30),
            "F30".parse().unwrap(),
        )
        .await;
        assert_eq!(value_at(&rows, "F30"), Value::Number(2000.0));
    });
}

#[test]
fn a_damaged_index_or_values_blob_costs_only_an_evaluation() {
    rt().block_on(async {
        let (store, base, _) = built_with_values(&sheet()).await;
        plant(&store, &base, "C7", Value::Text("kept".into())).await;
        let c7: Range = "C7".parse().unwrap();
        let key = values_key(LOG, base.seq);
        // A damaged values blob: the read evaluates that chunk rather than failing.
        let index: ValuesIndex =
            serde_json::from_slice(&store.get(&key).await.unwrap().unwrap()).unwrap();
        for c in &index.chunks {
            store
                .put(&values_blob_key(LOG, &c.hash), "damaged".into())
                .await
                .unwrap();
        }
        let rows = shown(&store, &base, &[], c7).await;
        assert_eq!(value_at(&rows, "C7"), Value::Number(14.0));
        // An index that does not parse: the same.
        store.put(&key, "{not json".into()).await.unwrap();
        let rows = shown(&store, &base, &[], c7).await;
        assert_eq!(value_at(&rows, "C7"), Value::Number(14.0));
    });
}

/// A small sheet of numbers and formulas over columns A to D.
fn cell_strategy() -> impl Strategy<Value = Value> {
    let r = 1..=24u32;
    let col = prop::sample::select(vec!['A', 'B', 'C', 'D']);
    prop_oneof![
        (0..100i32).prop_map(|n| Value::Number(f64::from(n))),
        (col.clone(), r.clone()).prop_map(|(c, r)| formula(&format!("{c}{r}+1"))),
        (col.clone(), r.clone(), r.clone())
            .prop_map(|(c, a, b)| formula(&format!("SUM({c}{a}:{c}{b})"))),
        (col, r).prop_map(|(c, r)| formula(&format!("IF({c}{r}>50,{c}{r},0)"))),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Whatever the sheet and the `set`s after its snapshot, a read with kept values shows what
    /// a read that evaluates everything shows.
    #[test]
    fn kept_values_show_what_an_evaluation_shows(
        cells in prop::collection::vec(((0..24u32), (0..4u32), cell_strategy()), 1..60),
        tail in prop::collection::vec(((0..24u32), (0..4u32), cell_strategy()), 0..4),
    ) {
        rt().block_on(async {
            let edits = |list: &[(u32, u32, Value)], seq: u64| LogEntry::event(seq, set_cells(
                list.iter().map(|(row, col, v)| (CellRef { row: *row, col: *col }, v.clone())),
            ));
            let entries = vec![edits(&cells, 0)];
            let (kept, base, _) = built_with_values(&entries).await;
            let plain = MemBlobs::default();
            build(&plain, &MemImports::default(), SMALL, 1, None, &entries).await;
            let tail: Vec<LogEntry> = tail
                .iter()
                .enumerate()
                .map(|(i, e)| edits(std::slice::from_ref(e), 1 + i as u64))
                .collect();
            let range: Range = "A1:D24".parse().unwrap();
            let with = shown(&kept, &base, &tail, range).await;
            let without = shown(&plain, &base, &tail, range).await;
            prop_assert_eq!(with, without);
            Ok(())
        })?;
    }
}

/// A running total down 200 rows: `B(r) = B(r-1) + A(r)`.
fn running_total() -> Vec<LogEntry> {
    let mut cells = Vec::new();
    for row in 1..=200u32 {
        cells.push((format!("A{row}"), Value::Number(f64::from(row))));
        let b = if row == 1 {
            "A1".to_owned()
        } else {
            format!("B{}+A{row}", row - 1)
        };
        cells.push((format!("B{row}"), formula(&b)));
    }
    vec![LogEntry::event(0, set_refs(&cells))]
}

#[test]
fn a_running_total_is_kept_chunk_by_chunk_without_evaluating_what_is_kept_again() {
    rt().block_on(async {
        let (store, base, report) = built_with_values(&running_total()).await;
        assert!(report.formula_chunks > 10, "{report:?}");
        assert_eq!(report.kept_chunks, report.formula_chunks, "{report:?}");
        assert_eq!(report.kept_formulas, 200);
        // Each chunk evaluates its own rows and one kept value from the chunk above: about the
        // sheet's 400 cells in all, not the rows above every chunk again (several thousand).
        assert!(report.cells_loaded < 800, "{report:?}");
        let b200: Range = "B200".parse().unwrap();
        let rows = shown(&store, &base, &[], b200).await;
        assert_eq!(value_at(&rows, "B200"), Value::Number(20_100.0));
        // A value taken from the chunk above stands for what that chunk read: an edit at the top
        // makes the bottom chunk evaluate again.
        let top = LogEntry::event(base.seq, set_refs(&[("A1", Value::Number(1_001.0))]));
        let rows = shown(&store, &base, std::slice::from_ref(&top), b200).await;
        assert_eq!(value_at(&rows, "B200"), Value::Number(21_100.0));
    });
}
