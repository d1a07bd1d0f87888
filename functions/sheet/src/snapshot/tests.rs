//! Tests of the snapshot engine: properties (a)–(c) against the in-memory state machine, write
//! amplification of clustered edits and row inserts, the read path, resumability, corruption.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::BTreeMap;
use std::io::Cursor;

use bytes::Bytes;
use proptest::prelude::*;
use uuid::Uuid;

use super::*;
use crate::entry::EntryBody;
use crate::event::*;
use crate::layout::{Freeze, ResizeColumns, ResizeRows};
use crate::mutations::{Mutation, Mutations};
use crate::sample::{SAMPLE_COLS, write_sample_csv};
use crate::{Cell, CellRef, Range, Sheet, Value};

pub(super) const LOG: Uuid = Uuid::from_u128(0x5eed_0000_0000_4000_8000_0000_0000_0001);
/// A tiny target so the small sheets of the property tests still span many chunks.
pub(super) const SMALL: BuildConfig = BuildConfig { chunk_target: 160 };

pub(super) fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The oracle: replay entries `[0, seq)` on the in-memory sheet.
pub(super) fn replay(entries: &[LogEntry], seq: u64, payloads: &MemImports) -> Sheet {
    let mut sheet = Sheet::new();
    for e in entries.iter().take(seq as usize) {
        for ev in e.entry.events() {
            let payload = e.payload.as_ref().map(|k| {
                Box::new(Cursor::new(payloads.get(k).expect("payload")))
                    as Box<dyn crate::import::ReadSeek>
            });
            sheet.apply(ev, payload).unwrap();
        }
    }
    sheet
}

pub(super) async fn build(
    store: &MemBlobs,
    payloads: &MemImports,
    config: BuildConfig,
    seq: u64,
    base: Option<Manifest>,
    entries: &[LogEntry],
) -> BuildResult {
    let from = base.as_ref().map_or(0, |b| b.seq) as usize;
    build_snapshot(
        store,
        payloads,
        config,
        LOG,
        seq,
        base,
        entries[from..seq as usize].to_vec(),
    )
    .await
    .unwrap()
}

/// The blobs a manifest references plus the manifest itself, by key.
pub(super) fn snapshot_blobs(store: &MemBlobs, m: &Manifest) -> BTreeMap<String, Bytes> {
    let all = store.snapshot();
    let mut out = BTreeMap::new();
    let mkey = manifest_key(m.log_id, m.seq);
    out.insert(
        mkey.clone(),
        all.get(&mkey).cloned().expect("manifest stored"),
    );
    for c in &m.chunks {
        let k = c.key(m.log_id, m.format);
        out.insert(k.clone(), all.get(&k).cloned().expect("chunk stored"));
    }
    out
}

fn full_range() -> Range {
    Range::new(CellRef { row: 0, col: 0 }, CellRef { row: 99, col: 13 })
}

// ---- random event sequences ----

fn small_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        1 => Just(Value::Empty),
        4 => "[a-z ]{0,40}".prop_map(Value::Text),
        2 => (-1000i32..1000).prop_map(|n| Value::Number(f64::from(n) / 4.0)),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => proptest::sample::select(crate::ErrorCode::ALL.to_vec()).prop_map(Value::Error),
    ]
}

/// An entry spec: an event, a log marker, or a CSV import with its file.
#[derive(Debug, Clone)]
pub(super) enum Spec {
    Event(Event),
    /// A `mutations` entry: events, each followed by whether a rejected id comes after it.
    Mutations(Vec<(Event, bool)>),
    Marker,
    Csv(String),
}

fn event() -> impl Strategy<Value = Event> {
    // Cells of one `set` sit within four rows of each other, as a person's edits do, so most
    // entries leave most chunks alone and the reuse path is exercised as much as the rewrite path.
    let cell = (
        0u32..4,
        0u32..10,
        small_value(),
        proptest::option::of("0\\.0{0,3}%?"),
    );
    prop_oneof![
        8 => (0u32..70, proptest::collection::vec(cell, 1..8)).prop_map(|(r0, cells)| Event::Set(SetCells {
            cells: cells
                .into_iter()
                .map(|(dr, col, value, format)| CellEdit { at: CellRef { row: r0 + dr, col }, value, format })
                .collect(),
        })),
        2 => (0u32..70, 1u32..5, proptest::collection::vec(proptest::collection::vec(small_value(), 0..6), 0..4))
            .prop_map(|(at, count, values)| Event::InsertRows(InsertRows {
                at: RowNumber(at),
                count,
                values: values.into_iter().take(count as usize).collect(),
            })),
        2 => (0u32..70, 1u32..6).prop_map(|(at, count)| Event::DeleteRows(DeleteRows { at: RowNumber(at), count })),
        1 => (0u32..12, 1u32..3).prop_map(|(at, count)| Event::InsertColumns(InsertColumns { at: ColumnName(at), count })),
        1 => (0u32..12, 1u32..3).prop_map(|(at, count)| Event::DeleteColumns(DeleteColumns { at: ColumnName(at), count })),
        // Ranges of a few rows and columns, styled with one of a sheet's few shared styles.
        3 => (proptest::collection::vec((0u32..70, 0u32..10, 1u32..5, 1u32..4), 1..3),
              proptest::sample::select(crate::style::tests::ten_patches()))
            .prop_map(|(ranges, style)| Event::Style(StyleCells {
                ranges: ranges
                    .into_iter()
                    .map(|(r, c, h, w)| Range::new(CellRef { row: r, col: c }, CellRef { row: r + h - 1, col: c + w - 1 }))
                    .collect(),
                style,
            })),
        // The layout: a few widths and heights (some back to the default), a split.
        1 => (0u32..12, 1u32..4, proptest::option::of(20u16..300)).prop_map(|(at, count, width)| {
            Event::ResizeColumns(ResizeColumns { at: ColumnName(at), count, width })
        }),
        1 => (0u32..70, 1u32..6, proptest::option::of(10u16..90)).prop_map(|(at, count, height)| {
            Event::ResizeRows(ResizeRows { at: RowNumber(at), count, height })
        }),
        1 => (0u32..5, 0u32..3).prop_map(|(rows, columns)| Event::Freeze(Freeze { rows, columns })),
    ]
}

pub(super) fn spec() -> impl Strategy<Value = Spec> {
    prop_oneof![
        14 => event().prop_map(Spec::Event),
        // A sync client's run: several events in one entry, some mutation ids rejected.
        2 => proptest::collection::vec((event(), any::<bool>()), 0..4).prop_map(Spec::Mutations),
        1 => Just(Spec::Marker),
        1 => proptest::collection::vec(proptest::collection::vec("[a-z0-9]{0,30}", 0..8), 0..40)
            .prop_map(|rows| Spec::Csv(rows.iter().map(|r| r.join(",") + "\n").collect())),
    ]
}

