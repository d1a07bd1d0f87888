//! Pushes whose mutations carry `baseSeq`, over the in-memory store: each mutation is moved
//! through what other writers committed after its base, but never through its own client's
//! earlier mutations, which its author already saw (as sent).
#![cfg(feature = "engine")]

use crate::domain::NewEntry;
use crate::faults::FaultyLogStore;
use crate::log::test_support::{
    delete_rows, insert_rows, log_with_rows, mem_log, set, sheet, text,
};
use crate::log::tests::always_stale;
use crate::log::*;
use crate::memory::{MemLogStore, MemPayloadStore};
use crate::ports::LogStore;
use crate::sheet::entry::EntryBody;
use crate::sheet::event::Event;

fn based(id: u64, event: Event, base: u64) -> PushedMutation {
    PushedMutation {
        id,
        event: Ok(event),
        base: Some(base),
        then: Vec::new(),
    }
}

/// Pushes one client's mutations until all are applied; the reasons of the rejected ones.
async fn push<S: LogStore>(
    log: &EventLog<S, MemPayloadStore>,
    id: LogId,
    client: &str,
    mutations: &[PushedMutation],
) -> Vec<Rejected> {
    let mut reasons = Vec::new();
    loop {
        match log
            .push_run(id, "g", client, mutations, None, RunSource::Push)
            .await
            .expect("push")
        {
            RunOutcome::Applied { rejected, .. } => reasons.extend(rejected),
            RunOutcome::AlreadyApplied { .. } => return reasons,
        }
    }
}

/// The runs of every `mutations` entry, in log order.
async fn runs<S: LogStore>(
    log: &EventLog<S, MemPayloadStore>,
    id: LogId,
) -> Vec<crate::sheet::mutations::Mutations> {
    let page = log.read_since(id, 0, 10_000).await.expect("read");
    page.entries
        .iter()
        .flat_map(|e| {
            EntryBody::decode(e.kind.0, e.version, &e.body)
                .expect("decode")
                .runs()
                .to_vec()
        })
        .collect()
}

#[tokio::test]
async fn a_pushed_edit_follows_its_row_through_another_clients_insert() {
    let log = mem_log();
    let (id, base) = log_with_rows(&log).await;
    // A inserts a row above row 2; B, who had not seen it, notes something next to r5.
    assert!(
        push(&log, id, "a", &[based(1, insert_rows(2, 1), base)])
            .await
            .is_empty()
    );
    assert!(
        push(&log, id, "b", &[based(1, set("B5", "note"), base)])
            .await
            .is_empty()
    );
    let s = sheet(&log, id).await;
    assert_eq!(text(&s, "A6").as_deref(), Some("r5"));
    assert_eq!(text(&s, "B6").as_deref(), Some("note"));
    assert_eq!(text(&s, "B5"), None);
    // A cell edit that moved is not recorded as sent: only row and column changes are.
    assert!(runs(&log, id).await.iter().all(|r| r.sent.is_empty()));
}

#[tokio::test]
async fn without_a_base_a_mutation_applies_as_sent() {
    let log = mem_log();
    let (id, base) = log_with_rows(&log).await;
    push(&log, id, "a", &[based(1, insert_rows(2, 1), base)]).await;
    push(
        &log,
        id,
        "b",
        &[PushedMutation::new(1, Ok(set("B5", "old client")))],
    )
    .await;
    let s = sheet(&log, id).await;
    assert_eq!(text(&s, "B5").as_deref(), Some("old client"));
}

#[tokio::test]
async fn a_clients_own_earlier_mutations_are_part_of_its_view() {
    let log = mem_log();
    let (id, base) = log_with_rows(&log).await;
    // B inserts a row above row 2 and then, in the view that holds its insert, types next to r5
    // (now row 6). In one push, and with the insert already applied by an earlier push.
    push(
        &log,
        id,
        "b",
        &[
            based(1, insert_rows(2, 1), base),
            based(2, set("B6", "same push"), base),
        ],
    )
    .await;
    push(&log, id, "b", &[based(3, set("C6", "later push"), base)]).await;
    let s = sheet(&log, id).await;
    assert_eq!(text(&s, "A6").as_deref(), Some("r5"));
    assert_eq!(text(&s, "B6").as_deref(), Some("same push"));
    assert_eq!(text(&s, "C6").as_deref(), Some("later push"));
}

#[tokio::test]
async fn an_edit_in_a_row_its_own_moved_insert_created_follows_that_insert() {
    let log = mem_log();
    let (id, base) = log_with_rows(&log).await;
    // A inserts two rows at the top. B, not having seen them, inserts a row above r3 and types
    // into the new row (row 3 in B's view); B's insert lands above r3 at row 5, and so must the
    // text, also when it is pushed after the insert was applied.
    push(&log, id, "a", &[based(1, insert_rows(1, 2), base)]).await;
    push(&log, id, "b", &[based(1, insert_rows(3, 1), base)]).await;
    let recorded = runs(&log, id).await;
    let b_run = recorded.iter().find(|r| r.client == "b").expect("b's run");
    assert_eq!(b_run.sent_as(1), Some(&insert_rows(3, 1)));
    assert_eq!(b_run.applied[0].event, insert_rows(5, 1));
    push(&log, id, "b", &[based(2, set("A3", "new row"), base)]).await;
    let s = sheet(&log, id).await;
    assert_eq!(text(&s, "A5").as_deref(), Some("new row"));
    assert_eq!(text(&s, "A6").as_deref(), Some("r3"));
}

