//! `restore` entries against the in-memory state machine: the kept state equals a replay to the
//! restored sequence, and reads and builds that start before a restore and end after it equal a
//! replay that takes the restored sheet at the restore.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use proptest::prelude::*;

use super::tests::{LOG, SMALL, build, entries_of, replay, rt};
use super::*;
use crate::entry::EntryBody;
use crate::event::{Event, Restore, SetCells};
use crate::{CellEdit, CellRef, Range, Sheet, Value};

fn whole() -> Range {
    Range::new(CellRef { row: 0, col: 0 }, CellRef { row: 99, col: 13 })
}

/// The oracle with restores: the sheet after every entry before `seq`, where a `restore` takes
/// the sheet as of its sequence.
fn replay_restoring(entries: &[LogEntry], seq: u64, payloads: &MemImports) -> Sheet {
    let mut states: Vec<Sheet> = Vec::new();
    for n in 0..=seq as usize {
        let state = match n.checked_sub(1).map(|i| &entries[i]) {
            None => Sheet::new(),
            Some(e) => match restored_seq(e) {
                Some(to) => states[to as usize].clone(),
                None => {
                    let mut s = states[n - 1].clone();
                    for ev in e.entry.events() {
                        let payload = e.payload.as_ref().map(|k| {
                            Box::new(std::io::Cursor::new(payloads.get(k).expect("payload")))
                                as Box<dyn crate::import::ReadSeek>
                        });
                        s.apply(ev, payload).unwrap();
                    }
                    s
                }
            },
        };
        states.push(state);
    }
    states.pop().unwrap()
}

fn set(seq: u64, row: u32, text: &str) -> LogEntry {
    LogEntry::event(
        seq,
        Event::Set(SetCells {
            cells: vec![CellEdit {
                at: CellRef { row, col: 1 },
                value: Value::Text(text.into()),
                format: None,
            }],
        }),
    )
}

fn restore(seq: u64, to: u64) -> LogEntry {
    LogEntry {
        seq,
        entry: EntryBody::Event(Event::Restore(Restore {
            seq: to,
            group: None,
        })),
        payload: None,
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// History `specs`, a restore of version `to`, two edits after it; a snapshot at `k` before
    /// the version. The kept state is the version; a read from the snapshot through the restore,
    /// and a snapshot built through it, are the restored sheet with the later edits.
    #[test]
    fn reads_and_builds_through_a_restore_equal_the_replay(
        specs in proptest::collection::vec(super::tests::spec(), 1..14),
        picks in (0.0f64..1.0, 0.0f64..1.0),
    ) {
        let payloads = MemImports::new();
        let mut entries = entries_of(&specs, &payloads);
        let n = entries.len() as u64;
        let to = ((picks.0 * (n + 1) as f64) as u64).min(n);
        let k = ((picks.1 * (to + 1) as f64) as u64).min(to);
        entries.push(restore(n, to));
        entries.push(set(n + 1, 2, "after"));
        entries.push(set(n + 2, 80, "later"));
        let end = n + 3;
        let want_to = replay(&entries, to, &payloads);
        let want_end = replay_restoring(&entries, end, &payloads);
        rt().block_on(async {
            let store = MemBlobs::new();
            let snap = match k {
                0 => None,
                k => Some(build(&store, &payloads, SMALL, k, None, &entries).await.manifest().unwrap()),
            };
            let from = snap.as_ref().map_or(0, |m| m.seq) as usize;
            // The kept state of version `to`.
            let kept = SnapshotBuilder::restore(&store, &payloads, SMALL, LOG, to, snap.clone(), entries[from..to as usize].to_vec())
                .unwrap().run(|_| {}).await.unwrap();
            prop_assert_eq!(&kept.manifest_key, &restore_manifest_key(LOG, to));
            let got = materialize(&store, &restored_manifest(&store, LOG, to).await.unwrap()).await.unwrap();
            prop_assert_eq!(&got, &want_to);
            // A read from the snapshot to the end, through the restore.
            let (base, tail) = resolve_restores(&store, LOG, snap.clone(), entries[from..].to_vec()).await.unwrap();
            prop_assert_eq!(tail.len(), 2, "only the entries after the restore are left");
            let (values, _) = read_range(&store, &payloads, LOG, base.as_ref(), &tail, whole()).await.unwrap();
            prop_assert_eq!(values, want_end.read_range(whole()));
            // A snapshot built through it.
            let built = SnapshotBuilder::new(&store, &payloads, SMALL, LOG, end, base, tail)
                .unwrap().run(|_| {}).await.unwrap();
            let got = materialize(&store, &built.manifest().unwrap()).await.unwrap();
            prop_assert_eq!(&got, &want_end);
            Ok(())
        })?;
    }
}

/// A builder or a read handed a `restore` that was not resolved refuses it; skipping it would
/// silently show the sheet as if the restore never happened.
#[test]
fn an_unresolved_restore_is_refused_not_skipped() {
    rt().block_on(async {
        let store = MemBlobs::new();
        let payloads = MemImports::new();
        let entries = vec![set(0, 0, "a"), restore(1, 0), set(2, 0, "b")];
        let err = SnapshotBuilder::new(&store, &payloads, SMALL, LOG, 3, None, entries.clone())
            .unwrap_err();
        assert!(err.to_string().contains("not resolved"), "{err}");
        let err = read_range(&store, &payloads, LOG, None, &entries, whole())
            .await
            .unwrap_err();
        assert!(err.to_string().contains("not resolved"), "{err}");
        // Resolving needs the kept state; without it the error names the missing object.
        let err = resolve_restores(&store, LOG, None, entries)
            .await
            .unwrap_err();
        assert!(
            err.to_string().contains(&restore_manifest_key(LOG, 0)),
            "{err}"
        );
    });
}