pub(super) fn entries_of(specs: &[Spec], payloads: &MemImports) -> Vec<LogEntry> {
    specs
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let seq = i as u64;
            match s {
                Spec::Event(e) => LogEntry::event(seq, e.clone()),
                Spec::Mutations(events) => {
                    let mut id = 1;
                    let mut applied = Vec::new();
                    for (event, then_rejected) in events {
                        applied.push(Mutation {
                            id,
                            event: event.clone(),
                        });
                        id += if *then_rejected { 2 } else { 1 };
                    }
                    LogEntry {
                        seq,
                        entry: EntryBody::Mutations(Mutations {
                            group: "g".into(),
                            client: format!("c{seq}"),
                            first: 1,
                            last: id.max(2) - 1,
                            applied,
                            sent: Vec::new(),
                        }),
                        payload: None,
                    }
                }
                Spec::Marker => LogEntry {
                    seq,
                    entry: EntryBody::Snapshot,
                    payload: None,
                },
                Spec::Csv(text) => {
                    let key = format!("payloads/{LOG}/{seq}");
                    payloads.insert(&key, text.clone().into_bytes());
                    LogEntry {
                        seq,
                        entry: EntryBody::Event(Event::Import(Import {
                            format: ImportFormat::Csv,
                            group: None,
                            layout: None,
                        })),
                        payload: Some(key),
                    }
                }
            }
        })
        .collect()
}

fn cuts(len: usize) -> impl Strategy<Value = (usize, usize)> {
    (0..=len, 0..=len).prop_map(|(a, b)| (a.min(b), a.max(b)))
}