#[tokio::test]
async fn an_edit_whose_row_was_deleted_is_rejected_with_a_reason() {
    let log = mem_log();
    let (id, base) = log_with_rows(&log).await;
    push(&log, id, "a", &[based(1, delete_rows(5, 1), base)]).await;
    let rejected = push(
        &log,
        id,
        "b",
        &[
            based(1, set("B5", "lost"), base),
            based(2, set("B6", "kept"), base),
        ],
    )
    .await;
    assert_eq!(rejected.len(), 1, "{rejected:?}");
    assert_eq!(rejected[0].id, 1);
    assert!(
        rejected[0].reason.contains("deleted"),
        "{}",
        rejected[0].reason
    );
    let s = sheet(&log, id).await;
    // r6 moved up to row 5, and B's edit next to r6 with it.
    assert_eq!(text(&s, "A5").as_deref(), Some("r6"));
    assert_eq!(text(&s, "B5").as_deref(), Some("kept"));
    // The client moved past the rejected mutation.
    let last = log.last_mutation(id, "b").await.expect("read").expect("b");
    assert_eq!(last.last, 2);
}

/// "An insert inside a deleted range survives": b deletes rows 2..4 of r1..r6 while a inserts a
/// row above r3. The delete applies as two deletes under its one mutation id, around a's row,
/// and b's next edit, made in its view where r5 is row 2, still lands next to r5.
#[tokio::test]
async fn a_delete_split_by_a_concurrent_insert_applies_around_the_inserted_row() {
    let log = mem_log();
    let (id, base) = log_with_rows(&log).await;
    push(&log, id, "a", &[based(1, insert_rows(3, 1), base)]).await;
    push(&log, id, "a", &[based(2, set("A3", "new"), base + 1)]).await;
    let rejected = push(
        &log,
        id,
        "b",
        &[
            based(1, delete_rows(2, 3), base),
            based(2, set("B2", "next to r5"), base),
        ],
    )
    .await;
    assert!(rejected.is_empty(), "{rejected:?}");
    let recorded = runs(&log, id).await;
    let b_run = recorded.iter().find(|r| r.client == "b").expect("b's run");
    let ids: Vec<u64> = b_run.applied.iter().map(|m| m.id).collect();
    assert_eq!(ids, vec![1, 1, 2], "one mutation, two deletes");
    assert_eq!(b_run.applied[0].event, delete_rows(4, 2));
    assert_eq!(b_run.applied[1].event, delete_rows(2, 1));
    assert_eq!(b_run.sent_as(1), Some(&delete_rows(2, 3)));
    assert!(b_run.rejected().is_empty());
    let s = sheet(&log, id).await;
    for (a1, want) in [("A1", "r1"), ("A2", "new"), ("A3", "r5"), ("A4", "r6")] {
        assert_eq!(text(&s, a1).as_deref(), Some(want), "{a1}");
    }
    assert_eq!(text(&s, "B3").as_deref(), Some("next to r5"));
}

#[tokio::test]
async fn a_base_past_the_end_or_too_old_is_rejected() {
    let log = mem_log();
    let (id, base) = log_with_rows(&log).await;
    let rejected = push(&log, id, "b", &[based(1, set("A1", "x"), base + 5)]).await;
    assert_eq!(rejected.len(), 1);
    assert!(
        rejected[0].reason.contains("past the log's end"),
        "{}",
        rejected[0].reason
    );
    let (code, version, body) = set("Z1", "filler").encode();
    for _ in 0..MAX_REBASE_ENTRIES {
        log.append(
            id,
            NewEntry::new(EntryType(code), version, body.clone()),
            AppendOptions::default(),
        )
        .await
        .expect("filler");
    }
    let rejected = push(&log, id, "b", &[based(2, set("A1", "x"), base)]).await;
    assert_eq!(rejected.len(), 1);
    assert!(
        rejected[0].reason.contains("entries old"),
        "{}",
        rejected[0].reason
    );
}