/// A random entry list that starts with an import of 60 realistic rows (so there is a base with
/// many chunks for later entries to reuse or rewrite), and two cut points.
fn case() -> impl Strategy<Value = (Vec<Spec>, (usize, usize))> {
    proptest::collection::vec(spec(), 1..16).prop_flat_map(|mut specs| {
        let mut csv = Vec::new();
        write_sample_csv(&mut csv, 60).unwrap();
        specs.insert(0, Spec::Csv(String::from_utf8(csv).unwrap()));
        let n = specs.len();
        (Just(specs), cuts(n))
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// (a) A snapshot at k plus replay of the entries after it equals replay from empty.
    #[test]
    fn snapshot_then_replay_equals_replay_from_empty((specs, (k, _)) in case()) {
        let payloads = MemImports::new();
        let entries = entries_of(&specs, &payloads);
        let n = entries.len() as u64;
        let want_k = replay(&entries, k as u64, &payloads);
        let want_n = replay(&entries, n, &payloads);
        rt().block_on(async {
            let store = MemBlobs::new();
            let snap = build(&store, &payloads, SMALL, k as u64, None, &entries).await;
            let got = materialize(&store, &snap.manifest().unwrap()).await.unwrap();
            prop_assert_eq!(&got, &want_k, "snapshot at {} differs from replay", k);
            let (values, _) = read_range(&store, &payloads, LOG, Some(&snap.manifest().unwrap()), &entries[k..], full_range())
                .await
                .unwrap();
            prop_assert_eq!(values, want_n.read_range(full_range()));
            // The layout: the manifest's, through the entries after it.
            prop_assert_eq!(&layout_at(Some(&snap.manifest().unwrap()), &entries[k..]), want_n.layout());
            // The cells themselves, formats and styles with the values (a styled empty cell too).
            let all = ReadBudget { cells: usize::MAX, bytes: usize::MAX };
            let (rows, _) = read_rows(&store, &payloads, LOG, Some(&snap.manifest().unwrap()), &entries[k..], full_range(), all)
                .await
                .unwrap();
            let r = full_range();
            let want_rows: Vec<crate::Row> = want_n
                .rows()
                .filter(|row| row.index <= r.end.row)
                .map(|mut row| {
                    row.cells.retain(|(c, _)| *c <= r.end.col);
                    row
                })
                .filter(|row| !row.cells.is_empty())
                .collect();
            prop_assert_eq!(rows, want_rows);
            // Also a small range somewhere in the middle.
            let r: Range = "C7:E12".parse().unwrap();
            let (values, _) = read_range(&store, &payloads, LOG, Some(&snap.manifest().unwrap()), &entries[k..], r).await.unwrap();
            prop_assert_eq!(values, want_n.read_range(r));
            Ok(())
        })?;
    }

    /// (b) Snapshots built incrementally equal a from-scratch snapshot of the same prefix, byte
    /// for byte (manifest and every chunk blob).
    #[test]
    fn incremental_snapshots_equal_from_scratch_byte_for_byte((specs, (a, b)) in case()) {
        let payloads = MemImports::new();
        let entries = entries_of(&specs, &payloads);
        let n = entries.len() as u64;
        rt().block_on(async {
            let inc = MemBlobs::new();
            let s1 = build(&inc, &payloads, SMALL, a as u64, None, &entries).await;
            // The incremental builds write their chunk lists out a piece at a time; the
            // from-scratch ones keep theirs in memory: the same bytes either way.
            let spilling = |seq: u64, base: Manifest| {
                let from = base.seq as usize;
                SnapshotBuilder::new(&inc, &payloads, SMALL, LOG, seq, Some(base), entries[from..seq as usize].to_vec())
                    .unwrap()
                    .with_list_block(1)
                    .run(|_| {})
            };
            let s2 = spilling(b as u64, s1.manifest().unwrap()).await.unwrap();
            let s3 = spilling(n, s2.manifest().unwrap()).await.unwrap();
            for (seq, got) in [(b as u64, &s2), (n, &s3)] {
                let scratch = MemBlobs::new();
                let full = build(&scratch, &payloads, SMALL, seq, None, &entries).await;
                prop_assert_eq!(&got.manifest().unwrap(), &full.manifest().unwrap());
                prop_assert_eq!(snapshot_blobs(&inc, &got.manifest().unwrap()), snapshot_blobs(&scratch, &full.manifest().unwrap()));
            }
            prop_assert_eq!(&materialize(&inc, &s3.manifest().unwrap()).await.unwrap(), &replay(&entries, n, &payloads));
            Ok(())
        })?;
    }

    /// (e) A fork at `b` of a log with a snapshot at `a`: its first snapshot (sequence 0) is the
    /// source's state at `b`; the chunks the entries after `a` leave alone stay in the source's
    /// prefix; and the fork's own later snapshots keep pointing there.
    #[test]
    fn a_fork_shares_the_sources_chunks_and_reads_the_same((specs, (a, b)) in case()) {
        const FORK: Uuid = Uuid::from_u128(0xf0f0_0000_0000_4000_8000_0000_0000_0002);
        let payloads = MemImports::new();
        let entries = entries_of(&specs, &payloads);
        let n = entries.len() as u64;
        rt().block_on(async {
            let store = MemBlobs::new();
            let base = build(&store, &payloads, SMALL, a as u64, None, &entries).await;
            let before = store.snapshot().len();
            let fork = SnapshotBuilder::fork(&store, &payloads, SMALL, FORK, b as u64, Some(base.manifest().unwrap().clone()), entries[a..b].to_vec())
                .unwrap()
                .run(|_| {})
                .await
                .unwrap();
            prop_assert_eq!((fork.manifest().unwrap().log_id, fork.manifest().unwrap().seq), (FORK, 0));
            prop_assert_eq!(&fork.manifest_key, &manifest_key(FORK, 0));
            prop_assert_eq!(&materialize(&store, &fork.manifest().unwrap()).await.unwrap(), &replay(&entries, b as u64, &payloads));
            // Shared chunks are the source's own blobs; only rewritten ones (and the manifest) are new.
            let shared = fork.manifest().unwrap().chunks.iter().filter(|c| c.log == Some(LOG)).count() as u64;
            prop_assert_eq!(store.snapshot().len() - before, fork.stats.chunks_written as usize + 1);
            if a == b {
                // A fork right at a snapshot copies nothing at all.
                prop_assert_eq!(shared, fork.manifest().unwrap().chunks.len() as u64);
                prop_assert_eq!(fork.stats.chunks_written, 0);
            }
            for c in &fork.manifest().unwrap().chunks {
                let owner = c.log.unwrap_or(FORK);
                prop_assert!(store.snapshot().contains_key(&chunk_key(owner, &c.hash, FORMAT_VERSION)));
            }
            // The fork goes on: its entry 0 is the snapshot, then the source's entries after `b`.
            let mut later = vec![LogEntry { seq: 0, entry: EntryBody::Snapshot, payload: None }];
            later.extend(entries[b..].iter().enumerate().map(|(i, e)| LogEntry { seq: i as u64 + 1, ..e.clone() }));
            let m = later.len() as u64;
            let next = build_snapshot(&store, &payloads, SMALL, FORK, m, Some(fork.manifest().unwrap().clone()), later.clone())
                .await
                .unwrap();
            prop_assert_eq!(&materialize(&store, &next.manifest().unwrap()).await.unwrap(), &replay(&entries, n, &payloads));
            for c in next.manifest().unwrap().chunks.iter().filter(|c| c.log.is_some()) {
                prop_assert_eq!(c.log, Some(LOG), "a reused chunk still names its owner");
            }
            Ok(())
        })?;
    }

    /// (c) Resuming from every checkpoint, in a fresh builder, gives the same bytes.
    #[test]
    fn resuming_from_every_checkpoint_gives_the_same_bytes((specs, (a, _)) in case()) {
        let payloads = MemImports::new();
        let entries = entries_of(&specs, &payloads);
        let n = entries.len() as u64;
        rt().block_on(async {
            let store = MemBlobs::new();
            let base = build(&store, &payloads, SMALL, a as u64, None, &entries).await.manifest().unwrap();
            let mut checkpoints = Vec::new();
            // Every piece of the chunk list is written out as a part of its own, so resuming
            // crosses parts written by the first process.
            let first = SnapshotBuilder::new(&store, &payloads, SMALL, LOG, n, Some(base.clone()), entries[a..].to_vec())
                .unwrap()
                .with_list_block(1)
                .run(|c| checkpoints.push(serde_json::to_string(&c).unwrap()))
                .await
                .unwrap();
            let want = snapshot_blobs(&store, &first.manifest().unwrap());
            for json in &checkpoints {
                let cp: Checkpoint = serde_json::from_str(json).unwrap();
                // A fresh store holding only the base snapshot, the parts of the chunk list the
                // checkpoint names and the chunks it lists: the resumed process must write
                // everything after it itself.
                let fresh = MemBlobs::new();
                let parts: Vec<Piece> = cp
                    .pieces
                    .parts()
                    .iter()
                    .flat_map(|h| {
                        let b = store.snapshot()[&list_key(LOG, h)].clone();
                        super::chunk_list::records(&b).map(Result::unwrap).collect::<Vec<_>>()
                    })
                    .collect();
                let keep: Vec<String> = base
                    .chunks
                    .iter()
                    .map(|c| c.hash)
                    .chain(parts.into_iter().map(Ok).chain(cp.pieces.iter()).filter_map(|p| match p.unwrap() {
                        Piece::New(c) => Some(c.hash),
                        Piece::Reused { .. } => None,
                    }))
                    .map(|h| chunk_key(LOG, &h, FORMAT_VERSION))
                    .chain([manifest_key(LOG, base.seq)])
                    .chain(cp.pieces.parts().iter().map(|h| list_key(LOG, h)))
                    .collect();
                for (k, v) in store.snapshot() {
                    if keep.contains(&k) {
                        fresh.put(&k, v).await.unwrap();
                    }
                }
                let resumed = SnapshotBuilder::resume(&fresh, &payloads, SMALL, LOG, n, Some(base.clone()), entries[a..].to_vec(), &cp)
                    .unwrap()
                    .with_list_block(1)
                    .run(|_| {})
                    .await
                    .unwrap();
                prop_assert_eq!(&resumed.manifest().unwrap(), &first.manifest().unwrap());
                prop_assert_eq!(snapshot_blobs(&fresh, &resumed.manifest().unwrap()), want.clone());
            }
            Ok(())
        })?;
    }
}

// ---- write amplification on a large sheet ----

/// A 1,000,000-cell sheet (100,000 sample rows × 10 columns) imported from CSV.
pub(super) async fn million_cell_sheet(
    store: &MemBlobs,
    payloads: &MemImports,
) -> (Vec<LogEntry>, BuildResult) {
    let mut csv = Vec::new();
    write_sample_csv(&mut csv, 100_000).unwrap();
    payloads.insert("payloads/big.csv", csv);
    let entries = vec![
        LogEntry {
            seq: 0,
            entry: EntryBody::Snapshot,
            payload: None,
        },
        LogEntry {
            seq: 1,
            entry: EntryBody::Event(Event::Import(Import {
                format: ImportFormat::Csv,
                group: None,
                layout: None,
            })),
            payload: Some("payloads/big.csv".into()),
        },
    ];
    let full = build(store, payloads, BuildConfig::default(), 2, None, &entries).await;
    assert_eq!(
        full.manifest().unwrap().cells,
        100_000 * u64::from(SAMPLE_COLS)
    );
    (entries, full)
}

#[test]
fn clustered_edits_on_a_million_cell_sheet_write_a_few_percent_of_a_full_snapshot() {
    rt().block_on(async {
        let store = MemBlobs::new();
        let payloads = MemImports::new();
        let (mut entries, full) = million_cell_sheet(&store, &payloads).await;
        let full_bytes = full.manifest().unwrap().stored_bytes() + full.manifest_bytes;
        let chunks = full.manifest().unwrap().chunks.len();
        assert!(chunks >= 30, "a 1M-cell sheet spans many chunks, got {chunks}");

        // 100 edits confined to C40001:L40010, each its own entry, as a user typing would make.
        for i in 0..100u32 {
            let at = CellRef { row: 40_000 + i / 10, col: 2 + i % 10 };
            entries.push(LogEntry::event(
                2 + u64::from(i),
                crate::test_support::set_one(at, Value::Text(format!("edited {i}"))),
            ));
        }
        store.reset_stats();
        let inc = build(&store, &payloads, BuildConfig::default(), 102, Some(full.manifest().unwrap().clone()), &entries).await;
        let written = store.stats();
        let ratio = written.bytes as f64 / full_bytes as f64;
        println!(
            "full: {full_bytes} bytes in {chunks} chunks; incremental: {} bytes in {} blobs ({:.2}%), stats {:?}",
            written.bytes, written.puts, ratio * 100.0, inc.stats
        );
        assert!(ratio < 0.05, "wrote {:.2}% of a full snapshot", ratio * 100.0);
        assert!(written.puts <= 3, "one or two chunks plus the manifest, got {}", written.puts);
        assert_eq!(inc.stats.chunks_reused as usize + inc.stats.chunks_opened as usize, chunks);

        // The edits are there, and the rest is untouched.
        let r: Range = "C40001:L40010".parse().unwrap();
        let (values, read) = read_range(&store, &payloads, LOG, Some(&inc.manifest().unwrap()), &[], r).await.unwrap();
        assert_eq!(values[9][9], Value::Text("edited 99".into()));
        assert!(read.chunks_loaded <= 2, "a 10x10 read loads the chunk(s) holding it, got {}", read.chunks_loaded);
        let full_sheet = materialize(&store, &inc.manifest().unwrap()).await.unwrap();
        assert_eq!(full_sheet.cell_count(), 1_000_020, "K and L are new columns: 20 new cells");
        assert_eq!(
            full_sheet.get(CellRef { row: 39_999, col: 2 }).map(|c| &c.value),
            Some(&Value::Text(crate::sample::sample_fields(39_999)[2].clone()))
        );
    });
}

#[test]
fn inserting_one_row_near_the_top_rewrites_one_chunk() {
    rt().block_on(async {
        let store = MemBlobs::new();
        let payloads = MemImports::new();
        let (mut entries, full) = million_cell_sheet(&store, &payloads).await;
        entries.push(LogEntry::event(
            2,
            Event::InsertRows(InsertRows {
                at: RowNumber(10),
                count: 1,
                values: vec![vec![
                    Value::Text("Nails".into()),
                    Value::Number(0.01),
                    Value::Number(80.0),
                ]],
            }),
        ));
        store.reset_stats();
        let inc = build(
            &store,
            &payloads,
            BuildConfig::default(),
            3,
            Some(full.manifest().unwrap().clone()),
            &entries,
        )
        .await;
        let written = store.stats();
        println!("insert near the top: {written:?}, {:?}", inc.stats);
        assert_eq!(written.puts, 2, "one chunk and the manifest");
        assert_eq!(inc.stats.chunks_written, 1);
        assert_eq!(
            inc.manifest().unwrap().chunks.len(),
            full.manifest().unwrap().chunks.len()
        );
        // Every chunk after the first is the same object as before, though every row moved down.
        assert_eq!(
            inc.manifest().unwrap().chunks[1..],
            full.manifest().unwrap().chunks[1..]
        );
        let (values, _) = read_range(
            &store,
            &payloads,
            LOG,
            Some(&inc.manifest().unwrap()),
            &[],
            "A11:C12".parse().unwrap(),
        )
        .await
        .unwrap();
        assert_eq!(
            values[0],
            vec![
                Value::Text("Nails".into()),
                Value::Number(0.01),
                Value::Number(80.0)
            ]
        );
        assert_eq!(
            values[1][0],
            Value::Number(11.0),
            "old row 11 (id 11) is now row 12"
        );
    });
}

#[test]
fn checkpoints_of_a_million_cell_build_stay_small() {
    rt().block_on(async {
        let store = MemBlobs::new();
        let (payloads, entries) = sample_import(100_000);
        let mut largest = 0;
        let mut count = 0;
        let done = SnapshotBuilder::new(
            &store,
            &payloads,
            BuildConfig::default(),
            LOG,
            1,
            None,
            entries,
        )
        .unwrap()
        .run(|c| {
            count += 1;
            largest = largest.max(serde_json::to_vec(&c).unwrap().len());
        })
        .await
        .unwrap();
        println!(
            "{count} checkpoints, largest {largest} bytes, {} chunks",
            done.manifest().unwrap().chunks.len()
        );
        // After each of the first 16 chunks, then about every sixteenth of the chunks so far:
        // linear work for the checkpoints of a large build, and never more than a sixteenth of
        // it lost.
        let chunks = done.manifest().unwrap().chunks.len();
        assert!(count >= 16, "{count} checkpoints for {chunks} chunks");
        assert!(
            count <= 32 + (18.0 * (chunks as f64 / 16.0).ln()).ceil() as usize,
            "{count} checkpoints for {chunks} chunks"
        );
        assert!(largest < 16 * 1024, "checkpoint of {largest} bytes");
    });
}

/// An import of `rows` sample rows as the only entry, with its payload.
fn sample_import(rows: u64) -> (MemImports, Vec<LogEntry>) {
    let payloads = MemImports::new();
    let mut csv = Vec::new();
    write_sample_csv(&mut csv, rows).unwrap();
    payloads.insert("p", csv);
    let entries = vec![LogEntry {
        seq: 0,
        entry: EntryBody::Event(Event::Import(Import {
            format: ImportFormat::Csv,
            group: None,
            layout: None,
        })),
        payload: Some("p".into()),
    }];
    (payloads, entries)
}

/// A from-scratch import of `rows` sample rows at `config`, with every checkpoint serialised.
async fn import_with_checkpoints(
    store: &MemBlobs,
    rows: u64,
    config: BuildConfig,
    list_block: Option<usize>,
) -> (BuildResult, Vec<String>) {
    let (payloads, entries) = sample_import(rows);
    let mut b = SnapshotBuilder::new(store, &payloads, config, LOG, 1, None, entries).unwrap();
    if let Some(bytes) = list_block {
        b = b.with_list_block(bytes);
    }
    let mut checkpoints = Vec::new();
    let done = b
        .run(|c| checkpoints.push(serde_json::to_string(&c).unwrap()))
        .await
        .unwrap();
    (done, checkpoints)
}

/// Checkpoints once carried every chunk of the list (60 bytes of base64 each), so a large build's
/// grew with it (1.1 MB at 100M cells). Now the list goes to the store in parts as it fills, and a
/// checkpoint carries the parts' names and the block being filled.
#[test]
fn checkpoints_stay_bounded_once_the_chunk_list_is_written_out_in_parts() {
    rt().block_on(async {
        let store = MemBlobs::new();
        // 400,000 cells at a 512-byte target: about 8,300 chunks, some 360 KB of records.
        let config = BuildConfig { chunk_target: 512 };
        let (done, checkpoints) = import_with_checkpoints(&store, 40_000, config, None).await;
        let parts = store
            .keys()
            .into_iter()
            .filter(|k| k.starts_with(&format!("snapshots/{LOG}/lists/")))
            .count();
        let last: Checkpoint = serde_json::from_str(checkpoints.last().unwrap()).unwrap();
        let largest = checkpoints.iter().map(String::len).max().unwrap();
        println!(
            "{} chunks, {parts} parts, {} checkpoints, largest {largest} bytes",
            done.chunks,
            checkpoints.len()
        );
        assert!(done.chunks > 5_000, "{} chunks", done.chunks);
        assert!(parts >= 8, "{parts} parts of the chunk list written");
        assert!(last.pieces.parts().len() >= parts - 1);
        // One block of records in base64 (32 KiB, 44 KB) plus a name per part and the fields:
        // whatever the chunk count, not 60 bytes a chunk (500 KB here).
        let bound = (32 << 10) * 4 / 3 + 1024 + 70 * parts;
        assert!(
            largest <= bound,
            "checkpoint of {largest} bytes, bound {bound}"
        );
        // The manifest is too large to keep: it was streamed to the store, and reads back as
        // the one a build that keeps its whole list in memory writes, byte for byte.
        assert!(done.manifest_blob.is_none());
        assert!(done.manifest().is_err());
        let m = done.read_manifest(&store).await.unwrap();
        assert_eq!(m.chunks.len() as u64, done.chunks);
        let whole = MemBlobs::new();
        let (kept, _) = import_with_checkpoints(&whole, 40_000, config, Some(16 << 20)).await;
        assert!(whole.keys().iter().all(|k| !k.contains("/lists/")));
        assert_eq!(kept.manifest_key, done.manifest_key);
        assert_eq!(
            whole.get(&kept.manifest_key).await.unwrap(),
            store.get(&done.manifest_key).await.unwrap()
        );
        assert_eq!(done.manifest_bytes, kept.manifest_bytes);
    });
}

#[test]
fn a_resume_without_the_parts_its_checkpoint_names_fails_rather_than_drop_chunks() {
    rt().block_on(async {
        let store = MemBlobs::new();
        let (_, checkpoints) = import_with_checkpoints(&store, 300, SMALL, Some(1)).await;
        let cp: Checkpoint = serde_json::from_str(checkpoints.last().unwrap()).unwrap();
        assert!(!cp.pieces.parts().is_empty());
        let (payloads, entries) = sample_import(300);
        let fresh = MemBlobs::new();
        let err = SnapshotBuilder::resume(&fresh, &payloads, SMALL, LOG, 1, None, entries, &cp)
            .unwrap()
            .run(|_| {})
            .await
            .unwrap_err();
        assert!(
            matches!(&err, SnapshotError::MissingObject(k) if k.contains("/lists/")),
            "{err}"
        );
        assert!(fresh.get(&manifest_key(LOG, 1)).await.unwrap().is_none());
    });
}

/// Parts that fail after the first: what a manifest whose chunk list cannot be read back gives.
#[derive(Debug)]
struct FailingParts(u32);

#[async_trait::async_trait]
impl BlobParts for FailingParts {
    async fn next_part(&mut self) -> Result<Option<Bytes>, BlobError> {
        self.0 += 1;
        if self.0 > 1 {
            return Err(BlobError::new("put", "k", "the source failed"));
        }
        Ok(Some(Bytes::from_static(b"first part ")))
    }
}

#[test]
fn a_filesystem_store_writes_an_object_in_parts_and_leaves_nothing_of_a_failed_one() {
    rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobs::new(dir.path());
        let parts =
            ["one ", "", "two ", "three"].map(|p: &'static str| Bytes::from_static(p.as_bytes()));
        store
            .put_parts("a/b/c", &mut PartsOf(parts.into_iter()))
            .await
            .unwrap();
        assert_eq!(
            store.get("a/b/c").await.unwrap().unwrap(),
            Bytes::from_static(b"one two three")
        );
        let err = store
            .put_parts("a/b/d", &mut FailingParts(0))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("the source failed"), "{err}");
        assert!(!store.exists("a/b/d").await.unwrap());
        let left: Vec<_> = std::fs::read_dir(dir.path().join("a/b"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["c"], "no temporary file left behind");
    });
}

#[test]
fn put_if_absent_writes_a_key_once_in_every_local_store() {
    rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let mem = MemBlobs::new();
        let fs = FsBlobs::new(dir.path());
        for store in [&mem as &dyn BlobStore, &fs] {
            let first = Bytes::from_static(b"first");
            assert!(store.put_if_absent("a/b/c", first.clone()).await.unwrap());
            // A second write of the key finds it and leaves it as it was.
            assert!(
                !store
                    .put_if_absent("a/b/c", Bytes::from_static(b"second"))
                    .await
                    .unwrap()
            );
            assert_eq!(store.get("a/b/c").await.unwrap(), Some(first));
        }
        assert_eq!(mem.stats(), WriteStats { puts: 1, bytes: 5 });
        let left: Vec<_> = std::fs::read_dir(dir.path().join("a/b"))
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, ["c"], "no temporary file left behind");
        let err = fs.put_if_absent("a/../x", Bytes::new()).await.unwrap_err();
        assert!(err.to_string().contains("not a valid key"), "{err}");
    });
}

#[test]
fn a_discarding_store_keeps_only_the_parts_of_chunk_lists() {
    rt().block_on(async {
        let store = MemBlobs::discarding();
        let hash = ChunkHash::of(b"records");
        let list = list_key(LOG, &hash);
        store
            .put(&list, Bytes::from_static(b"records"))
            .await
            .unwrap();
        store
            .put(
                &chunk_key(LOG, &hash, FORMAT_VERSION),
                Bytes::from_static(b"chunk"),
            )
            .await
            .unwrap();
        let parts = ["man", "ifest"].map(|p: &'static str| Bytes::from_static(p.as_bytes()));
        store
            .put_parts(&manifest_key(LOG, 1), &mut PartsOf(parts.into_iter()))
            .await
            .unwrap();
        assert_eq!(store.get(&list).await.unwrap().unwrap(), &b"records"[..]);
        assert!(store.get(&manifest_key(LOG, 1)).await.unwrap().is_none());
        assert!(store.exists(&manifest_key(LOG, 1)).await.unwrap());
        assert_eq!(
            store.stats(),
            WriteStats {
                puts: 3,
                bytes: 7 + 5 + 8
            }
        );
    });
}

// ---- behaviour at the edges ----

#[test]
fn rebuilding_a_snapshot_is_idempotent_and_leaves_no_new_objects() {
    rt().block_on(async {
        let store = MemBlobs::new();
        let payloads = MemImports::new();
        let entries = entries_of(
            &[Spec::Event(crate::test_support::set_cells((0..200).map(
                |r| {
                    (
                        CellRef { row: r, col: 0 },
                        Value::Text(format!("row {r} {}", "x".repeat(40))),
                    )
                },
            )))],
            &payloads,
        );
        let a = build(&store, &payloads, SMALL, 1, None, &entries).await;
        let keys = store.keys();
        store.reset_stats();
        let b = build(&store, &payloads, SMALL, 1, None, &entries).await;
        assert_eq!(a.manifest().unwrap(), b.manifest().unwrap());
        assert_eq!(store.keys(), keys, "same keys, nothing orphaned");
        assert_eq!(
            store.stats().puts,
            1,
            "only the manifest is put again; chunks exist"
        );
        assert!(a.manifest().unwrap().chunks.len() > 3);
        assert_eq!(
            a.manifest_key,
            format!("snapshots/{LOG}/manifests/00000000000000000001.json")
        );
    });
}

#[test]
fn a_corrupt_or_missing_chunk_is_reported_not_misread() {
    rt().block_on(async {
        let store = MemBlobs::new();
        let payloads = MemImports::new();
        let entries = entries_of(
            &[Spec::Event(crate::test_support::set_one(
                CellRef { row: 3, col: 3 },
                Value::Number(1.0),
            ))],
            &payloads,
        );
        let m = build(&store, &payloads, SMALL, 1, None, &entries)
            .await
            .manifest()
            .unwrap();
        let key = chunk_key(LOG, &m.chunks[0].hash, m.format);
        let mut blob = store.get(&key).await.unwrap().unwrap().to_vec();
        let last = blob.len() - 1;
        blob[last] ^= 0x55;
        store.put(&key, Bytes::from(blob)).await.unwrap();
        let err = materialize(&store, &m).await.unwrap_err().to_string();
        assert!(err.contains("is corrupt"), "{err}");
        let empty = MemBlobs::new();
        let err = materialize(&empty, &m).await.unwrap_err().to_string();
        assert!(err.contains("is missing"), "{err}");
    });
}

#[test]
fn builder_rejects_gaps_and_foreign_checkpoints() {
    rt().block_on(async {
        let store = MemBlobs::new();
        let payloads = MemImports::new();
        let e = |seq| LogEntry {
            seq,
            entry: EntryBody::Snapshot,
            payload: None,
        };
        let err = SnapshotBuilder::new(&store, &payloads, SMALL, LOG, 3, None, vec![e(0), e(2)])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid build input: expected the entry at sequence 1, got 2"
        );
        let err = SnapshotBuilder::new(&store, &payloads, SMALL, LOG, 3, None, vec![e(0), e(1)])
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid build input: entries stop at 2, the snapshot is at 3"
        );
        let cp = Checkpoint {
            format: format::FORMAT_VERSION,
            log_id: LOG,
            seq: 9,
            base_seq: None,
            chunk_target: 160,
            consumed: 0,
            import: None,
            next_chunk_start: 0,
            pieces: Default::default(),
            stats: BuildStats::default(),
        };
        let err = SnapshotBuilder::resume(
            &store,
            &payloads,
            SMALL,
            LOG,
            2,
            None,
            vec![e(0), e(1)],
            &cp,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("log id or sequence differs"),
            "{err}"
        );
    });
}