/// A push whose every base is out of the window rejects those mutations without reading the
/// window (as `POST /entries` refuses such a base up front): it reads no more than the same push
/// without bases.
#[tokio::test]
async fn a_push_whose_every_base_is_too_old_reads_no_history() {
    let log = mem_log();
    let (id, base) = log_with_rows(&log).await;
    let (code, version, body) = set("Z1", "filler").encode();
    for _ in 0..=MAX_REBASE_ENTRIES {
        log.append(
            id,
            NewEntry::new(EntryType(code), version, body.clone()),
            AppendOptions::default(),
        )
        .await
        .expect("filler");
    }
    let batch = |client: &str, base: Option<u64>| ClientPush {
        group: "g".into(),
        client: client.into(),
        mutations: (1..=3)
            .map(|i| PushedMutation {
                id: i,
                event: Ok(set("A1", "x")),
                base,
                then: Vec::new(),
            })
            .collect(),
    };
    let old = log
        .push_batch(id, &[batch("old", Some(base))], None)
        .await
        .expect("push");
    let plain = log
        .push_batch(id, &[batch("plain", None)], None)
        .await
        .expect("push");
    assert!(
        matches!(&old.clients[0], ClientResult::Done { last: 3, .. }),
        "{:?}",
        old.clients
    );
    let runs = runs(&log, id).await;
    let old_run = runs.iter().find(|r| r.client == "old").expect("its run");
    assert_eq!(
        old_run.rejected(),
        vec![1, 2, 3],
        "every mutation is too old"
    );
    assert!(
        old.units.read <= plain.units.read,
        "a push of too-old bases read {} RRU, the same push without bases {}",
        old.units.read,
        plain.units.read
    );
}

/// A direct push of several runs reads the history since its base once, not once per run: the
/// later runs read only the entries the earlier ones appended.
#[tokio::test]
async fn a_push_of_many_runs_reads_the_window_once() {
    let log = mem_log();
    let (id, base) = log_with_rows(&log).await;
    let (code, version, body) = set("Z1", "filler").encode();
    for _ in 0..4_000 {
        log.append(
            id,
            NewEntry::new(EntryType(code), version, body.clone()),
            AppendOptions::default(),
        )
        .await
        .expect("filler");
    }
    let mutations: Vec<PushedMutation> = (1..=2_500)
        .map(|i| based(i, set("A1", "x"), base))
        .collect();
    let mut state = RunState::default();
    let mut reads = Vec::new();
    while let RunOutcome::Applied { appended, .. } = log
        .push_run_with(id, "g", "c", &mutations, None, RunSource::Push, &mut state)
        .await
        .expect("push")
    {
        reads.push(appended.units.read);
    }
    assert_eq!(reads.len(), 3, "runs of 1,000: {reads:?}");
    // The first run reads the 4,000 entries; each later one a few units (the head, the client,
    // the entry the run before it wrote), far from another read of the window.
    assert!(
        reads[1..].iter().all(|r| *r * 2.0 < reads[0]),
        "read units per run: {reads:?}"
    );
}

#[tokio::test]
async fn a_batch_rebases_each_run_through_the_runs_before_it_in_the_entry() {
    let log = mem_log();
    let (id, base) = log_with_rows(&log).await;
    let pushes = [
        ClientPush {
            group: "g".into(),
            client: "a".into(),
            mutations: vec![based(1, insert_rows(2, 1), base)],
        },
        ClientPush {
            group: "g".into(),
            client: "b".into(),
            mutations: vec![based(1, set("B5", "note"), base)],
        },
    ];
    let out = log.push_batch(id, &pushes, None).await.expect("batch");
    assert_eq!(out.appended.len(), 1, "one entry for both runs");
    let s = sheet(&log, id).await;
    assert_eq!(text(&s, "B6").as_deref(), Some("note"));
}

/// Eventually consistent reads (modelled by the fault adapter) that miss the newest entries must
/// not let a push rebase through less than was committed before its entry.
#[tokio::test]
async fn stale_reads_do_not_hide_an_insert_a_pushed_edit_must_follow() {
    let store = FaultyLogStore::new(MemLogStore::new(), always_stale());
    let log = EventLog::new(store, MemPayloadStore::new(), LogConfig::default()).expect("log");
    let (id, base) = log_with_rows(&log).await;
    push(&log, id, "a", &[based(1, insert_rows(2, 1), base)]).await;
    push(&log, id, "b", &[based(1, set("B5", "note"), base)]).await;
    let s = sheet(&log, id).await;
    assert_eq!(text(&s, "B6").as_deref(), Some("note"));
}

#[test]
fn base_seq_is_taken_from_the_arguments() {
    let m = PushedMutation::from_args(
        3,
        "set",
        serde_json::json!({"cells": [{"ref": "B5", "value": "x"}], "baseSeq": 12}),
    );
    assert_eq!(m.base, Some(12));
    assert!(m.event.is_ok(), "{:?}", m.event);
    let m = PushedMutation::from_args(3, "set", serde_json::json!({"cells": []}));
    assert_eq!(m.base, None);
    for bad in [
        serde_json::json!(-1),
        serde_json::json!("12"),
        serde_json::json!(1.5),
    ] {
        let m = PushedMutation::from_args(
            3,
            "set",
            serde_json::json!({"cells": [{"ref": "B5", "value": "x"}], "baseSeq": bad}),
        );
        let reason = m.event.expect_err("refused");
        assert!(reason.contains("baseSeq"), "{reason}");
    }
    let m = PushedMutation::from_args(1, "import", serde_json::json!({}));
    assert!(m.event.is_err());
}