#[test]
fn filesystem_store_round_trips_a_snapshot() {
    rt().block_on(async {
        let dir = tempfile::tempdir().unwrap();
        let store = FsBlobs::new(dir.path());
        let payloads = FsImports::new(dir.path());
        std::fs::write(dir.path().join("in.csv"), "a,1\nb,2\n").unwrap();
        let entries = vec![LogEntry {
            seq: 0,
            entry: EntryBody::Event(Event::Import(Import {
                format: ImportFormat::Csv,
                group: None,
                layout: None,
            })),
            payload: Some("in.csv".into()),
        }];
        let built = build_snapshot(&store, &payloads, SMALL, LOG, 1, None, entries)
            .await
            .unwrap();
        let m = load_manifest(&store, LOG, 1).await.unwrap().unwrap();
        assert_eq!(m, built.manifest().unwrap());
        let sheet = materialize(&store, &m).await.unwrap();
        assert_eq!(
            sheet.read_range("A1:B2".parse().unwrap()),
            vec![
                vec![Value::Text("a".into()), Value::Number(1.0)],
                vec![Value::Text("b".into()), Value::Number(2.0)],
            ]
        );
        assert!(store.get("../etc/passwd").await.is_err());
        assert_eq!(load_manifest(&store, LOG, 2).await.unwrap(), None);
    });
}

#[test]
fn xlsx_imports_stream_into_a_snapshot() {
    let mut book = rust_xlsxwriter::Workbook::new();
    let ws = book.add_worksheet();
    for r in 0..300u32 {
        ws.write_string(r, 0, format!("row {r}")).unwrap();
        ws.write_number(r, 1, f64::from(r)).unwrap();
    }
    let bytes = book.save_to_buffer().unwrap();
    rt().block_on(async {
        let store = MemBlobs::new();
        let payloads = MemImports::new();
        payloads.insert("x", bytes.clone());
        let entries = vec![LogEntry {
            seq: 0,
            entry: EntryBody::Event(Event::Import(Import {
                format: ImportFormat::Xlsx,
                group: None,
                layout: None,
            })),
            payload: Some("x".into()),
        }];
        let mut cps = Vec::new();
        let built = SnapshotBuilder::new(&store, &payloads, SMALL, LOG, 1, None, entries.clone())
            .unwrap()
            .run(|c| cps.push(c))
            .await
            .unwrap();
        assert!(built.manifest().unwrap().chunks.len() > 2);
        let mut want = Sheet::new();
        want.import_bytes(ImportFormat::Xlsx, Cursor::new(bytes))
            .unwrap();
        assert_eq!(
            materialize(&store, &built.manifest().unwrap())
                .await
                .unwrap(),
            want
        );
        // Resume an XLSX import halfway.
        let cp = &cps[cps.len() / 2];
        let resumed = SnapshotBuilder::resume(&store, &payloads, SMALL, LOG, 1, None, entries, cp)
            .unwrap()
            .run(|_| {})
            .await
            .unwrap();
        assert_eq!(resumed.manifest().unwrap(), built.manifest().unwrap());
    });
}

#[test]
fn xlsx_formulas_import_into_chunks_that_count_them() {
    let mut book = rust_xlsxwriter::Workbook::new();
    let ws = book.add_worksheet();
    for r in 0..300u32 {
        ws.write_number(r, 0, f64::from(r)).unwrap();
        if r < 100 {
            ws.write_formula(r, 1, format!("A{}*2", r + 1).as_str())
                .unwrap();
            ws.set_formula_result(r, 1, (r * 2).to_string());
        }
    }
    let bytes = book.save_to_buffer().unwrap();
    rt().block_on(async {
        let store = MemBlobs::new();
        let payloads = MemImports::new();
        payloads.insert("x", bytes.clone());
        let insert =
            Event::from_json(br#"{"type":"insert-rows","body":{"at":1,"count":1}}"#).unwrap();
        let entries = vec![
            LogEntry {
                seq: 0,
                entry: EntryBody::Event(Event::Import(Import {
                    format: ImportFormat::Xlsx,
                    group: None,
                    layout: None,
                })),
                payload: Some("x".into()),
            },
            LogEntry::event(1, insert.clone()),
        ];
        // The import alone: its chunks count the formulas, and hold them with their values.
        let m = build(&store, &payloads, SMALL, 1, None, &entries[..1])
            .await
            .manifest()
            .unwrap();
        assert!(m.chunks.len() > 2);
        assert_eq!(m.chunks.iter().map(|c| c.formulas).sum::<u64>(), 100);
        assert!(m.chunks[0].formulas > 0);
        assert_eq!(m.chunks.last().unwrap().formulas, 0);
        let mut want = Sheet::new();
        want.import_bytes(ImportFormat::Xlsx, Cursor::new(bytes))
            .unwrap();
        let sheet = materialize(&store, &m).await.unwrap();
        assert_eq!(sheet, want);
        assert_eq!(
            sheet.get("B100".parse().unwrap()).map(|c| &c.value),
            Some(&Value::Formula(crate::formula::Formula {
                text: "A100*2".into(),
                cached: Some(Box::new(Value::Number(198.0))),
            }))
        );
        // A row inserted above moves the references in every chunk that holds formulas.
        let m = build(&store, &payloads, SMALL, 2, None, &entries)
            .await
            .manifest()
            .unwrap();
        want.apply(&insert, None).unwrap();
        let sheet = materialize(&store, &m).await.unwrap();
        assert_eq!(sheet, want);
        assert!(matches!(
            sheet.get("B101".parse().unwrap()).map(|c| &c.value),
            Some(Value::Formula(f)) if &*f.text == "A101*2"
        ));
    });
}

#[test]
fn a_formatted_cell_survives_the_chunk_format() {
    rt().block_on(async {
        let store = MemBlobs::new();
        let payloads = MemImports::new();
        let ev = Event::from_json(br#"{"type":"set","body":{"cells":[{"ref":"B3","value":0.125,"format":"0.00%"},{"ref":"C3","value":null,"format":"@"}]}}"#).unwrap();
        let entries = vec![LogEntry::event(0, ev)];
        let m = build(&store, &payloads, SMALL, 1, None, &entries).await.manifest().unwrap();
        let sheet = materialize(&store, &m).await.unwrap();
        assert_eq!(sheet.get("B3".parse().unwrap()), Some(&Cell::new(Value::Number(0.125), Some("0.00%"))));
        assert_eq!(sheet.get("C3".parse().unwrap()), Some(&Cell::new(Value::Empty, Some("@"))));
        assert_eq!((m.rows, m.cells), (3, 2));
    });
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The extent from a snapshot at k and the entries after it holds every non-empty cell of the
    /// sheet at n, and is no larger than the bound the same events give from empty.
    #[test]
    fn the_extent_holds_every_cell((specs, (k, _)) in case()) {
        let payloads = MemImports::new();
        let entries = entries_of(&specs, &payloads);
        let n = entries.len() as u64;
        let want = replay(&entries, n, &payloads);
        rt().block_on(async {
            let store = MemBlobs::new();
            let snap = build(&store, &payloads, SMALL, k as u64, None, &entries).await;
            let e = extent(&payloads, Some(&snap.manifest().unwrap()), &entries[k..]).await.unwrap();
            let from_empty = extent(&payloads, None, &entries).await.unwrap();
            for row in want.rows() {
                for (col, cell) in &row.cells {
                    if cell.value != Value::Empty {
                        prop_assert!(row.index < e.rows && *col < e.columns,
                            "cell ({}, {}) outside {:?}", row.index, col, e);
                        prop_assert!(row.index < from_empty.rows && *col < from_empty.columns);
                    }
                }
            }
            Ok(())
        })?;
    }
}

#[test]
fn the_extent_follows_inserts_and_deletes() {
    let payloads = MemImports::new();
    let mut csv = Vec::new();
    write_sample_csv(&mut csv, 60).unwrap();
    payloads.insert("p/0", csv);
    let set = |seq, r: &str| {
        LogEntry::event(
            seq,
            crate::test_support::set_one(r.parse().unwrap(), Value::Number(1.0)),
        )
    };
    let entries = [
        LogEntry {
            seq: 0,
            entry: EntryBody::Event(Event::Import(Import {
                format: ImportFormat::Csv,
                group: None,
                layout: None,
            })),
            payload: Some("p/0".into()),
        },
        set(1, "L70"),
        LogEntry::event(
            2,
            Event::InsertRows(InsertRows {
                at: RowNumber(0),
                count: 5,
                values: vec![],
            }),
        ),
        LogEntry::event(
            3,
            Event::DeleteColumns(DeleteColumns {
                at: ColumnName(0),
                count: 2,
            }),
        ),
    ];
    let e = |n: usize| {
        rt().block_on(extent(&payloads, None, &entries[..n]))
            .unwrap()
    };
    assert_eq!(
        e(1),
        Extent {
            rows: 60,
            columns: SAMPLE_COLS
        }
    );
    assert_eq!(
        e(2),
        Extent {
            rows: 70,
            columns: 12
        }
    );
    assert_eq!(
        e(3),
        Extent {
            rows: 75,
            columns: 12
        }
    );
    assert_eq!(
        e(4),
        Extent {
            rows: 75,
            columns: 10
        }
    );
    assert_eq!(
        rt().block_on(extent(&payloads, None, &[])).unwrap(),
        Extent {
            rows: 0,
            columns: 0
        }
    );
}

/// CSV text with what the encoded import path must get exactly right: quoted fields with commas
/// and newlines, empty fields and empty records, non-ASCII and invalid UTF-8, every value kind,
/// rows of 128 cells and more (a cell count of two varint bytes), over-long text.
fn tricky_csv() -> impl Strategy<Value = Vec<u8>> {
    let field = prop_oneof![
        4 => "[a-z0-9 ]{0,12}".prop_map(String::into_bytes),
        2 => prop_oneof![
            Just("TRUE"), Just("false"), Just("#N/A"), Just("-0"), Just("1e3"), Just("0.25"),
            Just("123456789012345678"), Just("inf"), Just("\"a,b\""), Just("\"two\nlines\""),
            Just("é ü 漢字"), Just(""),
        ].prop_map(|s| s.as_bytes().to_vec()),
        1 => Just(vec![b'x', 0xff, 0xfe, b'y']),
        1 => Just(vec![b'z'; 32_800]),
    ];
    let row = prop_oneof![
        8 => proptest::collection::vec(field.clone(), 0..12),
        1 => proptest::collection::vec(field, 120..140),
    ];
    proptest::collection::vec(row, 0..30).prop_map(|rows| {
        let mut out = Vec::new();
        for r in rows {
            out.extend(r.join(&b","[..]));
            out.push(b'\n');
        }
        out
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// A from-scratch import encodes rows in the reader thread, straight from the CSV parser's
    /// buffer; it must give the bytes of the general path (a `Row` per row, encoded by the
    /// chunk builder), and checkpoint and resume the same way.
    #[test]
    fn an_encoded_import_gives_the_bytes_of_the_general_path(csv in tricky_csv()) {
        let payloads = MemImports::new();
        payloads.insert("p", csv);
        let entries = vec![LogEntry {
            seq: 0,
            entry: EntryBody::Event(Event::Import(Import { format: ImportFormat::Csv, group: None, layout: None })),
            payload: Some("p".into()),
        }];
        rt().block_on(async {
            let encoded = MemBlobs::new();
            let mut checkpoints = Vec::new();
            let e = SnapshotBuilder::new(&encoded, &payloads, SMALL, LOG, 1, None, entries.clone())
                .unwrap()
                .run(|cp| checkpoints.push(cp))
                .await
                .unwrap();
            let general = MemBlobs::new();
            let mut general_checkpoints = Vec::new();
            let g = SnapshotBuilder::new(&general, &payloads, SMALL, LOG, 1, None, entries.clone())
                .unwrap()
                .decoding_imports()
                .run(|cp| general_checkpoints.push(cp))
                .await
                .unwrap();
            prop_assert_eq!(&e.manifest().unwrap(), &g.manifest().unwrap());
            prop_assert_eq!(snapshot_blobs(&encoded, &e.manifest().unwrap()), snapshot_blobs(&general, &g.manifest().unwrap()));
            prop_assert_eq!(&checkpoints, &general_checkpoints);
            prop_assert_eq!(&materialize(&encoded, &e.manifest().unwrap()).await.unwrap(), &replay(&entries, 1, &payloads));
            // Resumed from its last checkpoint, the encoded build finishes the same.
            if let Some(cp) = checkpoints.last() {
                let resumed = SnapshotBuilder::resume(&encoded, &payloads, SMALL, LOG, 1, None, entries.clone(), cp)
                    .unwrap()
                    .run(|_| {})
                    .await
                    .unwrap();
                prop_assert_eq!(&resumed.manifest().unwrap(), &g.manifest().unwrap());
            }
            Ok(())
        })?;
    }
}

/// Counts the chunk puts under way at once; each put yields before it lands.
#[derive(Debug, Default)]
struct OverlappingPuts {
    inner: MemBlobs,
    now: std::sync::atomic::AtomicUsize,
    most: std::sync::atomic::AtomicUsize,
}

#[async_trait::async_trait]
impl BlobStore for OverlappingPuts {
    async fn put(&self, key: &str, bytes: Bytes) -> Result<(), BlobError> {
        use std::sync::atomic::Ordering;
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.most.fetch_max(now, Ordering::SeqCst);
        tokio::task::yield_now().await;
        let out = self.inner.put(key, bytes).await;
        self.now.fetch_sub(1, Ordering::SeqCst);
        out
    }

    async fn get(&self, key: &str) -> Result<Option<Bytes>, BlobError> {
        self.inner.get(key).await
    }

    async fn exists(&self, key: &str) -> Result<bool, BlobError> {
        self.inner.exists(key).await
    }
}

/// Chunks are written several at a time (a build one chunk at a time waits out each chunk's
/// requests in turn, tens of milliseconds each on S3), yet every chunk a checkpoint names is in
/// the store when the checkpoint is handed over: a process that dies right after saving it
/// resumes from chunks that exist.
#[test]
fn chunks_are_written_together_and_stored_before_any_checkpoint_names_them() {
    rt().block_on(async {
        let store = OverlappingPuts::default();
        let (payloads, entries) = sample_import(4_000);
        let config = BuildConfig { chunk_target: 512 };
        let mut checked = 0;
        let done = SnapshotBuilder::new(&store, &payloads, config, LOG, 1, None, entries)
            .unwrap()
            .with_list_block(256)
            .run(|cp| {
                let stored = store.inner.snapshot();
                assert_eq!(store.now.load(std::sync::atomic::Ordering::SeqCst), 0);
                let mut named: Vec<Piece> = cp
                    .pieces
                    .parts()
                    .iter()
                    .flat_map(|h| {
                        let part = stored
                            .get(&list_key(LOG, h))
                            .unwrap_or_else(|| panic!("list part {h:?} not stored"));
                        super::chunk_list::records(part)
                            .map(Result::unwrap)
                            .collect::<Vec<_>>()
                    })
                    .collect();
                named.extend(cp.pieces.iter().map(Result::unwrap));
                for p in named {
                    if let Piece::New(c) = p {
                        let key = chunk_key(LOG, &c.hash, FORMAT_VERSION);
                        assert!(stored.contains_key(&key), "checkpoint names unstored {key}");
                        checked += 1;
                    }
                }
            })
            .await
            .unwrap();
        let most = store.most.load(std::sync::atomic::Ordering::SeqCst);
        assert!(done.chunks > 100, "{} chunks", done.chunks);
        assert!(checked > done.chunks, "only {checked} chunk names checked");
        assert!(most > 1, "at most {most} put under way at once");
        assert!(most <= output::CHUNKS_IN_FLIGHT, "{most} puts at once");
        // The same bytes as a build into a plain store.
        let plain = MemBlobs::new();
        let (kept, _) = import_with_checkpoints(&plain, 4_000, config, Some(256)).await;
        assert_eq!(kept.manifest_key, done.manifest_key);
        assert_eq!(plain.snapshot(), store.inner.snapshot());
    });
}
